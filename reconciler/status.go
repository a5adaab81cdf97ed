package reconciler

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// runPhase is where the Task's current run stands: the only run of a one-shot Task, the latest
// run of a scheduled one.
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

// analysis is what the Task's Jobs and its previous status say, before anything is done. Both
// the status (computeStatus) and the next actions (planRuns) are read off it.
type analysis struct {
	// invalid is why the spec cannot run (a schedule that does not parse).
	invalid error

	// run is the current run; attempts the number of attempts it has had.
	run      runID
	attempts int32
	phase    runPhase
	// retryAt is when the next attempt is due (runRetryPending).
	retryAt time.Time
	// finished is when the run ended (runSucceeded, runFailed).
	finished time.Time
	// exhausted says a runFailed run used up its retries (rather than being superseded).
	exhausted bool
	lastError string
	// latest is the newest Job of the current run, if it is still known.
	latest *observedJob
	// active are the Jobs still running, of any run.
	active []observedJob

	// Scheduled Tasks only.
	sched v1.CronSchedule
	// lastScheduleTime is the latest schedule time acted on; cursor is where the search for
	// the next one starts (lastScheduleTime, or the Task's creation).
	lastScheduleTime time.Time
	cursor           time.Time
	nextSchedule     time.Time
}

// analyze reads the Task's Jobs (everything the controller knows of them) and its previous
// status. It is pure; now is only used for outcomes that no Job records (a Job that vanished).
func analyze(task *v1.Task, jobs []observedJob, now time.Time) analysis {
	var a analysis
	for _, j := range jobs {
		if j.active() {
			a.active = append(a.active, j)
		}
	}
	if task.Spec.Schedule == nil {
		a.analyzeOneShot(task, jobs, now)
	} else {
		a.analyzeScheduled(task, jobs, now)
	}
	return a
}

func (a *analysis) analyzeOneShot(task *v1.Task, jobs []observedJob, now time.Time) {
	a.latest = latestJob(jobs, false)
	a.lastError = task.Status.LastError // kept while the next attempt runs
	a.attempts = task.Status.Attempts
	if a.latest != nil && a.latest.Run.Attempt > a.attempts {
		a.attempts = a.latest.Run.Attempt
	}
	a.run = runID{Attempt: a.attempts}
	switch {
	case a.latest != nil && a.latest.Run.Attempt == a.attempts:
		a.fromJob(task, *a.latest, true)
	case a.attempts == 0:
		a.phase = runNone
	default:
		// The latest attempt's Job is gone (a TTL, a user); the status remembers how it went.
		a.latest = nil
		a.fromStatus(task, now)
	}
}

func (a *analysis) analyzeScheduled(task *v1.Task, jobs []observedJob, now time.Time) {
	sched, err := v1.ParseSchedule(task.Spec.Schedule)
	if err != nil {
		a.invalid = err
		return
	}
	a.sched = sched
	a.lastScheduleTime = timeOf(task.Status.LastScheduleTime)
	a.latest = latestJob(jobs, true)
	a.lastError = task.Status.LastError
	if a.latest != nil {
		if a.latest.Run.Scheduled.After(a.lastScheduleTime) {
			a.lastScheduleTime = a.latest.Run.Scheduled
		}
		a.run, a.attempts = a.latest.Run, a.latest.Run.Attempt
		// A retry is only worth it while no later schedule time has come due.
		current := a.latest.Run.Scheduled.Equal(a.lastScheduleTime)
		a.fromJob(task, *a.latest, current)
	} else {
		a.attempts = task.Status.Attempts
		a.phase = runNone
	}
	a.cursor = a.lastScheduleTime
	if a.cursor.IsZero() {
		a.cursor = task.CreationTimestamp.Time
	}
	a.nextSchedule = sched.Next(a.cursor)
}

