package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
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
	// hidden are Jobs the cache does not show (a lagging cache, stripped labels); the API
	// server, read through apiReader, does.
	hidden map[string]bool
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
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(task).WithStatusSubresource(&v1.Task{}, &batchv1.Job{}).Build()
	w := &writeLog{}
	e := &fakeEnv{c: base, writes: w, hidden: map[string]bool{}, key: client.ObjectKeyFromObject(task)}
	funcs := w.funcs()
	funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if jobs, ok := list.(*batchv1.JobList); ok {
			jobs.Items = slices.DeleteFunc(jobs.Items, func(j batchv1.Job) bool { return e.hidden[j.Name] })
		}
		return nil
	}
	cached := interceptor.NewClient(base, funcs)
	e.clock = clocktesting.NewFakePassiveClock(at(0))
	e.rec = events.NewFakeRecorder(100)
	e.r = &Reconciler{client: cached, apiReader: interceptor.NewClient(base, w.funcs()), recorder: e.rec,
		opts: Options{Clock: e.clock}.withDefaults(), expect: newExpectations(0)}
	return e
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

func (e *fakeEnv) job(t *testing.T, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, job); err != nil {
		t.Fatalf("get job %s: %v", name, err)
	}
	return job
}

func (e *fakeEnv) jobNames(t *testing.T) []string {
	t.Helper()
	var jobs batchv1.JobList
	if err := e.c.List(context.Background(), &jobs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	return names
}

// TestReconcileOneShot drives Reconcile against a fake API: a failure, a retry, a success,
// counting the writes at each step and none at rest, the finalizers held only while they
// protect something, then the deletion.
func TestReconcileOneShot(t *testing.T) {
	e := newFakeEnv(t, newTask())

	res, w := e.reconcile(t)
	wantWrites(t, "start", w, 3) // Task finalizer, Job, status
	if res.RequeueAfter != 0 {
		t.Errorf("start: requeue after %v, want none", res.RequeueAfter)
	}
	task := e.task(t)
	if task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 1 || !slices.Equal(task.Finalizers, []string{v1.FinalizerJobs}) {
		t.Fatalf("after start: phase %s attempts %d finalizers %v", task.Status.Phase, task.Status.Attempts, task.Finalizers)
	}
	if f := e.job(t, "t-0-1").Finalizers; !slices.Equal(f, []string{v1.FinalizerRunOutcome}) {
		t.Fatalf("Job finalizers %v", f)
	}

	res, w = e.reconcile(t)
	wantWrites(t, "at rest while running", w, 0)
	if res.RequeueAfter != 0 {
		t.Errorf("at rest: requeue after %v", res.RequeueAfter)
	}

	e.clock.SetTime(at(10))
	e.finishJob(t, "t-0-1", batchv1.JobFailed, "BackoffLimitExceeded")
	res, w = e.reconcile(t)
	wantWrites(t, "failure", w, 3) // status; once it is stored, the Job's finalizer, then the Task's
	if res.RequeueAfter != time.Second {
		t.Errorf("failure: requeue after %v, want the 1s backoff", res.RequeueAfter)
	}
	if task = e.task(t); task.Status.Phase != v1.PhaseRetrying || task.Status.CurrentRun.Outcome != v1.RunFailed {
		t.Fatalf("after failure: phase %s, run %+v", task.Status.Phase, task.Status.CurrentRun)
	}

	if f := e.job(t, "t-0-1").Finalizers; len(f) != 0 {
		t.Errorf("Job finalizers %v after its failure was stored", f)
	}
	if f := e.task(t).Finalizers; len(f) != 0 {
		t.Errorf("Task finalizers %v while nothing runs", f)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "backoff not over", w, 0)

	e.clock.SetTime(at(11))
	_, w = e.reconcile(t)
	wantWrites(t, "retry", w, 3) // Task finalizer, Job, status
	if task = e.task(t); task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 2 || task.Status.LastJob.Name != "t-0-2" {
		t.Fatalf("after retry: %+v", task.Status)
	}

	e.clock.SetTime(at(20))
	e.finishJob(t, "t-0-2", batchv1.JobComplete, "")
	res, w = e.reconcile(t)
	wantWrites(t, "success", w, 3) // status, the Job's finalizer, the Task's
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

	// Finished: nothing holds the Task, it goes without the operator.
	if err := e.c.Delete(context.Background(), e.task(t)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(context.Background(), e.key, &v1.Task{}); !apierrors.IsNotFound(err) {
		t.Errorf("finished Task still there after its deletion: %v", err)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "after deletion", w, 0)
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

// TestReconcileDeleteWhileRunning: a running Task's Jobs hold finalizers, so the Task's
// finalizer waits for the operator to let them go.
func TestReconcileDeleteWhileRunning(t *testing.T) {
	e := newFakeEnv(t, newTask())
	e.reconcile(t)
	if err := e.c.Delete(context.Background(), e.task(t)); err != nil {
		t.Fatal(err)
	}
	_, w := e.reconcile(t)
	wantWrites(t, "delete", w, 3) // Job finalizer, Job, Task finalizer
	if err := e.c.Get(context.Background(), e.key, &v1.Task{}); !apierrors.IsNotFound(err) {
		t.Errorf("Task still there after its finalizer went: %v", err)
	}
	if names := e.jobNames(t); len(names) != 0 {
		t.Errorf("Jobs left after deletion: %v", names)
	}
}

// TestReconcileTTLRace is issue #14 item 1 as one function sees it: the operator was away while
// the Job succeeded and its TTL deleted it. The Job's finalizer kept it readable, so the run
// counts as succeeded and nothing runs again, even with maxRetries 0.
func TestReconcileTTLRace(t *testing.T) {
	e := newFakeEnv(t, newTask(maxRetries(0)))
	e.reconcile(t)
	e.clock.SetTime(at(10))
	e.finishJob(t, "t-0-1", batchv1.JobComplete, "")
	if err := e.c.Delete(context.Background(), e.job(t, "t-0-1")); err != nil { // the TTL controller
		t.Fatal(err)
	}
	e.reconcile(t)
	if got := e.task(t).Status; got.Phase != v1.PhaseSucceeded || got.Attempts != 1 {
		t.Fatalf("after the TTL race: %s attempts %d", got.Phase, got.Attempts)
	}
	e.reconcile(t) // releases the Job, which then goes
	e.clock.SetTime(at(1000))
	e.reconcile(t)
	if names := e.jobNames(t); len(names) != 0 {
		t.Errorf("Jobs = %v, want none (deleted by the TTL, released)", names)
	}
	if got := e.task(t); got.Status.Phase != v1.PhaseSucceeded || got.Status.Attempts != 1 || len(got.Finalizers) != 0 {
		t.Errorf("at the end: %s attempts %d finalizers %v", got.Status.Phase, got.Status.Attempts, got.Finalizers)
	}
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

// TestReconcileCacheLag is issue #14 item 2: a Job the controller created stays hidden from the
// cache. The Task waits; past the expectation timeout, and whenever the stored status names a
// Job the cache lacks, the API server is asked. The Job is found there: no second Job.
func TestReconcileCacheLag(t *testing.T) {
	e := newFakeEnv(t, newTask())
	e.hidden["t-0-1"] = true
	e.reconcile(t) // creates t-0-1, which the cache never shows
	if names := e.jobNames(t); !slices.Equal(names, []string{"t-0-1"}) {
		t.Fatalf("Jobs %v", names)
	}
	// A fresh controller (a restart: no expectations) reads the stored status naming t-0-1.
	e.r.expect = newExpectations(0)
	e.clock.SetTime(at(120))
	res, _ := e.reconcile(t)
	if names := e.jobNames(t); !slices.Equal(names, []string{"t-0-1"}) {
		t.Fatalf("after a restart on a lagging cache: Jobs %v, want only t-0-1", names)
	}
	if res.RequeueAfter != uncachedPollInterval {
		t.Errorf("requeue after %v, want the poll interval %v for a Job the cache does not show", res.RequeueAfter, uncachedPollInterval)
	}
	// It succeeds, still unseen by the cache: recorded, released, and the Task let go (found by
	// TestLabelsStrippedByPolicy: the release used to wait for a reconcile that never saw it).
	e.finishJob(t, "t-0-1", batchv1.JobComplete, "")
	e.clock.SetTime(at(130))
	e.reconcile(t)
	if got := e.task(t); got.Status.Phase != v1.PhaseSucceeded || len(got.Finalizers) != 0 {
		t.Errorf("after the hidden Job succeeded: %s, finalizers %v", got.Status.Phase, got.Finalizers)
	}
	if f := e.job(t, "t-0-1").Finalizers; len(f) != 0 {
		t.Errorf("the hidden Job still holds %v", f)
	}
	// Same controller: the expectation times out, the API server is asked.
	e2 := newFakeEnv(t, newTask(func(t *v1.Task) { t.Name = "u" }))
	e2.hidden["u-0-1"] = true
	e2.r.expect = newExpectations(time.Minute)
	e2.reconcile(t)
	// The status write is lost: nothing durable names the Job.
	task := e2.task(t)
	task.Status = v1.TaskStatus{}
	if err := e2.c.Status().Update(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	for _, sec := range []int{1, 59} {
		e2.clock.SetTime(at(sec))
		res, w := e2.reconcile(t)
		wantWrites(t, fmt.Sprintf("waiting at %ds", sec), w, 0)
		if res.RequeueAfter <= 0 {
			t.Errorf("at %ds: not waiting for the cache", sec)
		}
	}
	e2.clock.SetTime(at(61))
	e2.reconcile(t)
	if names := e2.jobNames(t); !slices.Equal(names, []string{"u-0-1"}) {
		t.Fatalf("past the expectation timeout: Jobs %v, want only u-0-1", names)
	}
	if got := e2.task(t).Status; got.Phase != v1.PhaseRunning || got.Attempts != 1 || got.CurrentRun.Job.Name != "u-0-1" {
		t.Errorf("status after the live read: %+v", got)
	}
}

// TestReconcileSchedule walks a Forbid schedule with a fake clock: a run, a time held back
// while it is active, that time started once the run ended, the finalizers coming and going.
func TestReconcileSchedule(t *testing.T) {
	e := newFakeEnv(t, newTask(scheduled(v1.ForbidConcurrent)))
	res, w := e.reconcile(t)
	wantWrites(t, "first", w, 1) // status: nothing to protect yet
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %v, want 1m", res.RequeueAfter)
	}
	if got := e.task(t); got.Status.Phase != v1.PhaseScheduled || !got.Status.NextRunTime.Time.Equal(at(60)) || len(got.Finalizers) != 0 {
		t.Fatalf("waiting: %+v, finalizers %v", got.Status, got.Finalizers)
	}
	e.clock.SetTime(at(60))
	_, w = e.reconcile(t)
	wantWrites(t, "due", w, 3) // Task finalizer, Job, status
	e.clock.SetTime(at(120))
	_, w = e.reconcile(t)
	wantWrites(t, "held back", w, 1) // status: the next run time moved
	got := e.task(t).Status
	if got.Phase != v1.PhaseRunning || got.MissedRuns != 0 || !got.LastScheduleTime.Time.Equal(at(60)) || !got.NextRunTime.Time.Equal(at(180)) {
		t.Fatalf("while held back: %+v", got)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "at rest", w, 0)
	e.clock.SetTime(at(150))
	e.finishJob(t, "t-1767225660-1", batchv1.JobComplete, "")
	_, w = e.reconcile(t)
	wantWrites(t, "finished: the held-back run starts", w, 3) // Job, status, the finished run's Job released
	got = e.task(t).Status
	if got.Phase != v1.PhaseRunning || got.LastJob.Name != "t-1767225720-1" || !got.LastScheduleTime.Time.Equal(at(120)) || got.MissedRuns != 0 {
		t.Fatalf("after the held-back start: %+v", got)
	}
	_, w = e.reconcile(t)
	wantWrites(t, "at rest", w, 0)
	if f := e.job(t, "t-1767225660-1").Finalizers; len(f) != 0 {
		t.Errorf("finished run's Job still holds %v", f)
	}
}

// TestReconcileCatchUp is issue #14 item 8: after a long absence the latest missed time starts
// in one reconcile with one status write and one Warning, not one per missed time.
func TestReconcileCatchUp(t *testing.T) {
	e := newFakeEnv(t, newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "@every 1s"} }))
	e.reconcile(t)
	e.clock.SetTime(at(1))
	e.reconcile(t) // the run for 1s
	e.finishJob(t, jobName("t", runID{Scheduled: at(1), Attempt: 1}), batchv1.JobComplete, "")
	e.drainEvents()
	e.clock.SetTime(at(530))
	_, w := e.reconcile(t)
	wantWrites(t, "catch-up", w, 3) // the new Job, status, the previous run's Job released
	got := e.task(t).Status
	if got.MissedRuns != 528 || !got.LastScheduleTime.Time.Equal(at(530)) {
		t.Errorf("after catch-up: missed %d, lastScheduleTime %v; want 528 and %v", got.MissedRuns, got.LastScheduleTime, at(530))
	}
	var warnings []string
	for _, ev := range e.drainEvents() {
		if strings.HasPrefix(ev, "Warning") {
			warnings = append(warnings, ev)
		}
	}
	if len(warnings) != 1 || !containsReason(warnings, v1.EventTooManyMissedTimes) {
		t.Errorf("warnings %q, want one %s", warnings, v1.EventTooManyMissedTimes)
	}
}

// TestReconcileScheduleAdded is issue #14 item 8: a schedule added to a 30-day-old Task runs at
// its next time after the addition and counts nothing missed.
func TestReconcileScheduleAdded(t *testing.T) {
	e := newFakeEnv(t, newTask())
	e.reconcile(t)
	e.finishJob(t, "t-0-1", batchv1.JobComplete, "")
	e.reconcile(t)
	e.reconcile(t)
	e.clock.SetTime(at(30*24*3600 + 30))
	task := e.task(t)
	task.Spec.Schedule = &v1.Schedule{Cron: "* * * * *"}
	task.Generation++
	if err := e.c.Update(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	_, w := e.reconcile(t)
	wantWrites(t, "schedule added", w, 1) // status only: no run yet
	if got := e.task(t).Status; got.Phase != v1.PhaseScheduled || got.MissedRuns != 0 || !got.NextRunTime.Time.Equal(at(30*24*3600+60)) {
		t.Fatalf("after adding the schedule: %+v", got)
	}
	e.clock.SetTime(at(30*24*3600 + 60))
	e.reconcile(t)
	if got := e.task(t).Status; got.Phase != v1.PhaseRunning || got.MissedRuns != 0 || got.LastJob.Name != jobName("t", runID{Scheduled: at(30*24*3600 + 60), Attempt: 1}) {
		t.Fatalf("first scheduled run: %+v", got)
	}
}

// TestReconcileUpgrade: a Task and its Jobs written by an earlier release (names "<task>-<n>",
// no run-outcome finalizer, a status without currentRun) are taken over without running
// anything again: the running Job gets the finalizer and stays the run.
func TestReconcileUpgrade(t *testing.T) {
	task := newTask(func(t *v1.Task) {
		t.Finalizers = []string{v1.FinalizerJobs}
		t.Status = v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1,
			LastJob: &v1.JobReference{Name: "t-1"}, ActiveJobs: []v1.JobReference{{Name: "t-1"}}}
	})
	e := newFakeEnv(t, task)
	old := buildJob(task, e.r.opts, runID{Attempt: 1})
	old.Name, old.Finalizers = "t-1", nil // as an earlier release named and made it
	if err := e.c.Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t)
	if names := e.jobNames(t); !slices.Equal(names, []string{"t-1"}) {
		t.Fatalf("Jobs %v after the upgrade, want only t-1", names)
	}
	if f := e.job(t, "t-1").Finalizers; !slices.Equal(f, []string{v1.FinalizerRunOutcome}) {
		t.Errorf("the running Job of the earlier release has finalizers %v", f)
	}
	got := e.task(t).Status
	if got.Phase != v1.PhaseRunning || got.CurrentRun == nil || got.CurrentRun.Job.Name != "t-1" || got.CurrentRun.Attempt != 1 {
		t.Fatalf("status after the upgrade: %+v", got)
	}
	e.clock.SetTime(at(30))
	e.finishJob(t, "t-1", batchv1.JobComplete, "")
	e.reconcile(t)
	e.reconcile(t)
	if names := e.jobNames(t); !slices.Equal(names, []string{"t-1"}) {
		t.Errorf("Jobs %v after the run, want only t-1", names)
	}
	if got := e.task(t); got.Status.Phase != v1.PhaseSucceeded || len(got.Finalizers) != 0 {
		t.Errorf("after the run: %s, finalizers %v", got.Status.Phase, got.Finalizers)
	}
}

