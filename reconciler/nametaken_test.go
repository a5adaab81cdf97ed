package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// A retry whose Job's name is someone else's: each look again (every nameTakenPollInterval, not
// every second although the retry is overdue) gives the same status as the last, so that it is
// no status write: the JobNameTaken conditions keep the time they became so.
func TestARetryBlockedByATakenNameLooksAgainEvery10SecondsWithoutAStatusWrite(t *testing.T) {
	task := newTask()
	first := observedJob{}
	first.Name, first.State, first.Finished = "t-0-1", jobFailed, at(10)
	first.Run = runID{Attempt: 1}
	jobs := []observedJob{first}
	taken := &errNameTaken{job: "t-0-2"}

	task.Status = statusAfter(task, jobs, at(20), true, plan{}, taken)
	stalled := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1.ReasonJobNameTaken {
		t.Fatalf("Stalled %+v", stalled)
	}
	again := statusAfter(task, jobs, at(30), true, plan{}, taken)
	for _, typ := range []string{v1.ConditionStalled, v1.ConditionReady, v1.ConditionProgressing, v1.ConditionReconciling} {
		before, after := meta.FindStatusCondition(task.Status.Conditions, typ), meta.FindStatusCondition(again.Conditions, typ)
		if before == nil || after == nil || !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
			t.Errorf("%s: %+v, then %+v: the look again changed its transition time", typ, before, after)
		}
	}

	s := &scope{task: task.DeepCopy(), jobs: jobs, now: at(30), kueueServed: true, nameTaken: taken}
	(&Reconciler{}).summarize(s)
	if s.result.RequeueAfter < nameTakenPollInterval {
		t.Errorf("looks again after %v, want %v: the overdue retry's own time would be every second", s.result.RequeueAfter, nameTakenPollInterval)
	}
}