// fromJob reads the run's state off its latest Job. retry says whether a failure may be
// retried at all (a scheduled run superseded by a later one may not).
func (a *analysis) fromJob(task *v1.Task, j observedJob, retry bool) {
	switch {
	case j.State == jobActive && j.Gone:
		a.fail(task, fmt.Sprintf("Job %s was deleted before it finished", j.Name), j.Finished, retry)
	case j.State == jobActive:
		a.phase = runActive
	case j.State == jobSucceeded:
		a.phase, a.finished, a.lastError = runSucceeded, j.Finished, ""
	case j.State == jobFailed:
		a.fail(task, j.failure(), j.Finished, retry)
	}
}

// fromStatus reads a one-shot run's state off the previous status when its latest Job is gone.
func (a *analysis) fromStatus(task *v1.Task, now time.Time) {
	prior := task.Status
	a.lastError = prior.LastError
	switch {
	case prior.Phase == v1.PhaseSucceeded:
		a.phase, a.finished = runSucceeded, timeOf(prior.CompletionTime)
	case prior.Phase == v1.PhaseFailed:
		a.phase, a.finished, a.exhausted = runFailed, timeOf(prior.CompletionTime), true
	case prior.LastJob != nil && hasRef(prior.ActiveJobs, prior.LastJob.Name):
		// Last seen running, now gone without a trace of how it ended.
		a.fail(task, fmt.Sprintf("Job %s disappeared before it finished", prior.LastJob.Name), now, true)
	default:
		// It failed earlier (the status recorded no success) and its retry is pending.
		a.fail(task, prior.LastError, now, true)
		if a.phase == runRetryPending && prior.NextRunTime != nil {
			a.retryAt = prior.NextRunTime.Time
		}
	}
}

// fail records a failed attempt at time at, with a retry after the backoff if one is left.
func (a *analysis) fail(task *v1.Task, msg string, at time.Time, retry bool) {
	a.lastError, a.finished = msg, at
	if retry && canRetry(task, a.attempts) {
		a.phase = runRetryPending
		a.retryAt = at.Add(nextRetryDelay(backoffOf(task), a.attempts))
		return
	}
	a.phase = runFailed
	a.exhausted = !canRetry(task, a.attempts)
}

// latestJob is the Job of the newest run (scheduled or not), or nil.
func latestJob(jobs []observedJob, scheduled bool) *observedJob {
	var latest *observedJob
	for i := range jobs {
		j := &jobs[i]
		if j.Run.isScheduled() != scheduled || j.Run.Attempt < 1 {
			continue
		}
		if latest == nil || latest.Run.less(j.Run) {
			latest = j
		}
	}
	return latest
}

// computeStatus is the Task's status given everything known about its Jobs. It keeps what only
// the previous status knows (attempts of a vanished Job, missed runs) and never changes a field
// without a reason, so calling it again on its own result changes nothing.
func computeStatus(task *v1.Task, jobs []observedJob, now time.Time) v1.TaskStatus {
	return statusFrom(task, analyze(task, jobs, now), jobs, now)
}

func statusFrom(task *v1.Task, a analysis, jobs []observedJob, now time.Time) v1.TaskStatus {
	prior := task.Status
	st := v1.TaskStatus{
		ObservedGeneration:      task.Generation,
		Phase:                   phaseOf(task, a),
		LastPhaseTransitionTime: prior.LastPhaseTransitionTime,
		Conditions:              slices.Clone(prior.Conditions),
		Attempts:                a.attempts,
		ActiveJobs:              jobRefs(a.active),
		LastJob:                 lastJobRef(prior.LastJob, jobs, a.run),
		LastError:               a.lastError,
		StartTime:               startTime(prior.StartTime, jobs),
		MissedRuns:              prior.MissedRuns,
	}
	if st.Phase != prior.Phase || st.LastPhaseTransitionTime == nil {
		st.LastPhaseTransitionTime = timePtr(now)
	}
	if st.Phase == v1.PhaseSucceeded || st.Phase == v1.PhaseFailed {
		st.CompletionTime = prior.CompletionTime
		if st.CompletionTime == nil {
			st.CompletionTime = timePtr(a.finished)
		}
	}
	if task.Spec.Schedule != nil {
		st.LastScheduleTime = timePtr(a.lastScheduleTime)
	}
	st.NextRunTime = timePtr(nextRunTime(task, a))
	setConditions(&st, task, a, now)
	return st
}

