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
	// changes are the steps' writes to Jobs not yet applied to jobs (see applyChanges).
	changes []jobChange
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
		if err := r.releaseAfterStatus(ctx, s); err != nil {
			result, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
		r.recordStatusEvents(s)
	}()

	if task.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	for _, phase := range []func(context.Context, *scope) (bool, error){
		r.observeJobs,
		r.settleDeletedJobs,
		r.planAndExecute,
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
	cache := r.expect.checkCache(s.task, names, s.now)
	if cache.wait > 0 {
		s.log.V(1).Info("waiting for the cache to show a created Job", "timeout", cache.wait)
		s.result.RequeueAfter = cache.wait
		return true, nil
	}
	for name, job := range s.cached {
		o := observeJob(s.task.Name, job)
		if cache.deleting[name] && !o.Deleting {
			// Deleted by this operator, which the cache does not show yet: an active Job ends
			// now, a finished one (pruned by the history limits) keeps when it finished.
			o.Deleting = true
			if !o.State.finished() {
				o.Finished = s.now
			}
		}
		s.jobs = append(s.jobs, o)
	}
	for _, name := range unseen(s.task, names, cache.overdue) {
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

// planAndExecute plans from what was observed, carries the plan out, and computes the status from the
// result. The status is computed even when an action failed, so it never claims a Job that was
// not created, and never loses one that was.
func (r *Reconciler) planAndExecute(ctx context.Context, s *scope) (bool, error) {
	s.kueueServed = s.task.Spec.QueueName == "" || r.kueue.servedNow()
	a := analyzeIn(s.task, s.jobs, s.now, s.kueueServed)
	for _, err := range a.requests.invalid {
		r.recordEvent(s.task, warning(v1.EventInvalidRequest, "Request", err.Error()))
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
		r.requeueWaiting,
		r.cancelRun,
		r.confirmCurrent,
		r.replaceActive,
		r.startRun,
		r.deletePruned,
	} {
		err := step(ctx, s)
		s.applyChanges() // a failed step's writes before the failure count too
		if err != nil {
			return err
		}
	}
	return nil
}

// summarize computes the status from everything now known, the Events the change deserves,
// when to look again (when the next run is due, not before, and never without a reason), and
// whether the Task's finalizer still protects anything.
func (r *Reconciler) summarize(s *scope) {
	s.task.Status = statusAfter(s.task, s.jobs, s.now, s.kueueServed, s.plan, s.nameTaken)
	s.events = append(s.events, transitionEvents(s.task, s.prior, s.task.Status, s.jobs)...)
	if t := s.task.Status.NextRunTime; t != nil {
		wait := max(t.Sub(s.now), time.Second)
		if s.nameTaken != nil {
			// The run due waits for the Job of its name to go, which only a person does: the
			// next try is nameTakenPollInterval away (or sooner, when that Job's deletion wakes
			// the Task), not every second as a due run's would be.
			wait = max(wait, nameTakenPollInterval)
		}
		s.result.RequeueAfter = wait
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
	if at := nextJudgementAt(s.jobs, s.now); !at.IsZero() {
		s.result.RequeueAfter = minPositive(s.result.RequeueAfter, max(at.Sub(s.now), time.Second))
	}
}

// nextJudgementAt is when the earliest deleted, unfinished Job still waiting to be judged can be
// (see deletionSettleTime); zero if none waits.
func nextJudgementAt(jobs []observedJob, now time.Time) time.Time {
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

// recordStatusEvents records the Events of a stored status and counts them.
func (r *Reconciler) recordStatusEvents(s *scope) {
	for _, e := range s.events {
		r.recordEvent(s.task, e)
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

// recordEvent records an Event on the Task. Events about an action taken (a Job created, replaced)
// are recorded at once; those about a status transition wait for the status (see recordStatusEvents).
func (r *Reconciler) recordEvent(task *v1.Task, e eventSpec) {
	if r.recorder != nil {
		r.recorder.Eventf(task, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}
