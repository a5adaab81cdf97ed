package cli

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	taskv1 "example.com/task-operator/apis/v1"
)

func TestRunsOfJobsAndTheCurrentRunRecord(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	job := func(name, attempt string, conds ...batchv1.JobCondition) batchv1.Job {
		return batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{taskv1.LabelAttempt: attempt}, CreationTimestamp: t0},
			Status:     batchv1.JobStatus{Conditions: conds},
		}
	}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: t0}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t0}
	record := func(jobName string, attempt int32, outcome taskv1.RunOutcome) *taskv1.Task {
		return &taskv1.Task{
			ObjectMeta: metav1.ObjectMeta{Name: "t"},
			Status: taskv1.TaskStatus{CurrentRun: &taskv1.RunRecord{
				Attempt: attempt, Job: taskv1.JobReference{Name: jobName}, Outcome: outcome, FinishTime: &t0,
			}},
		}
	}
	suspended := job("t-0-2", "2")
	suspended.Spec.Suspend = ptr.To(true)
	for _, tc := range []struct {
		name string
		task *taskv1.Task
		jobs []batchv1.Job
		want []string // job:outcome:jobExists
	}{
		{"no runs", &taskv1.Task{}, nil, nil},
		{"a failed attempt, then the current one", record("t-0-2", 2, taskv1.RunSucceeded),
			[]batchv1.Job{job("t-0-1", "1", failed), job("t-0-2", "2", complete)},
			[]string{"t-0-1:Failed:true", "t-0-2:Succeeded:true"}},
		{"the current attempt's Job is gone", record("t-0-2", 2, taskv1.RunFailed),
			[]batchv1.Job{job("t-0-1", "1", failed)},
			[]string{"t-0-1:Failed:true", "t-0-2:Failed:false"}},
		{"the record wins over a Job deleted while active", record("t-0-1", 1, taskv1.RunFailed),
			[]batchv1.Job{job("t-0-1", "1")},
			[]string{"t-0-1:Failed:true"}},
		{"a suspended Job of an active run says Suspended", record("t-0-2", 2, taskv1.RunActive),
			[]batchv1.Job{suspended},
			[]string{"t-0-2:Suspended:true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := runsOf(tc.task, tc.jobs)
			var got []string
			for _, r := range runs {
				got = append(got, r.Job+":"+r.Outcome+":"+map[bool]string{true: "true", false: "false"}[r.JobExists])
			}
			if len(got) != len(tc.want) {
				t.Fatalf("runs %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("run %d: %s, want %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
