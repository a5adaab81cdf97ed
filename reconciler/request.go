package reconciler

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// Requests are imperative events a user (`kubectl task rerun|run|cancel`) records as annotations
// on the Task, each identified by its RFC 3339 time; the status records the latest one
// honoured (status.runRequest, status.cancelRequest), so a request is pending exactly while its
// time is later than the one recorded. See doc.go, "Run and cancel requests".

// requests are the Task's request annotations as read in one reconcile.
type requests struct {
	// run is the pending run request; zero if none.
	run time.Time
	// runAt is a run request later than the operator's clock: it becomes pending then.
	runAt time.Time
	// cancel is the pending cancel request; zero if none. One at most v1.RequestClockSkew
	// ahead of the operator's clock is pending already: made now on a clock a little ahead, or
	// stamped by the plugin a second after a run request of this second. cancelAt is one
	// further ahead, set for then: it becomes pending v1.RequestClockSkew before its time.
	cancel   time.Time
	cancelAt time.Time
	// invalid are the annotations whose value is not an RFC 3339 time: each is ignored.
	invalid []error
}

// readRequests reads the request annotations and says which are pending against the stored
// status and rec, the current run once the Jobs are folded in. A run request is satisfied by the
// run started for it and by any run of a later time (a schedule time at or after it): rec's time
// not before it. A run request later than now waits until then (clock skew between the client
// that set it and the operator is at most a few seconds; a time set by hand far ahead means
// "then"). A cancel up to v1.RequestClockSkew ahead is taken as made now: waiting for its time
// would stop whatever run is current then, not the one the user saw. The operator looks again
// when a request set for later becomes pending (plan.requestAt).
func readRequests(task *v1.Task, rec *runRecord, now time.Time) requests {
	var q requests
	run, err := requestTime(task, v1.AnnotationRunRequested)
	if err != nil {
		q.invalid = append(q.invalid, err)
	}
	if run.After(timeOf(task.Status.RunRequest)) && (rec == nil || rec.run.Scheduled.Before(run)) {
		if run.After(now) {
			q.runAt = run
		} else {
			q.run = run
		}
	}
	cancel, err := requestTime(task, v1.AnnotationCancelRequested)
	if err != nil {
		q.invalid = append(q.invalid, err)
	}
	switch {
	case !cancel.After(timeOf(task.Status.CancelRequest)):
	case !cancel.After(now.Add(v1.RequestClockSkew)):
		q.cancel = cancel
	default:
		q.cancelAt = cancel.Add(-v1.RequestClockSkew)
	}
	return q
}

// requestTime is the time of request annotation key; zero if there is none.
func requestTime(task *v1.Task, key string) (time.Time, error) {
	value, ok := task.Annotations[key]
	if !ok || value == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s of Task %s is %q, not an RFC 3339 time: the request is ignored", key, task.Name, value)
	}
	// A run is named by its time in Unix seconds, 0 meaning a one-shot run: a request must
	// come after 1970-01-01T00:00:00Z to name a run of its own.
	if t.Unix() <= 0 {
		return time.Time{}, fmt.Errorf("annotation %s of Task %s is %q, not after 1970-01-01T00:00:00Z: the request is ignored", key, task.Name, value)
	}
	return t.UTC().Truncate(time.Second), nil
}

// droppedRun is the run request the pending cancel request applies to as well, zero if none: one
// made before it, pending or still ahead of the clock (a cancel a little ahead is honoured at
// once, and a run request stamped a second before it may be ahead too). It starts no run and is
// recorded as honoured. Requests of the same second cannot be ordered; the run stands (the
// plugin stamps a request one second after a pending request of the other kind, so that its own
// are never of the same second).
func (q requests) droppedRun() time.Time {
	r := q.run
	if r.IsZero() {
		r = q.runAt
	}
	if r.IsZero() || !q.cancel.After(r) {
		return time.Time{}
	}
	return r
}

// cancelledByRequest says the pending run request is dropped (droppedRun).
func (q requests) cancelledByRequest() bool {
	return !q.run.IsZero() && !q.droppedRun().IsZero()
}

// lookAgainAt is when a request set for later becomes pending: the earlier of the two; zero if
// neither waits.
func (q requests) lookAgainAt() time.Time {
	switch {
	case q.runAt.IsZero():
		return q.cancelAt
	case q.cancelAt.IsZero() || q.runAt.Before(q.cancelAt):
		return q.runAt
	}
	return q.cancelAt
}

