package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// The write budget of issue #13 (goal 4): the admission webhook places the Task's finalizer, so
// the operator's writes up to Running are the Job and the status; Normal Events have a budget.
// These tests count writes; none of them times anything.

// TestDeletedBeforeItsFirstRun: a Task that got its finalizer at admission and is deleted before
// the operator ever saw it (the operator down, then started) goes at once, and no Job is made.
// Then the same with the operator running and the delete right after the create.
func TestDeletedBeforeItsFirstRun(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	early := e.task("early", func(t *v1.Task) { t.Finalizers = []string{v1.FinalizerJobs} })
	e.create(early)
	if err := e.c.Delete(t.Context(), early); err != nil {
		t.Fatal(err)
	}
	if got := e.get(early.Name); got.DeletionTimestamp == nil {
		t.Fatalf("deleted Task %s is not terminating: finalizers %v", got.Name, got.Finalizers)
	}
	e.op = e.startOperator()
	e.waitGone(early.Name)
	if writes, _ := e.op.writes.take(); slices.ContainsFunc(writes, func(w string) bool { return strings.HasPrefix(w, "POST") && strings.HasSuffix(w, "/jobs") }) {
		t.Errorf("a Job was made for a Task deleted before the operator started: %v", writes)
	}

	late := e.create(e.task("late", withLabels(outcome, hang), func(t *v1.Task) { t.Finalizers = []string{v1.FinalizerJobs} }))
	if err := e.c.Delete(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	e.waitGone(late.Name)
	testenv.Eventually(t, waitTimeout, "no Job left", func(context.Context) (bool, error) {
		jobs := append(e.jobs(early.Name), e.jobs(late.Name)...)
		return len(jobs) == 0, fmt.Errorf("%d Jobs", len(jobs))
	})
}

// TestFinalizerWithoutWebhook: with no admission webhook (this package's control plane has
// none), the operator writes the finalizer itself before the Job, and takes it off once the run
// is recorded: correctness never depends on the webhook.
func TestFinalizerWithoutWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("fallback", withLabels(outcome, hang)))
	if len(task.Finalizers) != 0 {
		t.Fatalf("created with finalizers %v: this control plane was not meant to have the webhook", task.Finalizers)
	}
	got := e.waitPhase(task.Name, v1.PhaseRunning)
	if !slices.Contains(got.Finalizers, v1.FinalizerJobs) {
		t.Errorf("Running without the finalizer: %v", got.Finalizers)
	}
	writes, _ := e.op.writes.take()
	first := slices.IndexFunc(writes, func(w string) bool { return strings.HasPrefix(w, "PATCH") && strings.HasSuffix(w, "/tasks/"+task.Name) })
	job := slices.IndexFunc(writes, func(w string) bool { return strings.HasPrefix(w, "POST") && strings.HasSuffix(w, "/jobs") })
	if first < 0 || job < 0 || first > job {
		t.Errorf("writes %v: want the finalizer patch before the Job's creation", writes)
	}
}

