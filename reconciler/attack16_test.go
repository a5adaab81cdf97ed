package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "example.com/task-operator/apis/v1"
)

// TestAttackSuspendedTaskAdmittedQueuedRunShowsSuspended: spec.suspend does not stop a queued
// run Kueue admitted (README's documented limit), so its pods run; yet the Task says Suspended
// (and kstatus "it has not run"). It should say Running while the Job runs.
func TestAttackSuspendedTaskAdmittedQueuedRunShowsSuspended(t *testing.T) {
	task := newTask(queued, func(t *v1.Task) { t.Spec.Suspend = true },
		withStatus(v1.TaskStatus{CurrentRun: run(0, 1, v1.RunActive, 0)}))
	jobs := []observedJob{queuedJob(200)} // admitted at 200, running, not suspended
	if flips := suspendFlips(task, jobs); len(flips) != 0 {
		t.Fatalf("precondition: the operator leaves a queued Job's suspend to Kueue, flips %v", flips)
	}
	st := computeStatus(task, jobs, at(210))
	if st.Phase != v1.PhaseRunning {
		t.Errorf("phase %s while the admitted queued Job runs (spec.suspend cannot stop it), want Running", st.Phase)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionProgressing); c == nil || c.Status != "True" {
		t.Errorf("Progressing %+v while the Job runs", c)
	}
}
