package reconciler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "example.com/task-operator/apis/v1"
)

// writeLog counts the writes a client sends.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) add(verb string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
}

func (w *writeLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

func (w *writeLog) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("patch/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add("update/"+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

type fakeEnv struct {
	r      *Reconciler
	c      client.Client // unintercepted, for the test's own changes
	writes *writeLog
	clock  *clocktesting.FakePassiveClock
	rec    *events.FakeRecorder
	key    client.ObjectKey
}

func newFakeEnv(t *testing.T, task *v1.Task) *fakeEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := batchv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	task.ResourceVersion = ""
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(task).WithStatusSubresource(&v1.Task{}).Build()
	w := &writeLog{}
	c := interceptor.NewClient(base, w.funcs())
	clk := clocktesting.NewFakePassiveClock(at(0))
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{client: c, apiReader: c, recorder: rec, opts: Options{Clock: clk}.withDefaults(), expect: newExpectations()}
	return &fakeEnv{r: r, c: base, writes: w, clock: clk, rec: rec, key: client.ObjectKeyFromObject(task)}
}

func (e *fakeEnv) reconcile(t *testing.T) (ctrl.Result, []string) {
	t.Helper()
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res, e.writes.take()
}

func (e *fakeEnv) task(t *testing.T) *v1.Task {
	t.Helper()
	task := &v1.Task{}
	if err := e.c.Get(context.Background(), e.key, task); err != nil {
		t.Fatal(err)
	}
	return task
}

// finishJob sets a terminal condition on a Job, as the Job controller would.
func (e *fakeEnv) finishJob(t *testing.T, name string, typ batchv1.JobConditionType, reason string) {
	t.Helper()
	job := &batchv1.Job{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, job); err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(e.clock.Now()),
	})
	if err := e.c.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) drainEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func wantWrites(t *testing.T, step string, got []string, want int) {
	t.Helper()
	if len(got) != want {
		t.Errorf("%s: %d writes %q, want %d", step, len(got), got, want)
	}
}

// TestReconcileOneShot drives Reconcile against a fake API: a failure, a retry, a success,
// counting the writes at each step and none at rest, then the deletion.
func TestReconcileOneShot(t *testing.T) {
	e := newFakeEnv(t, newTask())

	res, w := e.reconcile(t)
	wantWrites(t, "start", w, 3) // finalizer, Job, status
	if res.RequeueAfter != 0 {
		t.Errorf("start: requeue after %v, want none", res.RequeueAfter)
	}
	task := e.task(t)
	if task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 1 || len(task.Finalizers) != 1 {
		t.Fatalf("after start: phase %s attempts %d finalizers %v", task.Status.Phase, task.Status.Attempts, task.Finalizers)
	}

	res, w = e.reconcile(t)
	wantWrites(t, "at rest while running", w, 0)
	if res.RequeueAfter != 0 {
		t.Errorf("at rest: requeue after %v", res.RequeueAfter)
	}

	e.clock.SetTime(at(10))
	e.finishJob(t, "t-1", batchv1.JobFailed, "BackoffLimitExceeded")
	res, w = e.reconcile(t)
	wantWrites(t, "failure", w, 1)
	if res.RequeueAfter != time.Second {
		t.Errorf("failure: requeue after %v, want the 1s backoff", res.RequeueAfter)
	}
	if task = e.task(t); task.Status.Phase != v1.PhaseRetrying {
		t.Fatalf("after failure: phase %s", task.Status.Phase)
	}

	_, w = e.reconcile(t)
	wantWrites(t, "backoff not over", w, 0)

	e.clock.SetTime(at(11))
	_, w = e.reconcile(t)
	wantWrites(t, "retry", w, 2) // Job, status
	if task = e.task(t); task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 2 || task.Status.LastJob.Name != "t-2" {
		t.Fatalf("after retry: %+v", task.Status)
	}

	e.clock.SetTime(at(20))
	e.finishJob(t, "t-2", batchv1.JobComplete, "")
	res, w = e.reconcile(t)
	wantWrites(t, "success", w, 1)
	if res != (ctrl.Result{}) {
		t.Errorf("success: result %+v, want no requeue", res)
	}
	if task = e.task(t); task.Status.Phase != v1.PhaseSucceeded || task.Status.CompletionTime == nil {
		t.Fatalf("after success: %+v", task.Status)
	}

	e.clock.SetTime(at(5000))
	res, w = e.reconcile(t)
	wantWrites(t, "finished at rest", w, 0)
	if res != (ctrl.Result{}) {
		t.Errorf("finished: result %+v, want no requeue", res)
	}
	evs := e.drainEvents()
	for _, reason := range []string{v1.EventJobCreated, v1.EventRunFailed, v1.EventRetryScheduled, v1.EventSucceeded} {
		if !containsReason(evs, reason) {
			t.Errorf("no %s event in %q", reason, evs)
		}
	}

	if err := e.c.Delete(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "delete", w, 3) // two Jobs, the finalizer
	if err := e.c.Get(context.Background(), e.key, &v1.Task{}); !apierrors.IsNotFound(err) {
		t.Errorf("Task still there after its finalizer went: %v", err)
	}
	var jobs batchv1.JobList
	if err := e.c.List(context.Background(), &jobs); err != nil || len(jobs.Items) != 0 {
		t.Errorf("Jobs left after deletion: %d (%v)", len(jobs.Items), err)
	}
}