// TestWriteBudget runs the operator binary with its webhooks on a control plane of its own (the
// operator points the cluster's webhook configurations at itself) and counts its writes, from
// client-go's rest_client_requests_total on its metrics endpoint:
//
//   - a one-shot Task created at v1 gets the finalizer from the webhook, and the operator sends
//     at most 2 writes besides Events until it rests Running; created at v1alpha1 or v1beta1
//     it gets none there (the operator writes it: at most 3);
//   - a suspended Task gets no finalizer, costs 1 write, and none at rest;
//   - a Task deleted right after its create goes, and leaves no Job;
//   - N Tasks run to Succeeded record fewer than 2N Events past a small Normal Event budget,
//     and a failing Task's Warnings are all recorded all the same.
func TestWriteBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane of its own")
	}
	cp := testenv.StartT(t, testenv.Options{Full: true, Nodes: 1})
	const burst = 4
	env, err := harness.New(t.Context(), cp, harness.Options{Log: testLog{t},
		OperatorArgs: []string{fmt.Sprintf("--normal-event-burst=%d", burst), "--normal-event-qps=0.01"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, o := range env.Operators() {
				t.Logf("operator %s log:\n%s", o.Name(), o.Tail(40))
			}
		}
		env.Close()
	})
	op, err := env.StartOperator(t.Context(), "writes", false)
	if err != nil {
		t.Fatal(err)
	}
	w := &opWrites{t: t, env: env, op: op}
	w.quiet()

	ns := testenv.NewNamespace(t, env.Client)
	oneShot := map[string]map[string]any{
		"v1":       {"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
		"v1beta1":  {"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "maxRetries": int64(0)},
		"v1alpha1": {"type": "shell", "shell": "true", "maxRetry": int64(0)},
	}
	for _, version := range []string{"v1", "v1alpha1", "v1beta1"} {
		name := "run-at-" + version
		created := w.create(ns, version, name, oneShot[version], map[string]string{outcome: hang})
		atV1 := version == v1.GroupVersion.Version
		if got := slices.Contains(created.GetFinalizers(), v1.FinalizerJobs); got != atV1 {
			t.Errorf("%s: created at %s with finalizers %v; want %s from the webhook only at v1", name, version, created.GetFinalizers(), v1.FinalizerJobs)
		}
		w.waitPhase(ns, name, v1.PhaseRunning)
		writes, events := w.settle(ns, name)
		t.Logf("%s: operator writes until it rests Running: %v, of them %d for Events", name, writes, events)
		budget := 2.0 // the Job and the status
		if !atV1 {
			budget = 3 // and the finalizer first
		}
		if n := harness.Sum(writes) - float64(events); n > budget {
			t.Errorf("%s: %v writes besides %d for Events until it rests Running, want at most %v", name, n, events, budget)
		}
	}

	suspended := w.create(ns, "v1beta1", "suspended", map[string]any{
		"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "maxRetries": int64(0), "suspend": true,
	}, nil)
	if f := suspended.GetFinalizers(); len(f) != 0 {
		t.Errorf("a suspended Task was created with finalizers %v", f)
	}
	w.waitPhase(ns, "suspended", v1.PhaseSuspended)
	if writes, events := w.settle(ns, "suspended"); harness.Sum(writes)-float64(events) > 1 {
		t.Errorf("a suspended Task took writes %v (%d for Events), want its status only", writes, events)
	}
	time.Sleep(5 * time.Second)
	if writes := w.take(); harness.Sum(writes) != 0 {
		t.Errorf("writes at rest: %v, want none", writes)
	}

	gone := w.create(ns, "v1alpha1", "deleted-at-once", oneShot["v1alpha1"], map[string]string{outcome: hang})
	if err := env.Dyn.Resource(v1.ResourceAt("v1alpha1")).Namespace(ns).Delete(t.Context(), gone.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "the Task deleted right after its create to go, with its Jobs", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: gone.GetName()}, &v1.Task{})
		var jobs batchv1.JobList
		if lerr := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{v1.LabelTaskName: gone.GetName()}); lerr != nil {
			return false, lerr
		}
		return apierrors.IsNotFound(err) && len(jobs.Items) == 0, fmt.Errorf("get: %v; %d Jobs", err, len(jobs.Items))
	})
	w.take()

	// N Tasks to Succeeded, in a namespace of their own, and one that fails.
	const n = 10
	burstNS := testenv.NewNamespace(t, env.Client)
	for i := range n {
		w.create(burstNS, "v1", fmt.Sprintf("ok-%d", i), oneShot["v1"], nil)
	}
	w.create(burstNS, "v1", "doomed", map[string]any{
		"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "retry": map[string]any{"maxRetries": int64(0)},
	}, map[string]string{outcome: fail})
	for i := range n {
		w.waitPhase(burstNS, fmt.Sprintf("ok-%d", i), v1.PhaseSucceeded)
	}
	w.waitPhase(burstNS, "doomed", v1.PhaseFailed)
	var list eventsv1.EventList
	testenv.Eventually(t, waitTimeout, "the failed Task's Warnings", func(ctx context.Context) (bool, error) {
		if err := env.Client.List(ctx, &list, client.InNamespace(burstNS)); err != nil {
			return false, err
		}
		var reasons []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == "doomed" && ev.Type == "Warning" {
				reasons = append(reasons, ev.Reason)
			}
		}
		return slices.Contains(reasons, v1.EventRunFailed) && slices.Contains(reasons, v1.EventRetriesExhausted), fmt.Errorf("Warnings %v", reasons)
	})
	events, eventWrites, byType, err := harness.EventWrites(t.Context(), env.Client, burstNS)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := harness.OperatorCounter(t.Context(), op, "taskoperator_events_dropped_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Tasks: %d Events (%v), %d Event writes; Normal Events dropped by the budget: %.0f", n+1, events, byType, eventWrites, dropped)
	if eventWrites >= 2*n {
		t.Errorf("%d Event writes for %d Tasks, want fewer than %d", eventWrites, n, 2*n)
	}
	if dropped == 0 {
		t.Errorf("no Normal Event dropped past a budget of %d", burst)
	}
	// Finished, recorded: no finalizer left, whatever placed it.
	for i := range n {
		testenv.Eventually(t, waitTimeout, "the finalizer to go", func(ctx context.Context) (bool, error) {
			task := &v1.Task{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: burstNS, Name: fmt.Sprintf("ok-%d", i)}, task)
			return err == nil && len(task.Finalizers) == 0, fmt.Errorf("finalizers %v, %v", task.Finalizers, err)
		})
	}
}

