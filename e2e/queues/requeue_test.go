package queues_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestQueueNameFixedWhileWaitingStartsTheRun: a Task created with a LocalQueue that does not
// exist waits (Queued, Inadmissible); once spec.queueName is corrected to an existing queue,
// its run starts there and succeeds.
func TestQueueNameFixedWhileWaitingStartsTheRun(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "Never")
	create(t, queuedTask(ns, "typo", "no-such-queue", "", "1"))
	waitQueued(t, ns, "typo")
	testenv.Eventually(t, 30*time.Second, "Inadmissible", func(ctx context.Context) (bool, error) {
		task, err := taskPhase(ctx, ns, "typo")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionAdmitted)
		return c != nil && c.Reason == "Inadmissible", fmt.Errorf("Admitted %+v", c)
	})
	patchTask(t, ns, "typo", fmt.Sprintf(`{"spec":{"queueName":%q}}`, queue))
	waitSucceeded(t, ns, "typo", "the run started in the corrected queue and succeeded")
}

// TestQueueNameChangedWhileWaitingMovesTheRun: a run waiting in a full queue moves to the queue
// spec.queueName now names, which has room.
func TestQueueNameChangedWhileWaitingMovesTheRun(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "Never")
	defer blocker(t, ns, queue)()
	other := newNamedQueue(t, ns, "other", quota(1), "Never")
	create(t, queuedTask(ns, "mv", queue, "", "1"))
	waitQueued(t, ns, "mv")
	patchTask(t, ns, "mv", fmt.Sprintf(`{"spec":{"queueName":%q}}`, other))
	waitSucceeded(t, ns, "mv", "the run moved to the other queue and succeeded")
}

// patchTask merge-patches the Task, as kubectl patch --type=merge does.
func patchTask(t *testing.T, ns, name, patch string) {
	t.Helper()
	task := &v1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := kube.Patch(t.Context(), task, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// describeJobs is each Job's queue, suspension and counts, for a failure message.
func describeJobs(jobs []batchv1.Job) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "[%s queue=%s suspend=%s succeeded=%d failed=%d] ", j.Name, j.Labels["kueue.x-k8s.io/queue-name"], suspended(&j), j.Status.Succeeded, j.Status.Failed)
	}
	return b.String()
}

// waitQueued waits until the Task's run waits in its LocalQueue.
func waitQueued(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "task "+name+" Queued", func(ctx context.Context) (bool, error) {
		task, err := taskPhase(ctx, ns, name)
		if err != nil {
			return false, err
		}
		return task.Status.Phase == v1.PhaseQueued, fmt.Errorf("phase %s", task.Status.Phase)
	})
}

// TestAMissingPriorityClassIsNamedWhileTheRunWaits: Kueue makes no Workload for a Job whose
// WorkloadPriorityClass does not exist; the Task's Admitted condition asks about that class,
// not only whether Kueue runs.
func TestAMissingPriorityClassIsNamedWhileTheRunWaits(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "Never")
	create(t, queuedTask(ns, "p", queue, "no-such-class", "1"))
	testenv.Eventually(t, time.Minute, "the Admitted condition to name the class", func(ctx context.Context) (bool, error) {
		task, err := taskPhase(ctx, ns, "p")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionAdmitted)
		return c != nil && strings.Contains(c.Message, "Does WorkloadPriorityClass no-such-class exist?"), fmt.Errorf("phase %s, Admitted %+v", task.Status.Phase, c)
	})
}

// waitSucceeded waits for the Task to succeed; a failure says its phase, what Kueue said and
// its Jobs.
func waitSucceeded(t *testing.T, ns, name, what string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
		task, err := taskPhase(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if task.Status.Phase != v1.PhaseSucceeded {
			c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionAdmitted)
			return false, fmt.Errorf("phase %s, Admitted %+v, jobs %s", task.Status.Phase, c, describeJobs(taskJobs(t, ns, name)))
		}
		return true, nil
	})
}