// containsReason finds an Event by reason in the fake recorder's "Type Reason Note" lines.
func containsReason(evs []string, reason string) bool {
	for _, e := range evs {
		if strings.Contains(e, " "+reason+" ") {
			return true
		}
	}
	return false
}

// TestReconcileAdoptsExistingJob: after a crash between creating a Job and storing the status,
// the next reconcile finds the Job and creates no other.
func TestReconcileAdoptsExistingJob(t *testing.T) {
	task := newTask(func(t *v1.Task) { t.Finalizers = []string{v1.FinalizerJobs} })
	e := newFakeEnv(t, task)
	job := buildJob(task, e.r.opts, runID{Attempt: 1})
	if err := e.c.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	_, w := e.reconcile(t)
	wantWrites(t, "adopt", w, 1) // status only
	if got := e.task(t); got.Status.Phase != v1.PhaseRunning || got.Status.Attempts != 1 {
		t.Fatalf("status after adoption: %+v", got.Status)
	}
}

// TestReconcileWaitsForStaleCache: a Job the controller created but the cache does not show
// yet blocks any new decision.
func TestReconcileWaitsForStaleCache(t *testing.T) {
	e := newFakeEnv(t, newTask())
	e.r.expect.created(newTask(), "t-9", at(0))
	res, w := e.reconcile(t)
	wantWrites(t, "finalizer only", w, 1)
	if res.RequeueAfter <= 0 || res.RequeueAfter > expectationTimeout {
		t.Errorf("requeue after %v, want within the expectation timeout", res.RequeueAfter)
	}
	var jobs batchv1.JobList
	if err := e.c.List(context.Background(), &jobs); err != nil || len(jobs.Items) != 0 {
		t.Errorf("created %d Jobs on a stale cache", len(jobs.Items))
	}
}

// TestReconcileSchedule walks a Forbid schedule with a fake clock: a run, a skipped time while
// it is active, then the next run once it finished.
func TestReconcileSchedule(t *testing.T) {
	e := newFakeEnv(t, newTask(scheduled(v1.ForbidConcurrent)))
	res, w := e.reconcile(t)
	wantWrites(t, "first", w, 2) // finalizer, status
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %v, want 1m", res.RequeueAfter)
	}
	if got := e.task(t).Status; got.Phase != v1.PhaseScheduled || !got.NextRunTime.Time.Equal(at(60)) {
		t.Fatalf("waiting: %+v", got)
	}
	e.clock.SetTime(at(60))
	_, w = e.reconcile(t)
	wantWrites(t, "due", w, 2) // Job, status
	e.clock.SetTime(at(120))
	_, w = e.reconcile(t)
	wantWrites(t, "forbidden", w, 1) // status
	got := e.task(t).Status
	if got.Phase != v1.PhaseRunning || got.MissedRuns != 1 || !got.LastScheduleTime.Time.Equal(at(120)) || !got.NextRunTime.Time.Equal(at(180)) {
		t.Fatalf("after forbidden time: %+v", got)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "at rest", w, 0)
	e.finishJob(t, "t-1767225660", batchv1.JobComplete, "")
	_, w = e.reconcile(t)
	wantWrites(t, "finished", w, 1)
	e.clock.SetTime(at(181))
	_, w = e.reconcile(t)
	wantWrites(t, "next run", w, 2)
	got = e.task(t).Status
	if got.Phase != v1.PhaseRunning || got.LastJob.Name != "t-1767225780" || got.MissedRuns != 1 {
		t.Fatalf("after next run: %+v", got)
	}
}