// opWrites counts an operator process's writes (POST, PUT, PATCH, DELETE) between calls.
type opWrites struct {
	t    *testing.T
	env  *harness.Env
	op   *testenv.Operator
	last map[string]float64
}

func (w *opWrites) read() map[string]float64 {
	w.t.Helper()
	writes, err := harness.OperatorWrites(w.t.Context(), w.op)
	if err != nil {
		w.t.Fatal(err)
	}
	return writes
}

// take returns the writes since the last call.
func (w *opWrites) take() map[string]float64 {
	w.t.Helper()
	now := w.read()
	d := harness.Delta(w.last, now)
	w.last = now
	return d
}

// quiet waits until the operator has written nothing for 3 seconds (start-up is done).
func (w *opWrites) quiet() {
	w.t.Helper()
	w.take()
	testenv.Eventually(w.t, time.Minute, "the operator to rest", func(context.Context) (bool, error) {
		time.Sleep(3 * time.Second)
		d := w.take()
		return len(d) == 0, fmt.Errorf("wrote %v", d)
	})
}

// settle waits until the operator rests, then returns its writes since the last take and how
// many of them went to the Events recorded on the Task name in ns.
func (w *opWrites) settle(ns, name string) (map[string]float64, int) {
	w.t.Helper()
	total := map[string]float64{}
	testenv.Eventually(w.t, time.Minute, "the operator to rest", func(context.Context) (bool, error) {
		time.Sleep(2 * time.Second)
		d := w.take()
		for k, v := range d {
			total[k] += v
		}
		return len(d) == 0, fmt.Errorf("wrote %v", d)
	})
	var list eventsv1.EventList
	if err := w.env.Client.List(w.t.Context(), &list, client.InNamespace(ns)); err != nil {
		w.t.Fatal(err)
	}
	events := 0
	for _, ev := range list.Items {
		if ev.ReportingController == harness.EventReporter && ev.Regarding.Name == name {
			events++
			if ev.Series != nil {
				events++
			}
		}
	}
	return total, events
}

// create creates a Task at version with spec, through the webhooks, and returns what the API
// server answered.
func (w *opWrites) create(ns, version, name string, spec map[string]any, labels map[string]string) *unstructured.Unstructured {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.Group + "/" + version, "kind": v1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	u.SetLabels(labels)
	created, err := w.env.Dyn.Resource(v1.ResourceAt(version)).Namespace(ns).Create(w.t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create %s at %s: %v", name, version, err)
	}
	return created
}

func (w *opWrites) waitPhase(ns, name string, phase v1.Phase) {
	w.t.Helper()
	testenv.Eventually(w.t, waitTimeout, fmt.Sprintf("task %s to be %s", name, phase), func(ctx context.Context) (bool, error) {
		task := &v1.Task{}
		if err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, task); err != nil {
			return false, err
		}
		return task.Status.Phase == phase, errors.New(describe(task))
	})
}

// waitGone waits until the Task is deleted.
func (e *env) waitGone(name string) {
	e.t.Helper()
	testenv.Eventually(e.t, waitTimeout, fmt.Sprintf("task %s to go", name), func(ctx context.Context) (bool, error) {
		task := &v1.Task{}
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, task)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("finalizers %v, deleting %v, %v", task.Finalizers, task.DeletionTimestamp != nil, err)
	})
}
