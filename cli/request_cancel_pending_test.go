package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

// TestCancelOfAPendingRerunIsSent: `kubectl task rerun report` then `kubectl task cancel report`
// before the operator started the rerun (it is slow, or stopped): the Task's status still says
// Succeeded, but a run request later than status.runRequest is pending, and the operator drops a
// pending run request that a cancel at or after it covers. The cancel has something to stop;
// saying "nothing to cancel" and sending nothing lets the unwanted run start.
func TestCancelOfAPendingRerunIsSent(t *testing.T) {
	honoured := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name     string
		honoured *metav1.Time
	}{
		{name: "first rerun", honoured: nil},
		{name: "a rerun after an earlier one", honoured: &honoured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{}
			task.Name = "report"
			task.Status.Phase = taskv1.PhaseSucceeded
			task.Status.RunRequest = tc.honoured
			task.Annotations = map[string]string{taskv1.AnnotationRunRequested: "2026-01-01T00:05:00Z"}
			if !cancellable(task) {
				t.Errorf("a Task with a pending run request (annotation %s, status.runRequest %v) is not cancellable: the cancel is not sent",
					task.Annotations[taskv1.AnnotationRunRequested], tc.honoured)
			}
		})
	}
}
