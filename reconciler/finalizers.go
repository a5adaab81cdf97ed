package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// The finalizers: FinalizerRunOutcome on every Job until its outcome is recorded, and
// FinalizerJobs on the Task only while some Job may run or still holds FinalizerRunOutcome.

// ensureFinalizer stores the Task's finalizer before a Job is created or protected, so no Job
// holding FinalizerRunOutcome can outlive its Task unnoticed. It is written at once, not with
// the status: the Job must not exist before it does.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) error {
	if s.plan.create == nil && len(s.plan.protect) == 0 && !holdsFinalizers(s.jobs, s.plan.release) {
		return nil
	}
	if !controllerutil.AddFinalizer(s.task, v1.FinalizerJobs) {
		return nil
	}
	if err := s.patch.Patch(ctx, s.task); err != nil {
		// Leave it to the next reconcile rather than to the deferred patch.
		controllerutil.RemoveFinalizer(s.task, v1.FinalizerJobs)
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// holdsFinalizers says some Job still carries FinalizerRunOutcome once released are let go.
func holdsFinalizers(jobs, released []observedJob) bool {
	return slices.ContainsFunc(jobs, func(j observedJob) bool { return j.Protected && !j.Missing && !outcomeRecorded(j, released) })
}

// releaseJobs removes FinalizerRunOutcome from the Jobs whose outcome the stored status records.
func (r *Reconciler) releaseJobs(ctx context.Context, s *scope) error {
	for _, o := range s.plan.release {
		if err := r.removeJobFinalizer(ctx, s.task.Namespace, o.Name); err != nil {
			return err
		}
		s.released = append(s.released, o.Name)
		s.changed(jobChange{name: o.Name, protected: new(false)})
	}
	return nil
}

// removeJobFinalizer removes FinalizerRunOutcome, and only it, with a JSON patch that tests the
// finalizer is where it was read: finalizers added meanwhile (foregroundDeletion by the
// garbage collector) are never dropped, and a Job read from a stale cache is re-read.
func (r *Reconciler) removeJobFinalizer(ctx context.Context, namespace, name string) error {
	job := &batchv1.Job{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get job %s to release it: %w", name, err)
	}
	i := slices.Index(job.Finalizers, v1.FinalizerRunOutcome)
	if i < 0 {
		return nil
	}
	err := r.client.Patch(ctx, job, releasePatch(i, ""))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from job %s: %w", name, err)
	}
	return nil
}

// settleDeletedJobs fixes the outcome of the current attempt's Job when it was deleted before
// it finished and is due to be judged. The Job controller still counts, for as long as
// FinalizerRunOutcome holds the Job, the pods that had ended before it synced the deletion; a
// controller that lags could so make the Job succeed after the judgement, while a retry runs
// the work again. The finalizer is therefore removed first, with a patch that tests the
// resourceVersion the Job is judged on: once it lands nothing can count for the Job any more; a
// status write in between fails it, and the Job waits to be judged again from what that write
// says.
func (r *Reconciler) settleDeletedJobs(ctx context.Context, s *scope) (bool, error) {
	for i := range s.jobs {
		if dueToSettle(s.task.Status.CurrentRun, s.jobs[i], s.now) {
			return false, r.settleDeletedJob(ctx, s, &s.jobs[i])
		}
	}
	return false, nil
}

// dueToSettle says j is released before it is judged: the stored record's own active attempt,
// deleted before it finished, past deletionSettleTime. Only that Job: once it is gone, a lost
// status write finds it missing and still judges the attempt failed with a retry, as it would
// have been. A Job marked by a cancel request or replaced by a newer run keeps its finalizer
// until the status records it: its mark, which says no retry follows, must outlive a lost write.
func dueToSettle(rec *v1.RunRecord, j observedJob, now time.Time) bool {
	switch {
	case rec == nil || rec.Outcome != v1.RunActive || rec.Job.Name != j.Name:
		return false
	case rec.Job.UID != "" && rec.Job.UID != j.UID: // an earlier release recorded no UID
		return false
	case !j.Protected || !j.Deleting || j.Missing || j.Replaced || !j.Cancelled.IsZero():
		return false
	}
	return j.State == jobActive && !j.unjudged(now)
}

