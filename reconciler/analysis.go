package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// deletionSettleTime is how long after a Job's deletion its attempt is judged, when the Job
// had not finished: the Job controller counts the pods that had ended before it synced the
// deletion (none after), and a lagging one may write that count within it. Past it,
// settleDeletedJobs releases the Job before the attempt is judged, so no success is counted
// after the judgement.
const deletionSettleTime = 5 * time.Second

// runPhase is where the Task's current run stands: the only run of a one-shot Task, the latest
// started run of a scheduled one.
type runPhase int

const (
	// runNone: nothing has started yet.
	runNone runPhase = iota
	// runActive: the run's latest attempt is running (or suspended).
	runActive
	// runRetryPending: the latest attempt failed and another is due at retryAt.
	runRetryPending
	// runSucceeded: the latest attempt succeeded.
	runSucceeded
	// runFailed: the latest attempt failed and no other will follow.
	runFailed
)

func (p runPhase) finished() bool { return p == runSucceeded || p == runFailed }

// analysis is what the Task's stored status and its Jobs say, before anything is done. Both the
// status (computeStatus) and the next actions (planRuns) are read off it.
type analysis struct {
	// invalid is why the spec cannot run (a schedule that does not parse, a queue without
	// Kueue); invalidReason is the conditions' reason for it.
	invalid       error
	invalidReason string

	// rec is the current run once the Jobs are folded into the stored record; nil: none yet.
	rec *runRecord
	// previous is the record rec replaced in this fold (a newer run or attempt was found).
	previous *runRecord
	phase    runPhase
	// retryAt is when the next attempt is due (runRetryPending).
	retryAt time.Time
	// exhausted says a runFailed run used up its retries (rather than being superseded).
	exhausted bool
	lastError string
	// active are the Jobs still running, of any run.
	active []observedJob
	// waiting is the current attempt's Job while it waits in its Kueue queue, else nil.
	waiting *observedJob
	// supersededFailure is the latest failed Job of an earlier run than the current one (policy
	// Allow lets runs overlap) whose failure is newer than the current run's outcome and whose
	// finalizer is held until the stored status tells it (see failureTold); nil if none.
	supersededFailure *observedJob
	// laterFailure is a scheduled Task's failure of a run older than the stored record's
	// success that the stored lastError tells (it failed after that success: policy Allow),
	// told once while its Job was held and kept since (recordOutcome); nil otherwise. That
	// success is not the latest outcome.
	laterFailure *laterFailure

	// requests are the run and cancel requests (annotations) and which are pending;
	// recRequested says rec's run was started for a run request (not for a schedule time).
	requests     requests
	recRequested bool
	// cancelledRetry says a pending cancel request stopped rec's pending retry.
	cancelledRetry bool

	// Scheduled Tasks only.
	sched    v1.CronSchedule
	observed *v1.ObservedSchedule
	// lastScheduleTime is the schedule time of the latest run started; base is where the
	// search for unmet schedule times starts (lastScheduleTime, or when the schedule began to
	// apply, whichever is later).
	lastScheduleTime time.Time
	base             time.Time
	due              due
	// heldBack is a due schedule time concurrency policy Forbid holds back until the active
	// run ends; zero if none.
	heldBack time.Time
}

// analyze reads the Task's stored status and its Jobs (everything the controller knows of
// them). It is pure; now stands in for the end of an attempt that no Job records (a Job that
// disappeared) and for when a newly added schedule begins. Kueue's API is taken as served.
func analyze(task *v1.Task, jobs []observedJob, now time.Time) analysis {
	return analyzeIn(task, jobs, now, true)
}