// TestReconcileUpgradeFinished: an earlier release's finished Task whose Jobs are gone stays
// finished; one whose retry was pending retries as the next attempt, not the first again.
func TestReconcileUpgradeFinished(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status v1.TaskStatus
		want   []string
	}{
		{"succeeded", v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseSucceeded, Attempts: 1, LastJob: &v1.JobReference{Name: "t-1"}, CompletionTime: mtime(5)}, nil},
		{"failed", v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseFailed, Attempts: 3, LastJob: &v1.JobReference{Name: "t-3"}, CompletionTime: mtime(5)}, nil},
		{"retrying", v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRetrying, Attempts: 1, LastJob: &v1.JobReference{Name: "t-1"}, NextRunTime: mtime(6)}, []string{"t-0-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t, newTask(withStatus(tc.status)))
			e.clock.SetTime(at(100))
			e.reconcile(t)
			if names := e.jobNames(t); !slices.Equal(names, tc.want) {
				t.Errorf("Jobs %v, want %v", names, tc.want)
			}
		})
	}
}

// TestAdmissionAndReconcilerAgree is issue #14 item 9: a schedule the admission webhook accepts
// is one the reconciler runs, and one it refuses the reconciler marks InvalidSchedule; neither
// panics on a TZ= prefix.
func TestAdmissionAndReconcilerAgree(t *testing.T) {
	for _, cron := range []string{"*/5 * * * *", "@hourly", "@every 2s", "CRON_TZ=UTC 0 9 * * *", "TZ=UTC", "TZ=", "CRON_TZ=Europe/Paris", "61 * * * *", "* * * * * *", "", " ", "@every -1s", "@every 0s"} {
		task := newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: cron} })
		admitted := len(v1.Validate(task)) == 0
		a := analyze(task, nil, at(100))
		if admitted != (a.invalid == nil) {
			t.Errorf("%q: admission says valid=%v, the reconciler says invalid=%v", cron, admitted, a.invalid)
		}
		st := computeStatus(task, nil, at(100))
		if !admitted && !conditionTrue(st.Conditions, v1.ConditionStalled) {
			t.Errorf("%q: refused by admission but not Stalled: %+v", cron, st.Conditions)
		}
	}
}

