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
	// prune are finished Jobs past the history limits.
	prune []observedJob
	// scheduled is the schedule time acted on (started or skipped): the new lastScheduleTime.
	scheduled time.Time
	// missed counts schedule times skipped; missedReason says why, for an Event.
	missed       int32
	missedReason string
	// catchUp asks for another pass at once: the walk over due schedule times was capped.
	catchUp bool
}

// planRuns decides what to do now, from the analysis of the Task's Jobs.
func planRuns(task *v1.Task, a analysis, jobs []observedJob, now time.Time) plan {
	p := plan{
		suspend: suspendFlips(task, a.active),
		prune:   pruneHistory(task, a, jobs),
	}
	if a.invalid != nil || task.Spec.Suspend {
		return p
	}
	if task.Spec.Schedule == nil {
		p.create = nextOneShotRun(a, now)
		return p
	}
	planSchedule(&p, task, a, now)
	return p
}

// nextOneShotRun is the first attempt, or a retry whose backoff has passed.
func nextOneShotRun(a analysis, now time.Time) *runID {
	switch {
	case a.phase == runNone:
		return &runID{Attempt: 1}
	case a.phase == runRetryPending && !now.Before(a.retryAt):
		return &runID{Attempt: a.attempts + 1}
	}
	return nil
}

// planSchedule starts the latest due schedule time, or skips it for its deadline or the
// concurrency policy; earlier due times it supersedes count as missed. With nothing due, a
// pending retry of the current run may start.
func planSchedule(p *plan, task *v1.Task, a analysis, now time.Time) {
	d := dueRun(a.sched, a.cursor, now)
	if d.Latest.IsZero() {
		if a.phase == runRetryPending && !now.Before(a.retryAt) {
			p.create = &runID{Scheduled: a.run.Scheduled, Attempt: a.attempts + 1}
		}
		return
	}
	sched := task.Spec.Schedule
	p.scheduled, p.missed = d.Latest, d.Passed
	if d.Passed > 0 {
		p.missedReason = fmt.Sprintf("%d schedule time(s) before %s passed without a run", d.Passed, d.Latest.UTC().Format(time.RFC3339))
	}
	switch {
	case d.Capped:
		p.missed++
		p.catchUp = true
		p.missedReason = fmt.Sprintf("more than %d schedule times passed without a run", maxDueScan)
	case tooLate(d.Latest, now, sched.StartingDeadlineSeconds):
		p.missed++
		p.missedReason = fmt.Sprintf("the run for %s is past its starting deadline of %ds", d.Latest.UTC().Format(time.RFC3339), *sched.StartingDeadlineSeconds)
	case len(a.active) > 0 && sched.ConcurrencyPolicy == v1.ForbidConcurrent:
		p.missed++
		p.missedReason = fmt.Sprintf("the run for %s was skipped: concurrency policy Forbid and %d Job(s) active", d.Latest.UTC().Format(time.RFC3339), len(a.active))
	default:
		if sched.ConcurrencyPolicy == v1.ReplaceConcurrent {
			p.replace = slices.Clone(a.active)
		}
		p.create = &runID{Scheduled: d.Latest, Attempt: 1}
	}
}

// suspendFlips are the active Jobs whose suspension differs from the Task's.
func suspendFlips(task *v1.Task, active []observedJob) []observedJob {
	var out []observedJob
	for _, j := range active {
		if j.Suspended != task.Spec.Suspend {
			out = append(out, j)
		}
	}
	return out
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

// pruneHistory picks the finished Jobs past the history limits, oldest first to go. The
// current run's newest Job stays whatever the limit: the outcome of the run is read off it.
func pruneHistory(task *v1.Task, a analysis, jobs []observedJob) []observedJob {
	keepSucceeded, keepFailed := historyLimits(task)
	if keepSucceeded < 0 && keepFailed < 0 {
		return nil
	}
	var finished []observedJob
	for _, j := range jobs {
		if j.State.finished() && !j.Gone && (a.latest == nil || j.Name != a.latest.Name) {
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
	if a.latest != nil && a.latest.State.finished() {
		// The kept newest Job takes one place of its kind.
		if a.latest.State == jobSucceeded && keepSucceeded > 0 {
			keepSucceeded--
		} else if a.latest.State == jobFailed && keepFailed > 0 {
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