// analyzeIn is analyze in a cluster that does or does not serve Kueue's API: without it a Task
// with spec.queueName cannot start a run.
func analyzeIn(task *v1.Task, jobs []observedJob, now time.Time, kueueServed bool) analysis {
	a := analysis{lastError: task.Status.LastError}
	for _, j := range jobs {
		if j.active() || j.unjudged(now) {
			a.active = append(a.active, j)
		}
	}
	stored := storedRecord(task)
	a.laterFailure = laterFailureTold(task, stored)
	a.rec, a.previous = fold(stored, jobs, now)
	for _, r := range []*runRecord{a.previous, a.rec} {
		a.recordOutcome(task, stored, r, jobs)
	}
	if f := latestSupersededFailure(a.rec, a.previous, jobs, now); f != nil && !newerOutcome(*f, jobs, stored, a.previous, a.rec) {
		a.supersededFailure = f
		a.lastError = f.failure()
	}
	a.requests = readRequests(task, a.rec, now)
	a.recRequested = requestedRecord(task, a.rec, jobs)
	// A requested run's time is no schedule time: lastScheduleTime, and with it where the
	// search for due schedule times starts (an "@every" schedule counts from it) and the count
	// of missed ones, stays the schedule's.
	a.lastScheduleTime = timeOf(task.Status.LastScheduleTime)
	if a.rec != nil && !a.recRequested && a.rec.run.Scheduled.After(a.lastScheduleTime) {
		a.lastScheduleTime = a.rec.run.Scheduled
	}
	if task.Spec.Schedule != nil {
		a.analyzeSchedule(task, now)
	}
	if task.Spec.QueueName != "" && !kueueServed && a.invalid == nil {
		a.invalid = fmt.Errorf("spec.queueName is %q but Kueue is not installed (the API server does not serve kueue.x-k8s.io LocalQueues): no run starts until it is", task.Spec.QueueName)
		a.invalidReason = v1.ReasonKueueNotInstalled
	}
	if unreadable := unreadableSpec(task); unreadable != "" {
		// The spec as read lacks what its client could not decode: no run starts from it.
		a.invalid = fmt.Errorf("%s; no run starts until it is fixed", unreadable)
		a.invalidReason = v1.ReasonInvalidSpec
	}
	a.setPhase(task)
	a.cancelRetry()
	if a.phase == runActive {
		if j := findJob(jobs, a.rec.job.Name); j != nil && j.waiting() {
			w := *j
			a.waiting = &w
		}
	}
	return a
}

// recordOutcome takes in how r ended. A newly failed attempt decides now whether, and when, a
// retry follows; lastError says why the latest finished attempt failed, and a success clears
// it when it is recorded. A failure already stored keeps the message and the retry time stored
// with it, and so does a success already stored whose lastError tells of an earlier run that
// failed after it (policy Allow; laterFailureTold).
//
// An attempt policy Replace cut short is not a failure worth reporting (lastError stays), but it
// did not finish its run either, so its retry is decided like that of any attempt deleted before
// it finished: while the schedule is in force the due time that replaced it supersedes the retry
// (retryable), and should that run never start before the schedule is removed (the operator
// stopped between the deletion and the creation), the replaced run goes on with its retries
// instead of ending Failed after one attempt.
func (a *analysis) recordOutcome(task *v1.Task, stored, r *runRecord, jobs []observedJob) {
	switch {
	case r == nil:
	case r.outcome == v1.RunSucceeded && (newlyFinished(stored, r) || a.laterFailure == nil):
		a.lastError = ""
	case r.outcome == v1.RunFailed && newlyFinished(stored, r):
		j := findJob(jobs, r.job.Name)
		if j != nil && !r.replaced {
			a.lastError = j.failure()
		}
		if j != nil && j.cancelled() {
			// Stopped by a cancel request: the run ends Failed, without a retry.
			return
		}
		if canRetry(task, r.run.Attempt) {
			r.retryAt = r.finished.Add(nextRetryDelay(backoffOf(task), r.run.Attempt))
		}
	}
}

// supersededFailed says j is a failed attempt of a run older than the current record's (its
// outcome goes in no record: the record moved on while it ran) whose finalizer it still holds.
// The Job of the record the current one replaced in this fold is told by recordOutcome.
func supersededFailed(rec, previous *runRecord, j observedJob, now time.Time) bool {
	switch {
	case rec == nil || !j.Protected || j.Missing || j.Replaced || j.Run.sameRun(rec.run) || !j.Run.less(rec.run):
		return false
	case previous != nil && previous.job.Name == j.Name:
		return false
	}
	return j.State == jobFailed || (j.Deleting && j.State == jobActive && !j.unjudged(now))
}

// latestSupersededFailure is the supersededFailed Job that finished last, or nil.
func latestSupersededFailure(rec, previous *runRecord, jobs []observedJob, now time.Time) *observedJob {
	var latest *observedJob
	for i := range jobs {
		if j := &jobs[i]; supersededFailed(rec, previous, *j, now) && (latest == nil || j.Finished.After(latest.Finished)) {
			latest = j
		}
	}
	return latest
}

