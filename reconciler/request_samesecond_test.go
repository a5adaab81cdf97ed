package reconciler

import (
	"testing"

	v1 "example.com/task-operator/apis/v1"
)

// TestRunRequestedAfterACancelInTheSameSecondStillRuns: `kubectl task cancel nightly` then
// `kubectl task run nightly` (the plugin prints "run requested ...; it starts once the active
// run ends") within one second set both annotations to the same time. The run was asked after
// the cancel: once the cancel has stopped the active run, the requested run starts.
func TestRunRequestedAfterACancelInTheSameSecondStillRuns(t *testing.T) {
	s := &sim{t: t, task: newTask(scheduled(v1.ForbidConcurrent))}
	if p := s.step(at(60)); p.create == nil {
		t.Fatalf("the schedule started nothing at %s", at(60))
	}
	request(v1.AnnotationCancelRequested, at(70))(s.task)
	request(v1.AnnotationRunRequested, at(70))(s.task)
	started := false
	for i := 70; i < 80 && !started; i++ {
		p := s.step(at(i))
		started = p.create != nil && p.requested
	}
	if !started {
		t.Fatalf("no run started for the run request at %s made after the cancel; status runRequest %v cancelRequest %v phase %s",
			at(70), s.task.Status.RunRequest, s.task.Status.CancelRequest, s.task.Status.Phase)
	}
}
