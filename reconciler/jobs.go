package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
)

// syncSuspend makes each active Job's spec.suspend follow the Task's.
func (r *Reconciler) syncSuspend(ctx context.Context, s *scope) error {
	for _, o := range s.plan.suspend {
		found, err := r.patchCachedJob(ctx, s, o.Name, func(job *batchv1.Job) { job.Spec.Suspend = &s.task.Spec.Suspend })
		if err != nil {
			return fmt.Errorf("set suspend=%t on job %s: %w", s.task.Spec.Suspend, o.Name, err)
		}
		if found {
			s.changed(jobChange{name: o.Name, suspended: new(s.task.Spec.Suspend)})
		}
	}
	return nil
}

// requeueWaiting moves the Jobs waiting in a LocalQueue the Task no longer names to the one it
// names, by their queue label.
func (r *Reconciler) requeueWaiting(ctx context.Context, s *scope) error {
	for _, o := range s.plan.requeue {
		if _, err := r.patchCachedJob(ctx, s, o.Name, func(job *batchv1.Job) { job.Labels[kueueQueueLabel] = s.task.Spec.QueueName }); err != nil {
			return fmt.Errorf("move job %s to LocalQueue %s: %w", o.Name, s.task.Spec.QueueName, err)
		}
	}
	return nil
}

// patchCachedJob changes the cached Job name by mutate and sends the change as a merge patch;
// found is false when the cache has no such Job. A Job deleted meanwhile is no error.
func (r *Reconciler) patchCachedJob(ctx context.Context, s *scope, name string, mutate func(*batchv1.Job)) (found bool, err error) {
	job := s.cached[name]
	if job == nil {
		return false, nil
	}
	patch := client.MergeFrom(job.DeepCopy())
	mutate(job)
	if err := r.client.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
		return true, err
	}
	return true, nil
}

// replaceActive deletes the active Jobs a new run replaces (concurrency policy Replace). Their
// finalizer keeps them readable until the status records them.
func (r *Reconciler) replaceActive(ctx context.Context, s *scope) error {
	for _, o := range s.plan.replace {
		if err := r.markReplaced(ctx, s, o.Name, jobName(s.task.Name, *s.plan.create)); err != nil {
			return err
		}
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		s.changed(jobChange{name: o.Name, deleted: deletedReplaced})
		r.recordEvent(s.task, normal(v1.EventJobReplaced, "Delete", fmt.Sprintf("deleted active Job %s for the run scheduled at %s",
			o.Name, s.plan.create.Scheduled.UTC().Format(time.RFC3339))))
	}
	return nil
}

// cancelRun deletes the current run's active Jobs for a pending cancel request, each marked
// first with the request so that, judged after the deletion (see deletionSettleTime), its
// attempt ends Failed without a retry, even after a restart or a lost status write.
func (r *Reconciler) cancelRun(ctx context.Context, s *scope) error {
	for _, o := range s.plan.cancel {
		at := s.plan.cancelAt.UTC().Format(time.RFC3339)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.task.Namespace, Name: o.Name}}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.AnnotationCancelRequested, at)
		if err := r.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark job %s cancelled: %w", o.Name, err)
		}
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		s.changed(jobChange{name: o.Name, deleted: deletedCancelled, cancelAt: s.plan.cancelAt})
		r.recordEvent(s.task, warning(v1.EventRunCancelled, "Delete", fmt.Sprintf("deleted active Job %s (%s) for the cancel request at %s: the run ends Failed, without a retry",
			o.Name, o.Run, at)))
	}
	return nil
}

// markReplaced annotates a Job about to be deleted by policy Replace, so that a reconcile after a
// restart or a lost status write still knows its run was replaced rather than failed.
func (r *Reconciler) markReplaced(ctx context.Context, s *scope, name, by string) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.task.Namespace, Name: name}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.AnnotationReplacedBy, by)
	if err := r.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("mark job %s replaced: %w", name, err)
	}
	return nil
}

