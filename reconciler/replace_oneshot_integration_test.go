package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestAOneShotRunReplacedByAnAddedScheduleIsNotAFailure: a one-shot run hangs; a schedule with
// concurrencyPolicy Replace is added. At its first time the one-shot run's Job is replaced, and
// the replaced run is not reported as failed (docs/guarantees.md, "Replace").
func TestAOneShotRunReplacedByAnAddedScheduleIsNotAFailure(t *testing.T) {
	testOneShotRunReplaced(t, false)
}

// TestAOneShotRunReplacedByAnAddedScheduleIsNotAFailureWhileItsJobIsHeld: the same, the replaced
// Job held a while longer by another controller's finalizer.
func TestAOneShotRunReplacedByAnAddedScheduleIsNotAFailureWhileItsJobIsHeld(t *testing.T) {
	testOneShotRunReplaced(t, true)
}

func testOneShotRunReplaced(t *testing.T, hold bool) {
	e := newEnv(t)
	task := e.create(e.task("replaced", withLabels(testenv.OutcomeLabel, testenv.OutcomeHang)))
	e.waitPhase(task.Name, v1.PhaseRunning)
	if hold {
		// Another controller's finalizer on the Job (a backup tool, an audit hook) keeps the
		// deleted Job readable after the operator releases it.
		job := &batchv1.Job{}
		if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: task.Name + "-0-1"}, job); err != nil {
			t.Fatal(err)
		}
		job.Finalizers = append(job.Finalizers, "example.com/hold")
		if err := e.c.Update(t.Context(), job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			job := &batchv1.Job{}
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: task.Name + "-0-1"}, job); err == nil {
				job.Finalizers = slices.DeleteFunc(job.Finalizers, func(f string) bool { return f == "example.com/hold" })
				_ = e.c.Update(context.Background(), job)
			}
		})
	}
	e.update(task.Name, func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "* * * * *", ConcurrencyPolicy: v1.ReplaceConcurrent}
	})
	got := e.waitStatus(task.Name, "the first scheduled run started", func(t *v1.Task) bool {
		return t.Status.LastScheduleTime != nil
	})
	t.Logf("started the run for %s", got.Status.LastScheduleTime)
	// Watch the status while the replaced Job is judged (5 s after its deletion) and released.
	var told []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cur := e.get(task.Name).Status
		for _, r := range cur.ActiveJobs {
			if r.Name == task.Name+"-0-1" && cur.LastScheduleTime != nil {
				told = append(told, fmt.Sprintf("the replaced Job %s listed active again (phase %s)", r.Name, cur.Phase))
			}
		}
		c := meta.FindStatusCondition(cur.Conditions, v1.ConditionFailed)
		if cur.LastError != "" || (c != nil && c.Status == "True") {
			told = append(told, fmt.Sprintf("lastError %q Failed=%s Ready=%t", cur.LastError, c.Status, meta.IsStatusConditionTrue(cur.Conditions, v1.ConditionReady)))
		}
	}
	if len(told) > 0 {
		t.Errorf("the one-shot run replaced by the schedule's: %d status reads tell of it: %v", len(told), slices.Compact(told))
	}
	got = e.get(task.Name)
	st := got.Status
	for _, j := range e.jobs(task.Name) {
		t.Logf("job %s deleting=%v finalizers=%v annotations=%v conditions=%+v", j.Name, j.DeletionTimestamp != nil, j.Finalizers, j.Annotations, j.Status.Conditions)
	}
	t.Logf("status: %s events %v currentRun %+v", describe(got), e.eventReasons(got), st.CurrentRun)
	failed := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed)
	if st.LastError != "" || (failed != nil && failed.Status == "True") {
		t.Errorf("the one-shot run replaced by the schedule's is reported as failed: lastError %q, Failed condition %+v", st.LastError, failed)
	}
	time.Sleep(5 * time.Second) // Events are sent asynchronously
	var events corev1.EventList
	if err := e.c.List(t.Context(), &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.InvolvedObject.UID == got.UID && ev.Reason == v1.EventRunFailed {
			t.Errorf("a %s %s Event for the replaced one-shot run: %q", ev.Type, ev.Reason, ev.Message)
		}
	}
}