// newerOutcome says an attempt is known to have ended after j: one of the records (stored, or
// folded in this reconcile) or any other Job that still tells its outcome. Such an outcome, not
// j's failure, is what lastError and the Failed condition tell.
func newerOutcome(j observedJob, jobs []observedJob, records ...*runRecord) bool {
	for _, r := range records {
		if r != nil && r.outcome != v1.RunActive && r.finished.After(j.Finished) {
			return true
		}
	}
	return slices.ContainsFunc(jobs, func(k observedJob) bool {
		return k.Name != j.Name && k.State.finished() && !k.Missing && k.Finished.After(j.Finished)
	})
}

// failureTold says j's failure no longer needs its Job: the stored lastError tells of it, or a
// newer outcome is known (stored, or held by a Job that keeps its finalizer until it is).
func failureTold(task *v1.Task, stored *runRecord, j observedJob, jobs []observedJob) bool {
	return tellsOf(task.Status.LastError, j.Name) || newerOutcome(j, jobs, stored)
}

// analyzeSchedule parses the schedule and finds the schedule times due.
func (a *analysis) analyzeSchedule(task *v1.Task, now time.Time) {
	sched, err := v1.ParseSchedule(task.Spec.Schedule)
	if err != nil {
		a.invalid, a.invalidReason = err, v1.ReasonInvalidSchedule
		return
	}
	a.sched = sched
	a.observed = observedSchedule(task, now)
	a.base = a.lastScheduleTime
	if since := a.observed.Since.Time; since.After(a.base) {
		a.base = since
	}
	a.due = dueRun(sched, a.base, now)
	if a.recRequested && !a.due.Latest.IsZero() && !a.due.Latest.After(a.rec.run.Scheduled) {
		// A schedule time not after the requested run that is current did not start before it
		// (lost, or held back): the requested run took its place. Started now it would be
		// older than the current run. It is counted as missed when the next run starts.
		a.due.Latest = time.Time{}
	}
	s := task.Spec.Schedule
	if s.ConcurrencyPolicy == v1.ForbidConcurrent && len(a.active) > 0 && !a.due.Latest.IsZero() && !tooLate(a.due.Latest, now, s.StartingDeadlineSeconds) {
		a.heldBack = a.due.Latest
	}
}

// setPhase sums the record up, deciding whether a failed attempt is retried.
func (a *analysis) setPhase(task *v1.Task) {
	switch {
	case a.rec == nil:
		a.phase = runNone
	case a.rec.outcome == v1.RunActive:
		a.phase = runActive
	case a.rec.outcome == v1.RunSucceeded:
		a.phase = runSucceeded
	case a.retryable(task):
		a.phase = runRetryPending
		a.retryAt = a.rec.retryAt
	default:
		a.phase = runFailed
		a.exhausted = !canRetry(task, a.rec.run.Attempt)
		if a.exhausted {
			// A retry the spec no longer allows is cancelled for good: the stored record loses
			// its due time, so a later spec (maxRetries raised again) cannot bring the run back.
			a.rec.retryAt = time.Time{}
		}
	}
}

// cancelRetry lets a pending cancel request stop a retry due: the run ends Failed now, and the
// stored record loses its retry time (the request is recorded in the same status write).
func (a *analysis) cancelRetry() {
	if a.requests.cancel.IsZero() || a.phase != runRetryPending {
		return
	}
	a.phase, a.retryAt, a.rec.retryAt = runFailed, time.Time{}, time.Time{}
	a.lastError = cancelledError(a.requests.cancel)
	a.cancelledRetry = true
}

// retryable says whether the failed current run gets another attempt: a retry was decided when
// it failed (so a run that failed for good stays failed whatever the spec says later), the spec
// still allows it, and for a scheduled Task no later schedule time has come due.
func (a *analysis) retryable(task *v1.Task) bool {
	if a.rec.retryAt.IsZero() || !canRetry(task, a.rec.run.Attempt) {
		return false
	}
	if task.Spec.Schedule == nil || a.invalid != nil {
		return true
	}
	return !a.lastScheduleTime.After(a.rec.run.Scheduled) && a.due.Latest.IsZero()
}

// fold brings the stored record up to date with the Jobs. The Job of the record's attempt tells
// how it ended, unless an outcome is recorded already: a recorded outcome is final. A Job of a
// newer run or attempt than the record (created, but the status write that would have recorded
// it was lost, or created in this very reconcile) then becomes the record; previous is the
// record it replaced, brought up to date too.
func fold(stored *runRecord, jobs []observedJob, now time.Time) (rec, previous *runRecord) {
	rec = readOutcome(stored, jobs, now)
	if newest := newestJob(jobs); newest != nil && (rec == nil || rec.run.less(newest.Run)) {
		previous = rec
		rec = readOutcome(&runRecord{run: newest.Run, job: v1.JobReference{Name: newest.Name, UID: newest.UID}, outcome: v1.RunActive}, jobs, now)
	}
	return rec, previous
}