// settleDeletedJob reads j live and either takes what the Job controller has counted since, or
// releases the Job as read. A Job that changed under the release is judged next time, from
// what changed. A Job another finalizer holds (foregroundDeletion: the garbage collector stops
// its pods first) would outlive the release and could still be counted, and a release refused
// for any other reason must not stop the Task: both keep the old order, status then release,
// judged from the live read when that read shows a count.
func (r *Reconciler) settleDeletedJob(ctx context.Context, s *scope, j *observedJob) error {
	live := &batchv1.Job{}
	key := client.ObjectKey{Namespace: s.task.Namespace, Name: j.Name}
	if err := r.apiReader.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get deleted job %s to settle it: %w", j.Name, err)
	}
	if live.UID != j.UID {
		return nil // gone: another took its name
	}
	i := slices.Index(live.Finalizers, v1.FinalizerRunOutcome)
	if o := observeJob(s.task.Name, live); o.State != jobActive || i < 0 {
		*j = o // counted (or released) meanwhile: judged from the API server's word
		return nil
	}
	if len(live.Finalizers) > 1 {
		return nil // held by another finalizer too: status, then release
	}
	err := r.client.Patch(ctx, live, releasePatch(i, live.ResourceVersion))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		s.released = append(s.released, j.Name)
		return nil
	case apierrors.IsInvalid(err) && r.changedSince(ctx, key, live.ResourceVersion):
		s.log.V(1).Info("a deleted Job changed while it was released; judging it later", "job", j.Name)
		j.Finished = s.now
		return nil
	default:
		s.log.Error(err, "could not release a deleted Job before judging it; it is released after the status", "job", j.Name)
		return nil
	}
}

// changedSince says the Job at key is gone or no longer at resourceVersion: what failed a
// patch's test. Anything else that refuses the patch is an error to report.
func (r *Reconciler) changedSince(ctx context.Context, key client.ObjectKey, resourceVersion string) bool {
	job := &batchv1.Job{}
	err := r.apiReader.Get(ctx, key, job)
	return apierrors.IsNotFound(err) || (err == nil && job.ResourceVersion != resourceVersion)
}

