package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestDeletedJobIsReleasedBeforeItsAttemptIsJudged pins the order for a Job deleted before it
// finished, on the real API server: its finalizer goes first, with a patch that tests the
// resourceVersion read, so a success the Job controller counts on the Job being deleted is
// either seen (the patch fails, the Job is read again and succeeded) or can no longer be
// counted (the Job is gone before the attempt is recorded failed).
func TestDeletedJobIsReleasedBeforeItsAttemptIsJudged(t *testing.T) {
	cases := []struct {
		name string
		// countSuccess writes, between the settle's read and its release, the success the Job
		// controller counts for a pod that ended after the deletion.
		countSuccess bool
		// countedBeforeTheRead writes the success after the cache's view of the Job and before
		// the settle reads it live: the read, not the stale view, is judged.
		countedBeforeTheRead bool
		// otherFinalizer: a second finalizer (foregroundDeletion) would keep the Job past ours.
		otherFinalizer bool
		wantState      jobState
		wantGone       bool
	}{
		{name: "nothing counted: released, then judged cancelled", wantState: jobActive, wantGone: true},
		{name: "success counted during the release: judged again, succeeded", countSuccess: true, wantState: jobSucceeded},
		{name: "held by another finalizer too: left for status, then release", otherFinalizer: true, wantState: jobActive},
		{name: "success counted before the read: judged succeeded from the read", countedBeforeTheRead: true, wantState: jobSucceeded},
		{name: "held by another finalizer, success counted before the read: judged succeeded from the read", otherFinalizer: true, countedBeforeTheRead: true, wantState: jobSucceeded},
	}
	base, err := client.NewWithWatch(testenv.Shared(t).Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ns := testenv.NewNamespace(t, base)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := deletedProtectedJob(t, base, ns, fmt.Sprintf("t%d-0-1", i), tc.otherFinalizer)
			injected := false
			c := interceptor.NewClient(base, interceptor.Funcs{
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if tc.countSuccess && !injected {
						injected = true
						counted := client.RawPatch(types.MergePatchType, []byte(`{"status":{"succeeded":1}}`))
						if err := cl.Status().Patch(ctx, obj.DeepCopyObject().(client.Object), counted); err != nil {
							return fmt.Errorf("count the success: %w", err)
						}
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
			r := &Reconciler{client: c, apiReader: base}
			s := &scope{task: &v1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("t%d", i)}},
				now: time.Now().Add(deletionSettleTime + time.Second), log: logr.Discard()}
			o := observeJob(s.task.Name, job)
			if tc.countedBeforeTheRead {
				counted := client.RawPatch(types.MergePatchType, []byte(`{"status":{"succeeded":1}}`))
				if err := base.Status().Patch(t.Context(), job.DeepCopy(), counted); err != nil {
					t.Fatalf("count the success: %v", err)
				}
			}
			if err := r.settleDeletedJob(t.Context(), s, &o); err != nil {
				t.Fatalf("settle: %v", err)
			}
			if tc.countSuccess {
				// The release must not land over the count; the Job waits to be judged again.
				if !o.unjudged(s.now) || slices.Contains(s.released, job.Name) {
					t.Fatalf("after a count during the release: unjudged %v, released %v", o.unjudged(s.now), s.released)
				}
				if err := r.settleDeletedJob(t.Context(), s, &o); err != nil {
					t.Fatalf("settle again: %v", err)
				}
			}
			if o.State != tc.wantState {
				t.Errorf("judged %v, want %v", o.State, tc.wantState)
			}
			if released := slices.Contains(s.released, job.Name); released != tc.wantGone {
				t.Errorf("released %v, want %v", released, tc.wantGone)
			}
			err := base.Get(t.Context(), client.ObjectKeyFromObject(job), &batchv1.Job{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("Job gone %v (%v), want %v", gone, err, tc.wantGone)
			}
		})
	}
}

