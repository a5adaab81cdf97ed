package reconciler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// TestScheduledTaskFailingHoldsWhileTheNextRunRuns: TaskOperatorScheduledTaskFailing fires
// when taskoperator_task_failing stays 1 for 5 minutes. A scheduled Task whose runs all fail
// for good (Failed=True, Ready=False LastRunFailed, kept by setScheduledOutcome while the next
// run is active) must keep reading as failing while that next run runs: were the gauge to drop
// to 0 at each run's start, a Task scheduled every few minutes that fails every time would
// never hold 1 for 5 minutes and never page anyone.
func TestScheduledTaskFailingHoldsWhileTheNextRunRuns(t *testing.T) {
	now := metav1.NewTime(time.Unix(10_000, 0))
	next := metav1.NewTime(now.Add(2 * time.Minute))
	failed := "Job every-2m-1 failed: exit code 1"
	task := &v1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "every-2m", Namespace: "ns"},
		Spec:       v1.TaskSpec{Schedule: &v1.Schedule{Cron: "*/2 * * * *"}},
		Status: v1.TaskStatus{
			Phase:       v1.PhaseRunning,
			NextRunTime: &next,
			LastError:   failed,
			CurrentRun:  &v1.RunRecord{Attempt: 1, ScheduledTime: &now, Job: v1.JobReference{Name: "every-2m-2"}},
			Conditions: []metav1.Condition{
				{Type: v1.ConditionFailed, Status: metav1.ConditionTrue, Reason: v1.ReasonRetriesExhausted, Message: failed},
				{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonLastRunFailed, Message: failed},
			},
		},
	}
	if !failedForGood(task) {
		t.Errorf("taskoperator_task_failing = 0 for a scheduled Task whose latest finished run failed for good (Failed=True, Ready=False) while its next run runs")
	}
}