// releasePatch removes FinalizerRunOutcome from index i of a Job's finalizers, testing it is
// there; with a resourceVersion it also tests the Job is still at it.
func releasePatch(i int, resourceVersion string) client.Patch {
	var rv []byte
	if resourceVersion != "" {
		rv = fmt.Appendf(nil, `{"op":"test","path":"/metadata/resourceVersion","value":%q},`, resourceVersion)
	}
	return client.RawPatch(types.JSONPatchType, fmt.Appendf(nil,
		`[%s{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
		rv, i, v1.FinalizerRunOutcome, i))
}

// releaseAfterStatus runs once the status is stored: the outcomes it records are durable now, so the Jobs
// holding FinalizerRunOutcome for them are released at once (a Job the cache does not show would
// not be seen again), and then the Task's own finalizer goes if it protects nothing any more.
func (r *Reconciler) releaseAfterStatus(ctx context.Context, s *scope) error {
	if !s.acted || s.task.DeletionTimestamp != nil {
		return nil
	}
	for _, o := range releasable(s.task, s.jobs, s.now) {
		if slices.Contains(s.released, o.Name) {
			continue
		}
		if err := r.removeJobFinalizer(ctx, s.task.Namespace, o.Name); err != nil {
			return err
		}
		s.released = append(s.released, o.Name)
	}
	if r.protects(s) || !controllerutil.RemoveFinalizer(s.task, v1.FinalizerJobs) {
		return nil
	}
	if err := s.patch.Patch(ctx, s.task); err != nil {
		controllerutil.AddFinalizer(s.task, v1.FinalizerJobs)
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// protects says whether the Task's finalizer still guards something: a Job that may run or
// whose outcome is not recorded, or a run the status is about to record as started.
func (r *Reconciler) protects(s *scope) bool {
	st := s.task.Status
	switch {
	case s.plan.create != nil, len(st.ActiveJobs) > 0:
		return true
	case st.CurrentRun != nil && st.CurrentRun.Outcome == v1.RunActive:
		return true
	}
	return slices.ContainsFunc(s.jobs, func(j observedJob) bool {
		return j.Protected && !j.Missing && !slices.Contains(s.released, j.Name)
	})
}

// reconcileDelete lets every Job of the Task go (its finalizer removed, the Job deleted), read
// from the API server rather than the cache so that a Job created a moment ago or one whose
// labels were stripped is not missed, then lets the Task go. Jobs the user asked to keep (a
// delete with --cascade=orphan: the Task carries the orphan finalizer, or the garbage collector
// already took their owner reference off) are released and left in place.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.task, v1.FinalizerJobs) {
		return nil
	}
	owned, orphaned, err := r.liveJobs(ctx, s.task)
	if err != nil {
		return err
	}
	keep := controllerutil.ContainsFinalizer(s.task, metav1.FinalizerOrphanDependents)
	var errs []error
	for _, job := range append(owned, orphaned...) {
		if controllerutil.ContainsFinalizer(&job, v1.FinalizerRunOutcome) {
			errs = append(errs, r.removeJobFinalizer(ctx, job.Namespace, job.Name))
		}
	}
	for _, job := range owned {
		if !keep && job.DeletionTimestamp == nil {
			errs = append(errs, r.deleteJob(ctx, s, job.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.task, v1.FinalizerJobs)
	r.expect.forget(client.ObjectKeyFromObject(s.task))
	return nil
}

// releaseOrphans lets go the Jobs that still hold FinalizerRunOutcome although their Task is
// gone (its finalizer was removed by hand): nothing can record their outcome any more, and they
// must not stay Terminating forever. The owner is confirmed gone with a live read first.
func (r *Reconciler) releaseOrphans(ctx context.Context, key client.ObjectKey) error {
	var list batchv1.JobList
	if err := r.client.List(ctx, &list, client.InNamespace(key.Namespace),
		client.MatchingLabels{v1.LabelTaskName: labelValue(key.Name)}); err != nil {
		return fmt.Errorf("list jobs of deleted task %s: %w", key, err)
	}
	return r.releaseEarlier(ctx, key, orphansOf(key.Name, "", list.Items))
}

// orphansOf are the Jobs holding FinalizerRunOutcome that no Task incarnation but current can
// record: those whose controller is a Task named name with another UID, and those that lost
// their owner reference and were made for another incarnation, or for this name by an earlier
// release (no AnnotationTaskUID, a name only this Task's runs have). current empty: any.
func orphansOf(name string, current types.UID, jobs []batchv1.Job) []batchv1.Job {
	var orphans []batchv1.Job
	for _, job := range jobs {
		if !controllerutil.ContainsFinalizer(&job, v1.FinalizerRunOutcome) {
			continue
		}
		if uid, ok := incarnationOf(name, &job); ok && (current == "" || uid != current) {
			orphans = append(orphans, job)
		}
	}
	return orphans
}

// incarnationOf is the UID of the Task named name that job was made for, if job is one of that
// name's: by its controller, else by AnnotationTaskUID on a Job named for one of its runs. A Job
// of an earlier release that lost its owner says no UID ("", true).
func incarnationOf(name string, job *batchv1.Job) (types.UID, bool) {
	if owner := metav1.GetControllerOf(job); owner != nil {
		return owner.UID, ownedByTaskNamed(job, name)
	}
	if _, ok := runFromAnyName(name, job.Name); !ok {
		if _, ok := legacyRunFromName(name, job.Name); !ok {
			return "", false
		}
	}
	return types.UID(job.Annotations[v1.AnnotationTaskUID]), true
}

// releaseEarlier lets go the orphans whose owning Task is confirmed gone by a live read: none of
// that name exists, or the one that does is another incarnation (a Task deleted with its
// finalizer removed by hand and created again before the operator saw it gone).
func (r *Reconciler) releaseEarlier(ctx context.Context, key client.ObjectKey, orphans []batchv1.Job) error {
	if len(orphans) == 0 {
		return nil
	}
	live := &v1.Task{}
	err := r.apiReader.Get(ctx, key, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("confirm task %s is gone: %w", key, err)
	}
	var errs []error
	for _, job := range orphans {
		if uid, _ := incarnationOf(key.Name, &job); err == nil && uid == live.UID {
			continue // the Task exists; the cache had not caught up
		}
		errs = append(errs, r.removeJobFinalizer(ctx, job.Namespace, job.Name))
	}
	return errors.Join(errs...)
}