// deletedProtectedJob creates a suspended Job holding FinalizerRunOutcome, deletes it as
// kubectl does, and returns it as read once the deletion is recorded.
func deletedProtectedJob(t *testing.T, c client.Client, ns, name string, otherFinalizer bool) *batchv1.Job {
	t.Helper()
	finalizers := []string{v1.FinalizerRunOutcome}
	if otherFinalizer {
		finalizers = append(finalizers, "example.com/another")
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
		Spec: batchv1.JobSpec{
			Suspend:     ptr.To(true),
			Completions: ptr.To[int32](1),
			Parallelism: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
	if err := c.Create(t.Context(), job); err != nil {
		t.Fatalf("create job: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Patch(context.Background(), job, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	// The Job controller's own write (Suspended) must not land inside the settle's release.
	testenv.Eventually(t, 30*time.Second, "the Job controller to see the Job suspended", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return err == nil && slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue
		}), err
	})
	if err := c.Delete(t.Context(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the Job to be Terminating", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), job)
		return err == nil && job.DeletionTimestamp != nil, err
	})
	return job
}

// TestOnlyTheCurrentAttemptsDeletedJobIsReleasedBeforeItIsJudged: the Job released ahead of its
// judgement is the stored record's active attempt, deleted, unfinished and past the settle
// time; a cancelled or replaced Job keeps its mark (no retry) until the status records it.
func TestOnlyTheCurrentAttemptsDeletedJobIsReleasedBeforeItIsJudged(t *testing.T) {
	deletedAt := at(0)
	current := func(mut ...func(*observedJob)) observedJob {
		j := observedJob{Name: "t-0-1", UID: "job-uid", Run: runID{Attempt: 1}, Protected: true, Deleting: true, Finished: deletedAt}
		for _, m := range mut {
			m(&j)
		}
		return j
	}
	active := &v1.RunRecord{Attempt: 1, Job: *ref("t-0-1"), Outcome: v1.RunActive}
	cases := []struct {
		name string
		rec  *v1.RunRecord
		job  observedJob
		now  time.Time
		want bool
	}{
		{"the current attempt, deleted, past the settle time", active, current(), at(6), true},
		{"within the settle time", active, current(), at(4), false},
		{"not deleted", active, current(func(j *observedJob) { j.Deleting = false }), at(6), false},
		{"already finished", active, current(func(j *observedJob) { j.State = jobSucceeded }), at(6), false},
		{"without the finalizer", active, current(func(j *observedJob) { j.Protected = false }), at(6), false},
		{"marked by a cancel request", active, current(func(j *observedJob) { j.Cancelled = at(-1) }), at(6), false},
		{"replaced by a newer run", active, current(func(j *observedJob) { j.Replaced = true }), at(6), false},
		{"missing", active, current(func(j *observedJob) { j.Missing = true }), at(6), false},
		{"another attempt's Job", active, current(func(j *observedJob) { j.Name, j.Run.Attempt = "t-0-2", 2 }), at(6), false},
		{"another incarnation's Job of that name", active, current(func(j *observedJob) { j.UID = "other" }), at(6), false},
		{"the record already holds an outcome", &v1.RunRecord{Attempt: 1, Job: *ref("t-0-1"), Outcome: v1.RunFailed}, current(), at(6), false},
		{"no record", nil, current(), at(6), false},
		{"a record of an earlier release, without the Job's UID", &v1.RunRecord{Attempt: 1, Job: v1.JobReference{Name: "t-0-1"}, Outcome: v1.RunActive}, current(), at(6), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := dueToSettle(tc.rec, tc.job, tc.now); got != tc.want {
				t.Errorf("dueToSettle = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestADeletedCurrentJobIsReleasedBeforeTheStatusRecordsItsAttempt drives Reconcile: the
// current attempt's Job, deleted before it finished and past the settle time, loses its
// finalizer before the status write that records the attempt failed and its retry.
func TestADeletedCurrentJobIsReleasedBeforeTheStatusRecordsItsAttempt(t *testing.T) {
	e := deletedCurrentJob(t)
	_, w := e.reconcile(t)
	release, status := slices.Index(w, "patch *v1.Job t-0-1"), slices.Index(w, "patch/status *v1.Task t")
	if release < 0 || status < 0 || release > status {
		t.Fatalf("writes %v: want the Job released before the status records its attempt", w)
	}
	got := e.task(t).Status
	// The backoff counts from the deletion, long past: the retry starts in the same reconcile.
	if got.Attempts != 2 || !strings.Contains(got.LastError, "t-0-1 was deleted before it finished") {
		t.Errorf("after the judgement: attempts %d, run %+v, lastError %q", got.Attempts, got.CurrentRun, got.LastError)
	}
	if names := e.jobNames(t); slices.Contains(names, "t-0-1") {
		t.Errorf("Jobs %v: the released Job is still there", names)
	}
}

// TestALostStatusWriteAfterTheReleaseStillRetriesOnce: the status write after the release is
// lost (the operator is killed). The restarted operator finds the Job missing, counts the
// attempt failed and runs the retry once, under its own name.
func TestALostStatusWriteAfterTheReleaseStillRetriesOnce(t *testing.T) {
	e := deletedCurrentJob(t)
	inner := e.r.client.(client.WithWatch)
	e.r.client = interceptor.NewClient(inner, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return errors.New("the operator was killed before the status write")
		},
	})
	_, _ = e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: e.key})
	e.r.client, e.r.expect = inner, newExpectations(0) // a restart
	for range 3 {
		e.clock.SetTime(e.clock.Now().Add(10 * time.Second))
		e.reconcile(t)
	}
	got := e.task(t).Status
	if got.Attempts != 2 || got.CurrentRun == nil || got.CurrentRun.Job.Name != "t-0-2" || got.CurrentRun.Outcome != v1.RunActive {
		t.Errorf("after the restart: attempts %d, run %+v, lastError %q", got.Attempts, got.CurrentRun, got.LastError)
	}
	if names := e.jobNames(t); !slices.Equal(names, []string{"t-0-2"}) {
		t.Errorf("Jobs %v, want the retry t-0-2 alone", names)
	}
}

// deletedCurrentJob is a Task whose attempt 1 runs, its Job deleted with the clock past the
// settle time (the fake API server stamps deletions with the wall clock).
func deletedCurrentJob(t *testing.T) *fakeEnv {
	t.Helper()
	e := newFakeEnv(t, newTask())
	e.reconcile(t)
	if got := e.task(t).Status; got.CurrentRun == nil || got.CurrentRun.Job.Name != "t-0-1" {
		t.Fatalf("attempt 1 did not start: %+v", got)
	}
	if err := e.c.Delete(context.Background(), e.job(t, "t-0-1")); err != nil {
		t.Fatalf("delete the Job: %v", err)
	}
	e.clock.SetTime(time.Now().Add(deletionSettleTime + time.Second))
	return e
}
