package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// Reconciler runs Tasks as Jobs. Create it with SetupWithManager.
type Reconciler struct {
	client client.Client
	// apiReader reads past the cache: a Job that already exists, every Job at deletion.
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options
	expect    *expectations
}

// scope is one reconcile of one Task: what was read, what was decided, what is to be told.
type scope struct {
	task  *v1.Task
	prior v1.TaskStatus // the status as read, for Events
	now   time.Time
	log   logr.Logger
	patch *patchHelper

	// cached are the Task's Jobs in the cache, by name; jobs everything known about them.
	cached map[string]*batchv1.Job
	jobs   []observedJob
	plan   plan

	result ctrl.Result
	// events are recorded once the status is stored.
	events []eventSpec
}

// Reconcile brings one Task a step closer to what its spec asks. It reads from the cache, acts,
// and writes the Task at most once (finalizer aside) with only what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	task := &v1.Task{}
	if err := r.client.Get(ctx, req.NamespacedName, task); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get task %s: %w", req.NamespacedName, err)
	}
	log := ctrl.LoggerFrom(ctx)
	if r.expect.stale(task) {
		// Our own write is on its way through the watch and will bring the Task back.
		log.V(1).Info("cached Task is older than the controller's last write; waiting")
		return ctrl.Result{}, nil
	}
	s := &scope{
		task:   task,
		prior:  *task.Status.DeepCopy(),
		now:    r.opts.Clock.Now().Truncate(time.Second),
		log:    log,
		patch:  newPatchHelper(r.client, task, r.expect.wrote),
		cached: map[string]*batchv1.Job{},
	}
	defer func() {
		if err := s.patch.Patch(ctx, task); err != nil {
			result, retErr = ctrl.Result{}, errors.Join(retErr, err)
			return
		}
		r.tell(s)
	}()

	if task.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	for _, phase := range []func(context.Context, *scope) (bool, error){
		r.ensureFinalizer,
		r.observeJobs,
		r.act,
	} {
		done, err := phase(ctx, s)
		if err != nil {
			return ctrl.Result{}, err // the rate limiter decides when to try again
		}
		if done {
			break
		}
	}
	return s.result, nil
}

// ensureFinalizer adds the finalizer and stores it before any Job exists, so no Job can
// outlive its Task unnoticed.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (bool, error) {
	if !controllerutil.AddFinalizer(s.task, v1.FinalizerJobs) {
		return false, nil
	}
	if err := s.patch.Patch(ctx, s.task); err != nil {
		// Leave it to the next reconcile rather than to the deferred patch.
		controllerutil.RemoveFinalizer(s.task, v1.FinalizerJobs)
		return true, fmt.Errorf("add finalizer: %w", err)
	}
	return false, nil
}

// observeJobs lists the Task's Jobs from the cache and settles the expectations: while a Job
// the controller created is not in the cache yet, the reconcile stops here and waits.
func (r *Reconciler) observeJobs(ctx context.Context, s *scope) (bool, error) {
	var list batchv1.JobList
	if err := r.client.List(ctx, &list, client.InNamespace(s.task.Namespace),
		client.MatchingLabels{v1.LabelTaskName: labelValue(s.task.Name)}); err != nil {
		return true, fmt.Errorf("list jobs of task %s: %w", s.task.Name, err)
	}
	names := map[string]bool{}
	for i := range list.Items {
		job := &list.Items[i]
		if metav1.IsControlledBy(job, s.task) {
			s.cached[job.Name] = job
			names[job.Name] = true
		}
	}
	wait, deleting := r.expect.settle(s.task, names, s.now)
	if wait > 0 {
		s.log.V(1).Info("waiting for the cache to show a created Job", "timeout", wait)
		s.result.RequeueAfter = wait
		return true, nil
	}
	for name, job := range s.cached {
		o := observeJob(job)
		if deleting[name] {
			o.Gone = true
		}
		s.jobs = append(s.jobs, o)
	}
	for _, o := range r.expect.finished(s.task, s.now) {
		if !names[o.Name] {
			s.jobs = append(s.jobs, o)
		}
	}
	sortJobs(s.jobs)
	return false, nil
}

// act plans from what was observed, carries the plan out, and computes the status from the
// result. The status is computed even when an action failed, so it never claims a Job that was
// not created, and never loses one that was.
func (r *Reconciler) act(ctx context.Context, s *scope) (bool, error) {
	a := analyze(s.task, s.jobs, s.now)
	s.plan = planRuns(s.task, a, s.jobs, s.now)
	err := r.execute(ctx, s)
	r.summarize(s)
	return true, err
}