// readOutcome reads the outcome of an active record's attempt off its Job.
func readOutcome(rec *runRecord, jobs []observedJob, now time.Time) *runRecord {
	if rec == nil || rec.outcome != v1.RunActive {
		return rec
	}
	j := findJob(jobs, rec.job.Name)
	if j == nil {
		// Not known at all: the reconciler looks every recorded active Job up, so this is a
		// record without a Job name (an earlier release's status). Nothing can be concluded.
		return rec
	}
	out := *rec
	if out.job.UID == "" {
		out.job.UID = j.UID
	}
	switch {
	case !j.Admitted.IsZero():
		out.admitted = j.Admitted
	case j.waiting():
		out.admitted = time.Time{} // preempted: it waits again
	}
	switch {
	case j.State == jobSucceeded:
		out.outcome, out.finished = v1.RunSucceeded, j.Finished
	case j.State == jobFailed:
		out.outcome, out.finished = v1.RunFailed, j.Finished
	case j.Missing:
		out.outcome, out.finished = v1.RunFailed, now
	case j.Deleting && !j.unjudged(now):
		out.outcome, out.finished, out.replaced = v1.RunFailed, j.Finished, j.Replaced
	}
	return &out
}

// newlyFinished says rec tells an outcome the stored record does not have yet.
func newlyFinished(stored, rec *runRecord) bool {
	return stored == nil || !stored.run.equal(rec.run) || stored.outcome != rec.outcome
}

// newestJob is the Job of the newest run and attempt, or nil. Jobs whose run is unknown do not
// count.
func newestJob(jobs []observedJob) *observedJob {
	var newest *observedJob
	for i := range jobs {
		j := &jobs[i]
		if j.Run.Attempt < 1 {
			continue
		}
		if newest == nil || newest.Run.less(j.Run) {
			newest = j
		}
	}
	return newest
}

// observedSchedule is the schedule in force and since when. A Task created with its schedule
// counts from its creation, as a CronJob does; a schedule added to an existing Task, or whose
// cron expression or time zone changed, counts from when the operator first saw it, so it never
// starts a catch-up run or counts missed times from before it existed.
func observedSchedule(task *v1.Task, now time.Time) *v1.ObservedSchedule {
	s, st := task.Spec.Schedule, task.Status
	if o := st.ObservedSchedule; o != nil && o.Cron == s.Cron && o.TimeZone == s.TimeZone {
		return o.DeepCopy()
	}
	since := now
	if st.ObservedSchedule == nil && (st.ObservedGeneration == 0 || scheduledByEarlierRelease(st)) {
		since = task.CreationTimestamp.Time
	}
	return &v1.ObservedSchedule{Cron: s.Cron, TimeZone: s.TimeZone, Since: metav1.NewTime(since.UTC().Truncate(time.Second))}
}

// laterFailure is an earlier run's failure told after the success that succeeded it.
type laterFailure struct {
	// after is the run whose success it came after; failed is the failed attempt, as a record.
	after  runID
	failed runRecord
}

// laterFailureTold reads, from the stored status of a scheduled Task whose record succeeded, a
// lastError telling of a Job of an older run than the record's: such a failure was recorded
// after that success (a success clears lastError when it is recorded), so it is the latest
// outcome until a later run ends. A one-shot Task's record is its only run, and a lastError
// naming no older run of this Task (written by hand) tells nothing later: both are cleared.
func laterFailureTold(task *v1.Task, stored *runRecord) *laterFailure {
	if task.Spec.Schedule == nil || stored == nil || stored.outcome != v1.RunSucceeded {
		return nil
	}
	rest, ok := strings.CutPrefix(task.Status.LastError, "Job ")
	name, _, _ := strings.Cut(rest, " ")
	run, named := runFromAnyName(task.Name, name)
	if !ok || !named || !run.Scheduled.Before(stored.run.Scheduled) {
		return nil
	}
	return &laterFailure{after: stored.run, failed: runRecord{run: run, job: v1.JobReference{Name: name}, outcome: v1.RunFailed}}
}