// requestedRecord says rec's run was started for a run request. The Job's annotation says so
// while the Job exists; once it is gone, the record's time equal to the request recorded with
// it (status.runRequest is written together with the record of the run it started) or to the
// annotated one (the status write that would have recorded it was lost). A later request that
// a cancel dropped takes status.runRequest's place; the stored record still tells then: a
// schedule run's start moves lastScheduleTime to its time in the same status write, so a stored
// run after lastScheduleTime was a requested one.
func requestedRecord(task *v1.Task, rec *runRecord, jobs []observedJob) bool {
	if rec == nil || !rec.run.isScheduled() {
		return false
	}
	if j := findJob(jobs, rec.job.Name); j != nil && !j.Missing {
		return j.Requested.Equal(rec.run.Scheduled)
	}
	annotated, _ := requestTime(task, v1.AnnotationRunRequested)
	if rec.run.Scheduled.Equal(timeOf(task.Status.RunRequest)) || rec.run.Scheduled.Equal(annotated) {
		return true
	}
	stored := task.Status.CurrentRun
	return stored != nil && rec.run.Scheduled.Equal(timeOf(stored.ScheduledTime)) && rec.run.Scheduled.After(timeOf(task.Status.LastScheduleTime))
}

// honouredRunRequest is status.runRequest: the stored one, or the latest request that the
// current run answers (started for it, or of a later time), or that a cancel dropped.
func honouredRunRequest(task *v1.Task, a analysis) *metav1.Time {
	h := timeOf(task.Status.RunRequest)
	if a.recRequested && a.rec.run.Scheduled.After(h) {
		h = a.rec.run.Scheduled
	}
	if r, _ := requestTime(task, v1.AnnotationRunRequested); r.After(h) && a.rec != nil && !a.rec.run.Scheduled.Before(r) {
		h = r
	}
	if d := a.requests.droppedRun(); d.After(h) {
		h = d
	}
	return timePtr(h)
}

// honouredCancelRequest is status.cancelRequest: the pending cancel request once nothing of the
// current run is left to stop (its active Jobs were deleted for it, or there were none).
func honouredCancelRequest(task *v1.Task, a analysis) *metav1.Time {
	if a.requests.cancel.IsZero() || len(cancelTargets(a)) > 0 {
		return task.Status.CancelRequest.DeepCopy()
	}
	return timePtr(a.requests.cancel)
}

// cancelTargets are the active Jobs of the current run a pending cancel request still has to
// stop: those not yet marked as deleted for it. Jobs of other runs (concurrency policy Allow)
// are left alone: a cancel stops the current run.
func cancelTargets(a analysis) []observedJob {
	if a.requests.cancel.IsZero() || a.rec == nil {
		return nil
	}
	var out []observedJob
	for _, j := range a.active {
		if j.Run.sameRun(a.rec.run) && !j.Replaced && !j.Cancelled.Equal(a.requests.cancel) {
			out = append(out, j)
		}
	}
	return out
}

// requestedRun is the run a pending run request starts now: none while anything of the Task is
// active (it waits), when a cancel request at or after it drops it, or when a schedule time
// later than it is due and in time (that run starts, and satisfies the request). Its time is the request's,
// so its Job's name is deterministic: a repeated creation is an AlreadyExists.
func requestedRun(task *v1.Task, a analysis, now time.Time) *runID {
	r := a.requests.run
	switch {
	case r.IsZero(), len(a.active) > 0, a.phase == runActive, a.requests.cancelledByRequest():
		return nil
	case task.Spec.Schedule != nil && a.due.Latest.After(r) && !tooLate(a.due.Latest, now, task.Spec.Schedule.StartingDeadlineSeconds):
		return nil
	}
	return &runID{Scheduled: r, Attempt: 1}
}

func cancelledError(at time.Time) string {
	return fmt.Sprintf("cancelled at %s by request", at.UTC().Format(time.RFC3339))
}

// cancelledRetryEvent tells a cancel request that stopped a retry due (no Job was active to
// delete): the stored record had a retry time, the status now records the cancel and none.
func cancelledRetryEvent(prior, next v1.TaskStatus) (eventSpec, bool) {
	was, now := prior.CurrentRun, next.CurrentRun
	if timeOf(next.CancelRequest).Equal(timeOf(prior.CancelRequest)) || was == nil || was.RetryTime == nil ||
		now == nil || now.RetryTime != nil || now.Attempt != was.Attempt {
		return eventSpec{}, false
	}
	return warning(v1.EventRunCancelled, "Cancel", fmt.Sprintf("cancelled the retry due at %s (attempt %d of the current run) for the cancel request at %s: the run ends Failed",
		formatTime(was.RetryTime), was.Attempt+1, formatTime(next.CancelRequest))), true
}