// execute carries out the plan, step by step; a failed step stops the ones after it.
func (r *Reconciler) execute(ctx context.Context, s *scope) error {
	for _, step := range []func(context.Context, *scope) error{
		r.syncSuspend,
		r.replaceActive,
		r.startRun,
		r.recordSchedule,
		r.pruneHistory,
	} {
		if err := step(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// syncSuspend makes each active Job's spec.suspend follow the Task's.
func (r *Reconciler) syncSuspend(ctx context.Context, s *scope) error {
	for _, o := range s.plan.suspend {
		job := s.cached[o.Name]
		if job == nil {
			continue
		}
		patch := client.MergeFrom(job.DeepCopy())
		job.Spec.Suspend = ptr.To(s.task.Spec.Suspend)
		if err := r.client.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("set suspend=%t on job %s: %w", s.task.Spec.Suspend, job.Name, err)
		}
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Suspended = s.task.Spec.Suspend
		}
	}
	return nil
}

// replaceActive deletes the active Jobs a new run replaces (concurrency policy Replace).
func (r *Reconciler) replaceActive(ctx context.Context, s *scope) error {
	for _, o := range s.plan.replace {
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Gone, j.Replaced = true, true
		}
		r.record(s.task, normal(v1.EventJobReplaced, "Delete", fmt.Sprintf("deleted active Job %s for the run scheduled at %s",
			o.Name, s.plan.create.Scheduled.UTC().Format(time.RFC3339))))
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
	err := r.client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		if job, err = r.existingJob(ctx, s.task, job.Name); err != nil {
			jobCreationErrors.Inc()
			return err
		}
	case err != nil:
		jobCreationErrors.Inc()
		r.record(s.task, warning(v1.EventJobCreateFailed, "Create", fmt.Sprintf("create Job %s: %v", job.Name, err)))
		return fmt.Errorf("create job %s: %w", job.Name, err)
	default:
		s.log.Info("created Job", "job", job.Name, "attempt", run.Attempt)
		runsStarted.Inc()
		if run.Attempt > 1 {
			retries.Inc()
		}
		r.record(s.task, normal(v1.EventJobCreated, "Create", fmt.Sprintf("created Job %s (attempt %d)", job.Name, run.Attempt)))
	}
	r.expect.created(s.task, job.Name, s.now)
	s.cached[job.Name] = job
	s.jobs = append(s.jobs, observeJob(job))
	sortJobs(s.jobs)
	return nil
}

// recordSchedule accounts for the schedule time acted on, and the times missed. It runs only
// once the run exists (a failed creation leaves the time due for the next attempt).
func (r *Reconciler) recordSchedule(_ context.Context, s *scope) error {
	if s.plan.scheduled.IsZero() {
		return nil
	}
	st := &s.task.Status
	if st.LastScheduleTime == nil || s.plan.scheduled.After(st.LastScheduleTime.Time) {
		st.LastScheduleTime = timePtr(s.plan.scheduled)
	}
	st.MissedRuns += s.plan.missed
	if s.plan.missed > 0 {
		s.events = append(s.events, warning(v1.EventMissedRun, "Skip", s.plan.missedReason))
	}
	return nil
}

// existingJob fetches a Job that a create found already there, and makes sure it is the Task's.
func (r *Reconciler) existingJob(ctx context.Context, task *v1.Task, name string) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: name}, job); err != nil {
		return nil, fmt.Errorf("get existing job %s: %w", name, err)
	}
	if !metav1.IsControlledBy(job, task) {
		return nil, fmt.Errorf("create job %s: a Job of that name exists and is not controlled by this Task", name)
	}
	return job, nil
}

// pruneHistory deletes finished Jobs past the history limits.
func (r *Reconciler) pruneHistory(ctx context.Context, s *scope) error {
	for _, o := range s.plan.prune {
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Gone = true
		}
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

// summarize computes the status from everything now known, the Events the change deserves, and
// when to look again: when the next run is due, not before, and never without a reason.
func (r *Reconciler) summarize(s *scope) {
	s.task.Status = computeStatus(s.task, s.jobs, s.now)
	s.events = append(s.events, transitionEvents(s.task, s.prior, s.task.Status, s.jobs)...)
	switch {
	case s.plan.catchUp:
		s.result.RequeueAfter = time.Second
	case s.task.Status.NextRunTime != nil:
		s.result.RequeueAfter = max(s.task.Status.NextRunTime.Sub(s.now), time.Second)
	}
}

// reconcileDelete deletes every Job of the Task, read from the API server rather than the cache
// so that a Job created a moment ago is not missed, then lets the Task go.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.task, v1.FinalizerJobs) {
		return nil
	}
	var list batchv1.JobList
	if err := r.apiReader.List(ctx, &list, client.InNamespace(s.task.Namespace),
		client.MatchingLabels{v1.LabelTaskName: labelValue(s.task.Name)}); err != nil {
		return fmt.Errorf("list jobs of task %s: %w", s.task.Name, err)
	}
	var errs []error
	for i := range list.Items {
		job := &list.Items[i]
		if !metav1.IsControlledBy(job, s.task) || job.DeletionTimestamp != nil {
			continue
		}
		errs = append(errs, r.deleteJob(ctx, s, job.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.task, v1.FinalizerJobs)
	r.expect.forget(client.ObjectKeyFromObject(s.task))
	return nil
}

// tell records the Events of a stored status, counts them, and drops the remembered final
// states of deleted Jobs the stored status now reflects.
func (r *Reconciler) tell(s *scope) {
	for _, e := range s.events {
		r.record(s.task, e)
		switch e.Reason {
		case v1.EventSucceeded:
			runsSucceeded.Inc()
		case v1.EventRunFailed:
			runsFailed.Inc()
		}
	}
	var gone []string
	for _, j := range s.jobs {
		if j.Gone {
			gone = append(gone, j.Name)
		}
	}
	r.expect.consumed(s.task, gone)
}

// record records an Event on the Task. Events about an action taken (a Job created, replaced)
// are recorded at once; those about a status transition wait for the status (see tell).
func (r *Reconciler) record(task *v1.Task, e eventSpec) {
	if r.recorder != nil {
		r.recorder.Eventf(task, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}
