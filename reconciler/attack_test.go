package reconciler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "example.com/task-operator/apis/v1"
)

// TestAttackStaleTaskCacheReRunsAttempt: a second replica takes over (or the Task watch lags
// behind the Job watch) and its cache still shows an earlier stored status of the Task: the one
// that recorded attempt 1's failure and a retry due, written just before the Task's finalizer
// went. Meanwhile attempt 2 ran, succeeded, was recorded and released, and its TTL deleted its
// Job. Deciding from the cached Task without confirming it is current, the replica creates
// t-0-2 again: the deterministic name protects only while the Job exists, so a succeeded attempt
// executes a second time (the status write that follows fails with a conflict, too late).
func TestAttackStaleTaskCacheReRunsAttempt(t *testing.T) {
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

// TestAttackHugeStartingDeadline: startingDeadlineSeconds has no maximum, and
// time.Duration(10_000_000_000) * time.Second overflows int64 to a negative duration, so every
// schedule time reads as past its deadline: the Task never runs (and Forbid never holds a time
// back). A deadline of 317 years must read as "no practical deadline".
func TestAttackHugeStartingDeadline(t *testing.T) {
	for _, d := range []int64{10_000_000_000, 1 << 62, 1<<63 - 1} {
		task := newTask(scheduled(v1.AllowConcurrent), deadline(d))
		p := planRuns(task, analyze(task, nil, at(61)), nil, at(61))
		if p.create == nil || !p.create.Scheduled.Equal(at(60)) {
			t.Errorf("startingDeadlineSeconds %d: one second after the schedule time, create = %v, want the run for %s", d, p.create, at(60))
		}
	}
}

// TestAttackTooManyMissedIgnoresDeadline: a CronJob counts missed times only within
// startingDeadlineSeconds (mostRecentScheduleTime moves its earliest time up to now minus the
// deadline), so a CronJob with a deadline of 60s whose controller was away for three hours warns
// of no TooManyMissedTimes, and the Event's own advice, "set a lower startingDeadlineSeconds", is
// what silences it. Here the count runs from the last run whatever the deadline: the warning
// comes, and the advice it gives cannot make it go.
func TestAttackTooManyMissedIgnoresDeadline(t *testing.T) {
	task := newTask(scheduled(v1.AllowConcurrent), deadline(60), withStatus(v1.TaskStatus{
		ObservedGeneration: 1, LastScheduleTime: mtime(0), CurrentRun: run(0+60, 1, v1.RunSucceeded, 70),
		ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)},
	}))
	now := at(3*3600 + 5)
	p := planRuns(task, analyze(task, nil, now), nil, now)
	if p.create == nil {
		t.Fatalf("no run started three hours later")
	}
	if ev, ok := p.missedEvent(); ok && ev.Reason == v1.EventTooManyMissedTimes {
		t.Errorf("startingDeadlineSeconds 60, away 3h: %s %q; a CronJob counts only the times within the deadline and warns of none", ev.Reason, ev.Note)
	}
}

// TestAttackEarlierIncarnationJobsStuck: a Task was deleted with its finalizer patched away by
// hand (the README's remedy when the operator was removed first) and created again under the same
// name (a GitOps tool re-applies it) before the operator saw it gone. The earlier Task's Jobs
// still hold FinalizerRunOutcome; the garbage collector deletes them (their owner's UID is
// gone), and they stay Terminating for ever: releaseOrphans runs only when no Task of that name
// exists, and the new Task's reconciles skip Jobs that are not its own. Only the Job whose name
// the new Task happens to reuse (t-0-1) is let go.
func TestAttackEarlierIncarnationJobsStuck(t *testing.T) {
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

// TestAttackReplacedRunReportedFailedAfterRestart: policy Replace deleted the active Job of the
// run for 60s and started the run for 120s, and the status write that would have recorded it was
// lost (a conflict, or the operator was killed). "Replaced" lived only in that reconcile's memory,
// so after a restart the deleted Job reads "deleted before it finished": Failed=True,
// Ready=False, lastError set, although the README says a run deleted by Replace is not reported
// as failed.
func TestAttackReplacedRunReportedFailedAfterRestart(t *testing.T) {
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

// TestAttackReplacedRunFailsWhenScheduleRemoved: the chaos test's cron-089 (issue #14). Policy
// Replace deleted the active Job of the run for 60s and the operator stopped before it created
// the Job of the run for 120s; the schedule was removed before the operator came back. The run
// for 60s, now the Task's only run, ended Failed after one attempt with two retries left
// ("retries exhausted"), though it was cut short, not finished: its retry must follow.
func TestAttackReplacedRunFailsWhenScheduleRemoved(t *testing.T) {
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