// startRun creates the planned run's Job. A Job of that name that already exists and is the
// Task's own counts as created: names are deterministic, so it can only be this run's.
func (r *Reconciler) startRun(ctx context.Context, s *scope) error {
	if s.plan.create == nil {
		return nil
	}
	run := *s.plan.create
	job := buildJob(s.task, r.opts, run)
	if s.plan.requested {
		job.Annotations[v1.AnnotationRunRequested] = run.Scheduled.UTC().Format(time.RFC3339)
	}
	err := r.client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		if job, err = r.existingJob(ctx, s.task, job.Name); err != nil {
			jobCreationErrors.Inc()
			return r.reportNameTaken(s, err)
		}
	case err != nil:
		jobCreationErrors.Inc()
		r.recordEvent(s.task, warning(v1.EventJobCreateFailed, "Create", fmt.Sprintf("create Job %s: %v", job.Name, err)))
		return fmt.Errorf("create job %s: %w", job.Name, err)
	default:
		s.log.Info("created Job", "job", job.Name, "attempt", run.Attempt)
		runsStarted.Inc()
		if run.Attempt > 1 {
			retries.Inc()
		}
		r.recordEvent(s.task, normal(v1.EventJobCreated, "Create", fmt.Sprintf("created Job %s (%s)", job.Name, run)))
		if s.plan.requested && run.Attempt == 1 {
			r.recordEvent(s.task, normal(v1.EventRunRequested, "Create", fmt.Sprintf("started run for the request at %s: Job %s",
				run.Scheduled.UTC().Format(time.RFC3339), job.Name)))
		}
		if ev, ok := s.plan.missedEvent(); ok {
			s.events = append(s.events, ev)
		}
	}
	r.expect.created(s.task, job.Name, s.now)
	s.cached[job.Name] = job
	created := observeJob(s.task.Name, job)
	s.changed(jobChange{name: job.Name, created: &created})
	return nil
}

// confirmCurrent reads the Task from the API server before a Job is created and refuses to go on
// if the stored Task is newer than the one decided from. The cache of another replica that just
// took over, or a Task watch lagging behind the Job watch, can show a status older than the
// stored one (a retry still due whose attempt has since run, succeeded and been deleted by its
// TTL); the expectations only cover this process's own writes, and a Job's deterministic name
// only protects while the Job exists, so creating from such a status would run an attempt again.
// It runs before anything a new run needs (Replace's deletions included), and only then.
func (r *Reconciler) confirmCurrent(ctx context.Context, s *scope) error {
	if s.plan.create == nil {
		return nil
	}
	task := s.task
	live := &v1.Task{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(task), live); err != nil {
		return fmt.Errorf("confirm task %s is current before creating a job: %w", task.Name, err)
	}
	if live.UID != task.UID || live.ResourceVersion != task.ResourceVersion {
		return fmt.Errorf("task %s changed since it was read (resourceVersion %s, stored %s): deciding again", task.Name, task.ResourceVersion, live.ResourceVersion)
	}
	return nil
}

// reportNameTaken turns a run blocked by someone else's Job of its name into what the Task
// says (a Warning Event and, in summarize, the Stalled condition naming the Job) and a look
// again soon, rather than an error the rate limiter would space out up to its maximum delay.
// Any other error is returned as it is.
func (r *Reconciler) reportNameTaken(s *scope, err error) error {
	var taken *errNameTaken
	if !errors.As(err, &taken) {
		return err
	}
	s.nameTaken = taken
	r.waiters.wait(types.NamespacedName{Namespace: s.task.Namespace, Name: taken.job}, client.ObjectKeyFromObject(s.task))
	s.result.RequeueAfter = minPositive(s.result.RequeueAfter, nameTakenPollInterval)
	r.recordEvent(s.task, warning(v1.EventJobNameTaken, "Create", taken.Error()))
	return nil
}

// existingJob fetches a Job that a create found already there, and makes sure it is the Task's.
// A Job of this Task that lost its owner reference is taken back. A Job left by an earlier Task
// of the same name (deleted, then created again) is let go and deleted, and the creation is
// tried again once it is gone. Anyone else's is an errNameTaken.
func (r *Reconciler) existingJob(ctx context.Context, task *v1.Task, name string) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: name}, job); err != nil {
		return nil, fmt.Errorf("get existing job %s: %w", name, err)
	}
	if lostOwner(task, job) {
		if err := r.adopt(ctx, task, job); err != nil {
			return nil, err
		}
	}
	if metav1.IsControlledBy(job, task) {
		return job, nil
	}
	if !ownedByTaskNamed(job, task.Name) {
		return nil, nameTaken(job)
	}
	if err := r.removeJobFinalizer(ctx, job.Namespace, job.Name); err != nil {
		return nil, err
	}
	if job.DeletionTimestamp == nil {
		err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete job %s of an earlier task %s: %w", name, task.Name, err)
		}
	}
	return nil, fmt.Errorf("create job %s: the Job of an earlier Task named %s is still being deleted", name, task.Name)
}

// deletePruned deletes finished Jobs past the history limits.
func (r *Reconciler) deletePruned(ctx context.Context, s *scope) error {
	for _, o := range s.plan.prune {
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		s.changed(jobChange{name: o.Name, deleted: deletedAsHistory})
	}
	return nil
}

func (r *Reconciler) deleteJob(ctx context.Context, s *scope, name string) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.task.Namespace, Name: name}}
	err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s: %w", name, err)
	}
	r.expect.deleted(s.task, name, s.now)
	s.log.V(1).Info("deleted Job", "job", name)
	return nil
}