// phaseOf sums the analysis up in one word. A finished one-shot Task stays finished whatever
// its spec says now.
func phaseOf(task *v1.Task, a analysis) v1.Phase {
	oneShot := task.Spec.Schedule == nil
	switch {
	case a.invalid != nil:
		return v1.PhasePending
	case oneShot && a.phase == runSucceeded:
		return v1.PhaseSucceeded
	case oneShot && a.phase == runFailed:
		return v1.PhaseFailed
	case task.Spec.Suspend:
		return v1.PhaseSuspended
	case len(a.active) > 0:
		return v1.PhaseRunning
	case a.phase == runRetryPending:
		return v1.PhaseRetrying
	case oneShot:
		return v1.PhasePending
	default:
		return v1.PhaseScheduled
	}
}

// nextRunTime is when the controller will next start a run on its own: a pending retry or, for a
// scheduled Task, the next schedule time, whichever comes first. Nothing is due while suspended.
func nextRunTime(task *v1.Task, a analysis) time.Time {
	if a.invalid != nil || task.Spec.Suspend {
		return time.Time{}
	}
	var t time.Time
	if a.phase == runRetryPending {
		t = a.retryAt
	}
	if task.Spec.Schedule != nil && !a.nextSchedule.IsZero() && (t.IsZero() || a.nextSchedule.Before(t)) {
		t = a.nextSchedule
	}
	return t
}