// TestReconcileEarlierIncarnation: a Task deleted and created again under the same name finds
// the earlier Task's Job (still held by its finalizer) under the name of its first run. It lets
// that Job go instead of waiting for it forever, then runs.
func TestReconcileEarlierIncarnation(t *testing.T) {
	e := newFakeEnv(t, newTask())
	earlier := newTask(func(t *v1.Task) { t.UID = "earlier-uid" })
	job := buildJob(earlier, e.r.opts, runID{Attempt: 1})
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := e.c.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key}); err == nil {
		t.Fatal("created a run while the earlier Task's Job held its name")
	}
	if names := e.jobNames(t); len(names) != 0 {
		t.Fatalf("the earlier Task's Job is still there: %v", names)
	}
	e.reconcile(t)
	if got := e.task(t).Status; got.Phase != v1.PhaseRunning || got.CurrentRun.Job.Name != "t-0-1" {
		t.Fatalf("after the earlier Job went: %+v", got)
	}
	if j := e.job(t, "t-0-1"); metav1.GetControllerOf(j).UID != "task-uid" {
		t.Errorf("Job t-0-1 belongs to %v", metav1.GetControllerOf(j))
	}
}

// TestStaleTaskCacheNeverReRunsASucceededAttempt: a second replica takes over (or the Task watch lags
// behind the Job watch) and its cache still shows an earlier stored status of the Task: the one
// that recorded attempt 1's failure and a retry due, written just before the Task's finalizer
// went. Meanwhile attempt 2 ran, succeeded, was recorded and released, and its TTL deleted its
// Job. Deciding from the cached Task without confirming it is current, the replica creates
// t-0-2 again: the deterministic name protects only while the Job exists, so a succeeded attempt
// executes a second time (the status write that follows fails with a conflict, too late).
func TestStaleTaskCacheNeverReRunsASucceededAttempt(t *testing.T) {
	e := newFakeEnv(t, newTask())
	var stale *v1.Task
	inner := e.r.client.(client.WithWatch)
	e.r.client = interceptor.NewClient(inner, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if task, ok := obj.(*v1.Task); ok && stale == nil && task.Status.CurrentRun != nil &&
				task.Status.CurrentRun.Attempt == 1 && task.Status.CurrentRun.Outcome == v1.RunFailed {
				stale = e.task(t) // the version the status write made, the Task finalizer still on
			}
			return nil
		},
	})

	e.reconcile(t) // attempt 1
	e.clock.SetTime(at(10))
	e.finishJob(t, "t-0-1", batchv1.JobFailed, "BackoffLimitExceeded")
	e.reconcile(t) // failure recorded, retry at 11
	if stale == nil || !slices.Contains(stale.Finalizers, v1.FinalizerJobs) {
		t.Fatalf("no snapshot of the status write with the finalizer on: %+v", stale)
	}
	e.clock.SetTime(at(11))
	e.reconcile(t) // attempt 2
	e.clock.SetTime(at(20))
	e.finishJob(t, "t-0-2", batchv1.JobComplete, "")
	e.reconcile(t) // success recorded, t-0-2 released
	if got := e.task(t).Status; got.Phase != v1.PhaseSucceeded || got.Attempts != 2 {
		t.Fatalf("after attempt 2: %s attempts %d", got.Phase, got.Attempts)
	}
	if err := e.c.Delete(context.Background(), e.job(t, "t-0-2")); err != nil { // its TTL
		t.Fatal(err)
	}
	created := 0
	// The other replica: no expectations, a Task cache that still shows the stale version.
	e.r.expect = newExpectations(0)
	e.r.client = interceptor.NewClient(inner, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if task, ok := obj.(*v1.Task); ok {
				stale.DeepCopyInto(task)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			created++
			return nil
		},
	})
	e.clock.SetTime(at(30))
	_, _ = e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key})
	if created > 0 {
		t.Errorf("a replica deciding from a stale cached Task created %d Job(s), Jobs now %v: attempt 2, which succeeded, runs again", created, e.jobNames(t))
	}
}

