package reconciler

import (
	"fmt"
	"slices"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// plan is what the controller does in one reconcile. Executing it and computing the status
// again with the result gives the status to write.
type plan struct {
	// create is the run to start now, if any.
	create *runID
	// replace are the active Jobs to delete before create starts (concurrency policy Replace).
	replace []observedJob
	// suspend are the active Jobs whose spec.suspend must flip to match the Task's.
	suspend []observedJob
	// requeue are the Jobs waiting for admission in a LocalQueue the Task no longer names.
	requeue []observedJob
	// cancel are the active Jobs of the current run a pending cancel request deletes;
	// cancelAt is that request.
	cancel   []observedJob
	cancelAt time.Time
	// requested says create is a run (or a retry of a run) started for a run request; its Job
	// carries the request (v1.AnnotationRunRequested). requestAt is when a run or cancel request
	// the clock has not reached yet becomes pending: look again then.
	requested bool
	requestAt time.Time
	// prune are finished Jobs past the history limits.
	prune []observedJob
	// release are the Jobs whose v1.FinalizerRunOutcome may go: the stored status records how
	// their attempt ended.
	release []observedJob
	// protect are active Jobs without v1.FinalizerRunOutcome (made by an earlier release).
	protect []observedJob
	// scheduled is the schedule time of the run create starts, if it is a scheduled run;
	// missed counts the schedule times before it, since the last run, that passed without one.
	scheduled time.Time
	missed    int32
	// base is where the count of missed times started (the previous run, or when the schedule
	// began to apply).
	base time.Time
	// deadlineBounded says startingDeadlineSeconds starts later than base; missedInDeadline
	// then counts only the missed times within it, which is what a CronJob counts and what
	// decides TooManyMissedTimes (lowering the deadline is the remedy its Event advises).
	deadlineBounded  bool
	missedInDeadline int32
}

// planRuns decides what to do now, from the analysis of the Task's stored status and Jobs.
func planRuns(task *v1.Task, a analysis, jobs []observedJob, now time.Time) plan {
	p := plan{
		suspend: suspendFlips(task, a.active),
		requeue: queueMoves(task, a.active),
		release: releasable(task, jobs, now),
		protect: unprotected(jobs),
	}
	p.prune = historyToPrune(task, a, jobs, p.release)
	p.cancel, p.cancelAt = cancelTargets(a), a.requests.cancel
	p.requestAt = a.requests.lookAgainAt()
	if a.invalid != nil || task.Spec.Suspend {
		return p
	}
	if run := requestedRun(task, a, now); run != nil {
		p.create, p.requested = run, true
		return p
	}
	if task.Spec.Schedule == nil {
		p.create = nextOneShotRun(a, now)
	} else {
		planSchedule(&p, task, a, now)
	}
	// A retry of a requested run is of that run: its Job says so too.
	p.requested = p.create != nil && a.recRequested && p.create.sameRun(a.rec.run)
	return p
}

// nextOneShotRun is the first attempt, or a retry whose backoff has passed. A Task whose
// schedule was removed keeps its current run: only its retries remain.
func nextOneShotRun(a analysis, now time.Time) *runID {
	switch {
	case a.phase == runNone:
		return &runID{Attempt: 1}
	case a.phase == runRetryPending && !now.Before(a.retryAt):
		return &runID{Scheduled: a.rec.run.Scheduled, Attempt: a.rec.run.Attempt + 1}
	}
	return nil
}

// planSchedule starts a run for the latest unmet schedule time, as a CronJob does: not when it
// is past its starting deadline (it is lost, and counted as missed when a later run starts),
// not while another run is active under Forbid (it is held back, and starts once that run ends
// if still in time). With no schedule time due, a pending retry of the current run may start.
func planSchedule(p *plan, task *v1.Task, a analysis, now time.Time) {
	latest := a.due.Latest
	if latest.IsZero() {
		if a.phase == runRetryPending && !now.Before(a.retryAt) {
			p.create = &runID{Scheduled: a.rec.run.Scheduled, Attempt: a.rec.run.Attempt + 1}
		}
		return
	}
	sched := task.Spec.Schedule
	if tooLate(latest, now, sched.StartingDeadlineSeconds) {
		return
	}
	if len(a.active) > 0 && sched.ConcurrencyPolicy == v1.ForbidConcurrent {
		return
	}
	if sched.ConcurrencyPolicy == v1.ReplaceConcurrent {
		p.replace = slices.Clone(a.active)
	}
	p.create = &runID{Scheduled: latest, Attempt: 1}
	p.scheduled = latest
	p.missed, p.base = missedBetween(a.sched, a.base, latest), a.base
	if from := deadlineStart(now, sched.StartingDeadlineSeconds); from.After(a.base) {
		p.deadlineBounded, p.missedInDeadline = true, missedBetween(a.sched, from, latest)
	}
}

// missedEvent is the Event a start that superseded missed schedule times deserves.
func (p plan) missedEvent() (eventSpec, bool) {
	many := p.missed > tooManyMissed
	if p.deadlineBounded {
		many = p.missedInDeadline > tooManyMissed
	}
	switch {
	case many:
		return warning(v1.EventTooManyMissedTimes, "Schedule", fmt.Sprintf(
			"%d schedule times passed without a run since %s (more than %d); started the run for %s. Check the clock, the schedule or set a lower startingDeadlineSeconds",
			p.missed, p.base.UTC().Format(time.RFC3339), tooManyMissed, p.scheduled.UTC().Format(time.RFC3339))), true
	case p.missed > 0:
		return warning(v1.EventMissedRun, "Schedule", fmt.Sprintf("%d schedule time(s) passed without a run since %s; started the run for %s",
			p.missed, p.base.UTC().Format(time.RFC3339), p.scheduled.UTC().Format(time.RFC3339))), true
	}
	return eventSpec{}, false
}

// suspendFlips are the active Jobs whose suspension differs from the Task's. A queued Job's
// suspension is Kueue's: it unsuspends the Job when it admits it and suspends it when it
// preempts it.
func suspendFlips(task *v1.Task, active []observedJob) []observedJob {
	var out []observedJob
	for _, j := range active {
		if j.Suspended != task.Spec.Suspend && !j.Deleting && j.Queue == "" {
			out = append(out, j)
		}
	}
	return out
}

// queueMoves are the Jobs still waiting for admission in a LocalQueue other than the one the
// Task names now (a typo fixed, a team's queue changed): Kueue moves a suspended Job's Workload
// when its queue label changes. An admitted Job stays where it was admitted.
func queueMoves(task *v1.Task, active []observedJob) []observedJob {
	var out []observedJob
	for _, j := range active {
		if j.waiting() && j.Admitted.IsZero() && task.Spec.QueueName != "" && j.Queue != task.Spec.QueueName {
			out = append(out, j)
		}
	}
	return out
}

// releasable are the Jobs holding v1.FinalizerRunOutcome whose attempt's outcome the stored
// status records: the Job no longer runs, the status no longer lists it as active, and the
// stored record has moved past its attempt or holds that attempt's final outcome; a failed
// attempt of a superseded run once lastError tells it (or something newer). Only the stored
// status counts: what this reconcile is about to write is not durable yet.
func releasable(task *v1.Task, jobs []observedJob, now time.Time) []observedJob {
	stored := recordFromAPI(task.Status.CurrentRun)
	if stored == nil {
		return nil
	}
	var out []observedJob
	for _, j := range jobs {
		switch {
		case !j.Protected || j.Missing || j.active():
		case hasRef(task.Status.ActiveJobs, j.Name):
		case stored.run.less(j.Run):
		case stored.run.equal(j.Run) && stored.outcome == v1.RunActive:
		case supersededFailed(stored, nil, j, now) && !failureTold(task, stored, j, jobs):
		default:
			out = append(out, j)
		}
	}
	return out
}

// unprotected are the active Jobs without v1.FinalizerRunOutcome: those an earlier release
// created. They get it, so their outcome cannot be lost either.
func unprotected(jobs []observedJob) []observedJob {
	var out []observedJob
	for _, j := range jobs {
		if !j.Protected && j.active() && !j.Uncached {
			out = append(out, j)
		}
	}
	return out
}

// outcomeRecorded says j's outcome is recorded: it holds no finalizer, or releases it now.
func outcomeRecorded(j observedJob, released []observedJob) bool {
	return !j.Protected || slices.ContainsFunc(released, func(r observedJob) bool { return r.Name == j.Name })
}

// historyLimits returns how many succeeded and failed Jobs to keep; -1 is no limit.
func historyLimits(task *v1.Task) (succeeded, failed int) {
	succeeded, failed = -1, -1
	if task.Spec.Schedule != nil {
		succeeded, failed = v1.DefaultSuccessfulJobsHistoryLimit, v1.DefaultFailedJobsHistoryLimit
	}
	if l := task.Spec.SuccessfulJobsHistoryLimit; l != nil {
		succeeded = int(*l)
	}
	if l := task.Spec.FailedJobsHistoryLimit; l != nil {
		failed = int(*l)
	}
	return succeeded, failed
}

// historyToPrune picks the finished Jobs past the history limits, oldest first to go. The
// current run's Job stays whatever the limit, so `kubectl logs job/<lastJob>` works, and a Job
// whose outcome is not recorded yet stays until it is.
func historyToPrune(task *v1.Task, a analysis, jobs, released []observedJob) []observedJob {
	keepSucceeded, keepFailed := historyLimits(task)
	if keepSucceeded < 0 && keepFailed < 0 {
		return nil
	}
	current := ""
	if a.rec != nil {
		current = a.rec.job.Name
	}
	var finished []observedJob
	for _, j := range jobs {
		if j.State.finished() && !j.gone() && j.Name != current && outcomeRecorded(j, released) {
			finished = append(finished, j)
		}
	}
	// Newest first: by run, then by finish time.
	slices.SortFunc(finished, func(x, y observedJob) int {
		switch {
		case y.Run.less(x.Run):
			return -1
		case x.Run.less(y.Run):
			return 1
		}
		return y.Finished.Compare(x.Finished)
	})
	if j := findJob(jobs, current); j != nil && j.State.finished() {
		// The kept current Job takes one place of its kind.
		if j.State == jobSucceeded && keepSucceeded > 0 {
			keepSucceeded--
		} else if j.State == jobFailed && keepFailed > 0 {
			keepFailed--
		}
	}
	var out []observedJob
	for _, j := range finished {
		limit := &keepFailed
		if j.State == jobSucceeded {
			limit = &keepSucceeded
		}
		switch {
		case *limit < 0:
		case *limit > 0:
			*limit--
		default:
			out = append(out, j)
		}
	}
	return out
}