// setConditions writes the four conditions to match the phase. meta.SetStatusCondition keeps
// a condition's transition time while its status stays the same.
func setConditions(st *v1.TaskStatus, task *v1.Task, a analysis, now time.Time) {
	set := func(typ string, status bool, reason, msg string) {
		s := metav1.ConditionFalse
		if status {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: task.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	if a.invalid != nil {
		msg := a.invalid.Error()
		set(v1.ConditionReady, false, v1.ReasonInvalidSchedule, msg)
		set(v1.ConditionProgressing, false, v1.ReasonInvalidSchedule, msg)
		set(v1.ConditionSucceeded, false, v1.ReasonInvalidSchedule, msg)
		set(v1.ConditionFailed, false, v1.ReasonInvalidSchedule, msg)
		return
	}
	progressing, reason, msg := progressOf(st, task, a)
	set(v1.ConditionProgressing, progressing, reason, msg)
	if task.Spec.Schedule == nil {
		setOneShotOutcome(set, st, a)
	} else {
		setScheduledOutcome(set, st, task, a)
	}
}

type setFunc func(typ string, status bool, reason, msg string)

func progressOf(st *v1.TaskStatus, task *v1.Task, a analysis) (bool, string, string) {
	switch st.Phase {
	case v1.PhaseRunning:
		return true, v1.ReasonJobActive, fmt.Sprintf("%d Job(s) running; latest attempt %d of %d", len(st.ActiveJobs), a.attempts, v1.MaxRetriesOf(task)+1)
	case v1.PhaseRetrying:
		return true, v1.ReasonRetryPending, fmt.Sprintf("attempt %d of %d due at %s", a.attempts+1, v1.MaxRetriesOf(task)+1, formatTime(st.NextRunTime))
	case v1.PhaseScheduled:
		return true, v1.ReasonWaitingForSchedule, "next run at " + formatTime(st.NextRunTime)
	case v1.PhasePending:
		return true, v1.ReasonPending, "waiting for the first run to start"
	case v1.PhaseSuspended:
		return false, v1.ReasonSuspended, "spec.suspend is set"
	case v1.PhaseSucceeded:
		return false, v1.ReasonSucceeded, "the Task succeeded"
	default:
		return false, v1.ReasonRetriesExhausted, "the Task failed"
	}
}

func setOneShotOutcome(set setFunc, st *v1.TaskStatus, a analysis) {
	switch st.Phase {
	case v1.PhaseSucceeded:
		msg := "the run succeeded"
		if st.LastJob != nil {
			msg = fmt.Sprintf("Job %s succeeded", st.LastJob.Name)
		}
		set(v1.ConditionReady, true, v1.ReasonSucceeded, msg)
		set(v1.ConditionSucceeded, true, v1.ReasonRunSucceeded, msg)
		set(v1.ConditionFailed, false, v1.ReasonSucceeded, msg)
	case v1.PhaseFailed:
		msg := fmt.Sprintf("%d attempt(s) failed; last: %s", a.attempts, a.lastError)
		set(v1.ConditionReady, false, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionSucceeded, false, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionFailed, true, v1.ReasonRetriesExhausted, msg)
	default:
		reason := string(st.Phase)
		msg := "the Task has not finished"
		set(v1.ConditionReady, true, reason, msg)
		set(v1.ConditionSucceeded, false, reason, msg)
		failMsg := msg
		if st.Phase == v1.PhaseRetrying {
			failMsg = a.lastError
		}
		set(v1.ConditionFailed, false, reason, failMsg)
	}
}

// setScheduledOutcome: Succeeded and Failed describe the latest finished run and are kept as
// they were while the next run is active, pending or not yet due.
func setScheduledOutcome(set setFunc, st *v1.TaskStatus, task *v1.Task, a analysis) {
	switch a.phase {
	case runSucceeded:
		msg := fmt.Sprintf("Job %s succeeded", a.latest.Name)
		set(v1.ConditionSucceeded, true, v1.ReasonRunSucceeded, msg)
		set(v1.ConditionFailed, false, v1.ReasonRunSucceeded, msg)
	case runFailed:
		reason := v1.ReasonRunFailed
		if a.exhausted {
			reason = v1.ReasonRetriesExhausted
		}
		set(v1.ConditionSucceeded, false, reason, a.lastError)
		set(v1.ConditionFailed, true, reason, a.lastError)
	default:
		for _, typ := range []string{v1.ConditionSucceeded, v1.ConditionFailed} {
			if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
				set(typ, c.Status == metav1.ConditionTrue, c.Reason, c.Message)
			} else {
				set(typ, false, v1.ReasonNoRunFinished, "no run has finished yet")
			}
		}
	}
	if meta.IsStatusConditionTrue(st.Conditions, v1.ConditionFailed) {
		set(v1.ConditionReady, false, v1.ReasonLastRunFailed, meta.FindStatusCondition(st.Conditions, v1.ConditionFailed).Message)
	} else {
		set(v1.ConditionReady, true, v1.ReasonHealthy, "the schedule is accepted")
	}
}

func jobRefs(jobs []observedJob) []v1.JobReference {
	if len(jobs) == 0 {
		return nil
	}
	refs := make([]v1.JobReference, 0, len(jobs))
	for _, j := range jobs {
		refs = append(refs, v1.JobReference{Name: j.Name, UID: j.UID})
	}
	slices.SortFunc(refs, func(a, b v1.JobReference) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return refs
}

// lastJobRef is the newest Job, unless the newest known one is older than the current run
// (its Job is gone), in which case the previous status knows better.
func lastJobRef(prior *v1.JobReference, jobs []observedJob, current runID) *v1.JobReference {
	var newest *observedJob
	for i := range jobs {
		if newest == nil || newest.Run.less(jobs[i].Run) {
			newest = &jobs[i]
		}
	}
	if newest != nil && (prior == nil || !newest.Run.less(current)) {
		return &v1.JobReference{Name: newest.Name, UID: newest.UID}
	}
	if prior == nil {
		return nil
	}
	return prior.DeepCopy()
}

func startTime(prior *metav1.Time, jobs []observedJob) *metav1.Time {
	if prior != nil {
		return prior.DeepCopy()
	}
	var first time.Time
	for _, j := range jobs {
		if !j.Created.IsZero() && (first.IsZero() || j.Created.Before(first)) {
			first = j.Created
		}
	}
	return timePtr(first)
}

func hasRef(refs []v1.JobReference, name string) bool {
	return slices.ContainsFunc(refs, func(r v1.JobReference) bool { return r.Name == name })
}

// timePtr is t at the second precision the API stores, or nil for the zero time.
func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func formatTime(t *metav1.Time) string {
	if t == nil {
		return "(none)"
	}
	return t.UTC().Format(time.RFC3339)
}