// TestJobsOfAnEarlierTaskOfTheSameNameAreReleased: a Task was deleted with its finalizer patched away by
// hand (the README's remedy when the operator was removed first) and created again under the same
// name (a GitOps tool re-applies it) before the operator saw it gone. The earlier Task's Jobs
// still hold FinalizerRunOutcome; the garbage collector deletes them (their owner's UID is
// gone), and they stay Terminating for ever: releaseOrphans runs only when no Task of that name
// exists, and the new Task's reconciles skip Jobs that are not its own. Only the Job whose name
// the new Task happens to reuse (t-0-1) is let go.
func TestJobsOfAnEarlierTaskOfTheSameNameAreReleased(t *testing.T) {
	e := newFakeEnv(t, newTask())
	earlier := newTask(func(t *v1.Task) { t.UID = "earlier-uid" })
	for _, n := range []int32{1, 2} {
		job := buildJob(earlier, e.r.opts, runID{Attempt: n})
		if err := e.c.Create(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Delete(context.Background(), job); err != nil { // the garbage collector
			t.Fatal(err)
		}
	}
	for i := range 5 {
		e.clock.SetTime(at(i * 10))
		_, _ = e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key})
	}
	if got := e.task(t).Status; got.CurrentRun == nil || got.CurrentRun.Job.Name != "t-0-1" {
		t.Fatalf("the new Task did not start: %+v", got)
	}
	var jobs batchv1.JobList
	if err := e.c.List(context.Background(), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if owner := metav1.GetControllerOf(&j); owner != nil && owner.UID == "earlier-uid" && slices.Contains(j.Finalizers, v1.FinalizerRunOutcome) {
			t.Errorf("Job %s of the earlier Task still holds %s (deleting: %v): it stays Terminating for ever", j.Name, v1.FinalizerRunOutcome, j.DeletionTimestamp != nil)
		}
	}
}

