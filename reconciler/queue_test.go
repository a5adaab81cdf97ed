package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestQueueWithoutKueue: on a cluster without Kueue, a Task with spec.queueName creates no Job
// and says why (Admitted False, KueueNotInstalled; kstatus Failed), rather than hanging with a
// suspended Job nobody admits. A Task without queue beside it runs as ever. (The queue e2e, with
// Kueue, is e2e/queues.)
func TestQueueWithoutKueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	queued := e.create(e.task("queued", func(t *v1.Task) { t.Spec.QueueName = "team-a" }))
	plain := e.create(e.task("plain"))
	e.waitPhase(plain.Name, v1.PhaseSucceeded)
	testenv.Eventually(t, waitTimeout, "the queued Task says Kueue is missing", func(context.Context) (bool, error) {
		got := e.get(queued.Name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAdmitted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonKueueNotInstalled {
			return false, fmt.Errorf("%s", describe(got))
		}
		if !strings.Contains(c.Message, "Kueue is not installed") || got.Status.Phase != v1.PhasePending {
			return false, fmt.Errorf("phase %s, message %q", got.Status.Phase, c.Message)
		}
		return true, nil
	})
	if jobs := e.jobs(queued.Name); len(jobs) != 0 {
		t.Errorf("%d Jobs for a queued Task without Kueue", len(jobs))
	}
	if c := meta.FindStatusCondition(e.get(plain.Name).Status.Conditions, v1.ConditionAdmitted); c != nil {
		t.Errorf("a Task without queue has an Admitted condition: %+v", c)
	}
}
