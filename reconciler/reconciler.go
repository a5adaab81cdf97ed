package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
)

// uncachedPollInterval is how often a Job known only from the API server (its labels were
// stripped, so the cache and its watch do not see it) is read again while it runs.
const uncachedPollInterval = 10 * time.Second

// Reconciler runs Tasks as Jobs. Create it with SetupWithManager.
type Reconciler struct {
	client client.Client
	// apiReader reads past the cache: before a Job is declared missing, and at deletion.
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options
	expect    *expectations
	// kueue knows whether Kueue's API is served, and reads Workloads.
	kueue *kueueAPI
	// waiters are the Tasks whose run's Job name another object holds.
	waiters *nameWaiters
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
	// kueueServed says Kueue's API is served (asked only for Tasks with spec.queueName).
	kueueServed bool
	// released are the Jobs whose finalizer this reconcile removed.
	released []string
	// acted says the plan was made and carried out, so what protects the Task is known.
	acted bool
	// nameTaken says the planned run could not start: its Job's name is someone else's.
	nameTaken *errNameTaken

	result ctrl.Result
	// events are recorded once the status is stored.
	events []eventSpec
}

// Reconcile brings one Task a step closer to what its spec asks. It reads from the cache (and
// from the API server what the cache cannot vouch for), acts, and writes the Task's status at
// most once, with only what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	task := &v1.Task{}
	if err := r.client.Get(ctx, req.NamespacedName, task); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.forget(req.NamespacedName)
			return ctrl.Result{}, r.releaseOrphans(ctx, req.NamespacedName)
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
		if err := r.letGo(ctx, s); err != nil {
			result, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
		r.tell(s)
	}()

	if task.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	for _, phase := range []func(context.Context, *scope) (bool, error){
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

// observeJobs gathers everything known about the Task's Jobs: the cache, and the API server for
// every Job the cache does not show although the controller created it a while ago or the
// stored status says it may still run. A Job is never declared missing on the cache's word.
func (r *Reconciler) observeJobs(ctx context.Context, s *scope) (bool, error) {
	var list batchv1.JobList
	if err := r.client.List(ctx, &list, client.InNamespace(s.task.Namespace),
		client.MatchingLabels{v1.LabelTaskName: labelValue(s.task.Name)}); err != nil {
		return true, fmt.Errorf("list jobs of task %s: %w", s.task.Name, err)
	}
	names := map[string]bool{}
	for i := range list.Items {
		job := &list.Items[i]
		if lostOwner(s.task, job) {
			if err := r.adopt(ctx, s.task, job); err != nil {
				return true, err
			}
		}
		if metav1.IsControlledBy(job, s.task) {
			s.cached[job.Name] = job
			names[job.Name] = true
		}
	}
	if err := r.releaseEarlier(ctx, client.ObjectKeyFromObject(s.task), orphansOf(s.task.Name, s.task.UID, list.Items)); err != nil {
		return true, err
	}
	settle := r.expect.settle(s.task, names, s.now)
	if settle.wait > 0 {
		s.log.V(1).Info("waiting for the cache to show a created Job", "timeout", settle.wait)
		s.result.RequeueAfter = settle.wait
		return true, nil
	}
	for name, job := range s.cached {
		o := observeJob(s.task.Name, job)
		if settle.deleting[name] && !o.Deleting {
			o.Deleting, o.Finished = true, s.now
		}
		s.jobs = append(s.jobs, o)
	}
	for _, name := range unseen(s.task, names, settle.overdue) {
		o, err := r.lookUp(ctx, s.task, name)
		if err != nil {
			return true, err
		}
		r.expect.confirmed(s.task, name)
		if o != nil {
			s.jobs = append(s.jobs, *o)
		}
	}
	sortJobs(s.jobs)
	if err := r.podFailures(ctx, s); err != nil {
		return true, err
	}
	return false, r.explainWaiting(ctx, s)
}

// act plans from what was observed, carries the plan out, and computes the status from the
// result. The status is computed even when an action failed, so it never claims a Job that was
// not created, and never loses one that was.
func (r *Reconciler) act(ctx context.Context, s *scope) (bool, error) {
	s.kueueServed = s.task.Spec.QueueName == "" || r.kueue.servedNow()
	a := analyzeIn(s.task, s.jobs, s.now, s.kueueServed)
	for _, err := range a.requests.invalid {
		r.record(s.task, warning(v1.EventInvalidRequest, "Request", err.Error()))
	}
	s.plan = planRuns(s.task, a, s.jobs, s.now)
	err := r.execute(ctx, s)
	r.summarize(s)
	s.acted = true
	return true, err
}

// execute carries out the plan, step by step; a failed step stops the ones after it.
func (r *Reconciler) execute(ctx context.Context, s *scope) error {
	for _, step := range []func(context.Context, *scope) error{
		r.ensureFinalizer,
		r.protectJobs,
		r.releaseJobs,
		r.syncSuspend,
		r.cancelRun,
		r.confirmCurrent,
		r.replaceActive,
		r.startRun,
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
		job.Spec.Suspend = &s.task.Spec.Suspend
		if err := r.client.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("set suspend=%t on job %s: %w", s.task.Spec.Suspend, job.Name, err)
		}
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Suspended = s.task.Spec.Suspend
		}
	}
	return nil
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
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Deleting, j.Replaced, j.Finished = true, true, s.now
		}
		r.record(s.task, normal(v1.EventJobReplaced, "Delete", fmt.Sprintf("deleted active Job %s for the run scheduled at %s",
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
		if j := findJob(s.jobs, o.Name); j != nil {
			if !j.Deleting {
				j.Deleting, j.Finished = true, s.now
			}
			j.Cancelled = s.plan.cancelAt
		}
		r.record(s.task, warning(v1.EventRunCancelled, "Delete", fmt.Sprintf("deleted active Job %s (%s) for the cancel request at %s: the run ends Failed, without a retry",
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
		r.record(s.task, warning(v1.EventJobCreateFailed, "Create", fmt.Sprintf("create Job %s: %v", job.Name, err)))
		return fmt.Errorf("create job %s: %w", job.Name, err)
	default:
		s.log.Info("created Job", "job", job.Name, "attempt", run.Attempt)
		runsStarted.Inc()
		if run.Attempt > 1 {
			retries.Inc()
		}
		r.record(s.task, normal(v1.EventJobCreated, "Create", fmt.Sprintf("created Job %s (%s)", job.Name, run)))
		if s.plan.requested && run.Attempt == 1 {
			r.record(s.task, normal(v1.EventRunRequested, "Create", fmt.Sprintf("started run for the request at %s: Job %s",
				run.Scheduled.UTC().Format(time.RFC3339), job.Name)))
		}
		if ev, ok := s.plan.missedEvent(); ok {
			s.events = append(s.events, ev)
		}
	}
	r.expect.created(s.task, job.Name, s.now)
	s.cached[job.Name] = job
	if j := findJob(s.jobs, job.Name); j != nil {
		*j = observeJob(s.task.Name, job)
	} else {
		s.jobs = append(s.jobs, observeJob(s.task.Name, job))
	}
	sortJobs(s.jobs)
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
	r.record(s.task, warning(v1.EventJobNameTaken, "Create", taken.Error()))
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

// pruneHistory deletes finished Jobs past the history limits.
func (r *Reconciler) pruneHistory(ctx context.Context, s *scope) error {
	for _, o := range s.plan.prune {
		if err := r.deleteJob(ctx, s, o.Name); err != nil {
			return err
		}
		if j := findJob(s.jobs, o.Name); j != nil {
			j.Deleting = true
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

// summarize computes the status from everything now known, the Events the change deserves,
// when to look again (when the next run is due, not before, and never without a reason), and
// whether the Task's finalizer still protects anything.
func (r *Reconciler) summarize(s *scope) {
	s.task.Status = computeStatusIn(s.task, s.jobs, s.now, s.kueueServed)
	if s.nameTaken != nil {
		setNameTaken(&s.task.Status, s.task, s.nameTaken.Error(), s.now)
	}
	if s.plan.create != nil && !s.plan.scheduled.IsZero() && s.task.Status.CurrentRun != nil &&
		s.task.Status.CurrentRun.ScheduledTime.Equal(timePtr(s.plan.scheduled)) {
		s.task.Status.MissedRuns += s.plan.missed
	}
	s.events = append(s.events, transitionEvents(s.task, s.prior, s.task.Status, s.jobs)...)
	if t := s.task.Status.NextRunTime; t != nil {
		s.result.RequeueAfter = max(t.Sub(s.now), time.Second)
	}
	if slices.ContainsFunc(s.jobs, func(j observedJob) bool { return j.Uncached && j.active() }) {
		s.result.RequeueAfter = minPositive(s.result.RequeueAfter, uncachedPollInterval)
	}
	if at := s.plan.requestAt; !at.IsZero() {
		s.result.RequeueAfter = minPositive(s.result.RequeueAfter, max(at.Sub(s.now), time.Second))
	}
	if e, ok := cancelledRetryEvent(s.prior, s.task.Status); ok {
		s.events = append(s.events, e)
	}
	if !s.kueueServed {
		s.result.RequeueAfter = minPositive(s.result.RequeueAfter, kueueRecheckInterval)
	}
	if at := settlesAt(s.jobs, s.now); !at.IsZero() {
		s.result.RequeueAfter = minPositive(s.result.RequeueAfter, max(at.Sub(s.now), time.Second))
	}
}

// settlesAt is when the earliest deleted, unfinished Job still waiting to be judged can be
// (see deletionSettleTime); zero if none waits.
func settlesAt(jobs []observedJob, now time.Time) time.Time {
	var at time.Time
	for _, j := range jobs {
		if j.unjudged(now) {
			if t := j.Finished.Add(deletionSettleTime); at.IsZero() || t.Before(at) {
				at = t
			}
		}
	}
	return at
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	return min(a, b)
}

// tell records the Events of a stored status and counts them.
func (r *Reconciler) tell(s *scope) {
	for _, e := range s.events {
		r.record(s.task, e)
		switch e.Reason {
		case v1.EventSucceeded:
			runsSucceeded.Inc()
			observeRunFinished(s.task, v1.RunSucceeded, e.ran)
		case v1.EventRunFailed:
			runsFailed.Inc()
			observeRunFinished(s.task, v1.RunFailed, e.ran)
		}
	}
}

// record records an Event on the Task. Events about an action taken (a Job created, replaced)
// are recorded at once; those about a status transition wait for the status (see tell).
func (r *Reconciler) record(task *v1.Task, e eventSpec) {
	if r.recorder != nil {
		r.recorder.Eventf(task, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}