// TestReplacedRunIsNotReportedFailedAfterRestart: policy Replace deleted the active Job of the
// run for 60s and started the run for 120s, and the status write that would have recorded it was
// lost (a conflict, or the operator was killed). "Replaced" lived only in that reconcile's memory,
// so after a restart the deleted Job reads "deleted before it finished": Failed=True,
// Ready=False, lastError set, although the README says a run deleted by Replace is not reported
// as failed.
func TestReplacedRunIsNotReportedFailedAfterRestart(t *testing.T) {
	e := newFakeEnv(t, newTask(scheduled(v1.ReplaceConcurrent)))
	e.clock.SetTime(at(61))
	e.reconcile(t) // the run for 60s
	s60 := jobName("t", runID{Scheduled: at(60), Attempt: 1})
	if got := e.task(t).Status; got.CurrentRun == nil || got.CurrentRun.Job.Name != s60 {
		t.Fatalf("no run for 60s: %+v", got)
	}
	inner := e.r.client.(client.WithWatch)
	e.r.client = interceptor.NewClient(inner, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return errors.New("the operator was killed before the status write")
		},
	})
	e.clock.SetTime(at(121))
	_, _ = e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key}) // Replace, status lost
	if j := e.job(t, s60); j.DeletionTimestamp == nil {
		t.Fatalf("Replace did not delete %s", s60)
	}
	e.r.client, e.r.expect = inner, newExpectations(0) // a restart
	// The fake API server stamps deletions with the wall clock: judge the deleted Job after it.
	e.clock.SetTime(time.Now().Add(deletionSettleTime + time.Second))
	e.reconcile(t)
	e.reconcile(t)
	st := e.task(t).Status
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("the replaced run is reported failed after a restart: Failed=True %s %q, lastError %q", c.Reason, c.Message, st.LastError)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, v1.ConditionReady) {
		t.Errorf("Ready is not True after a Replace: %+v", meta.FindStatusCondition(st.Conditions, v1.ConditionReady))
	}
}

// TestReplacedRunRetriesWhenTheScheduleIsRemoved: the chaos test's cron-089 (issue #14). Policy
// Replace deleted the active Job of the run for 60s and the operator stopped before it created
// the Job of the run for 120s; the schedule was removed before the operator came back. The run
// for 60s, now the Task's only run, ended Failed after one attempt with two retries left
// ("retries exhausted"), though it was cut short, not finished: its retry must follow.
func TestReplacedRunRetriesWhenTheScheduleIsRemoved(t *testing.T) {
	e := newFakeEnv(t, newTask(scheduled(v1.ReplaceConcurrent)))
	e.clock.SetTime(at(61))
	e.reconcile(t) // the run for 60s
	s60 := jobName("t", runID{Scheduled: at(60), Attempt: 1})
	inner := e.r.client.(client.WithWatch)
	e.r.client = interceptor.NewClient(inner, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return errors.New("the operator was killed before the create")
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return errors.New("the operator was killed before the status write")
		},
	})
	e.clock.SetTime(at(121))
	_, _ = e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key}) // Replace, then killed
	if j := e.job(t, s60); j.DeletionTimestamp == nil {
		t.Fatalf("Replace did not delete %s", s60)
	}
	task := e.task(t)
	task.Spec.Schedule = nil
	if err := e.c.Update(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	e.r.client, e.r.expect = inner, newExpectations(0) // a restart
	// The fake API server stamps deletions with the wall clock: judge the deleted Job after it.
	now := time.Now().Add(deletionSettleTime + time.Second).Truncate(time.Second)
	e.clock.SetTime(now)
	e.reconcile(t)
	st := e.task(t).Status
	if st.Phase == v1.PhaseRetrying { // the backoff counts from the deletion
		e.clock.SetTime(st.NextRunTime.Time)
		e.reconcile(t)
		st = e.task(t).Status
	}
	if st.Phase != v1.PhaseRunning || st.Attempts != 2 {
		t.Fatalf("after the schedule was removed: %s attempts %d, want the replaced run's retry (attempt 2) running; conditions %+v",
			st.Phase, st.Attempts, st.Conditions)
	}
	s60retry := jobName("t", runID{Scheduled: at(60), Attempt: 2})
	if names := e.jobNames(t); !slices.Contains(names, s60retry) {
		t.Fatalf("Jobs %v: want the retry %s of the replaced run", names, s60retry)
	}
	e.finishJob(t, s60retry, batchv1.JobComplete, "")
	e.reconcile(t)
	if st := e.task(t).Status; st.Phase != v1.PhaseSucceeded || st.Attempts != 2 {
		t.Errorf("after the retry succeeded: %s attempts %d", st.Phase, st.Attempts)
	}
}

// TestAPrunedSucceededJobKeepsItsFinishTimeWhileTheCacheLags: a succeeded Job deleted by the
// history limit, read again from a cache that does not show the deletion yet, still finished
// when it finished: lastSuccessfulTime does not move to a time when nothing succeeded.
func TestAPrunedSucceededJobKeepsItsFinishTimeWhileTheCacheLags(t *testing.T) {
	e := newFakeEnv(t, newTask(scheduled(v1.AllowConcurrent), func(t *v1.Task) {
		t.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	}))
	var stale *batchv1.JobList
	e.r.client = interceptor.NewClient(e.r.client.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if jobs, ok := list.(*batchv1.JobList); ok && stale != nil {
				stale.DeepCopyInto(jobs)
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	first, second := jobName("t", runID{Scheduled: at(60), Attempt: 1}), jobName("t", runID{Scheduled: at(120), Attempt: 1})
	e.reconcile(t)
	e.clock.SetTime(at(60))
	e.reconcile(t)
	e.clock.SetTime(at(70))
	e.finishJob(t, first, batchv1.JobComplete, "")
	e.reconcile(t)
	e.clock.SetTime(at(120))
	e.reconcile(t)
	e.clock.SetTime(at(130))
	e.finishJob(t, second, batchv1.JobComplete, "")
	stale = &batchv1.JobList{} // the cache as it was before the reconcile that prunes the first
	if err := e.c.List(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t)
	if names := e.jobNames(t); slices.Contains(names, first) {
		t.Fatalf("Jobs %v: %s was not pruned", names, first)
	}
	e.clock.SetTime(at(150))
	e.reconcile(t)
	if got := e.task(t).Status.LastSuccessfulTime; got == nil || !got.Time.Equal(at(130)) {
		t.Errorf("lastSuccessfulTime %v on a cache that lags, want %v: nothing succeeded since", got, at(130))
	}
}
