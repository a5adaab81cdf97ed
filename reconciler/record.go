package reconciler

import (
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// runRecord is the durable runRecord of a run (v1.RunRecord) with plain times.
type runRecord struct {
	run      runID
	job      v1.JobReference
	outcome  v1.RunOutcome
	finished time.Time
	// admitted is when Kueue last admitted the attempt's Job (queued Tasks); zero while it
	// waits.
	admitted time.Time
	// retryAt is when the next attempt is due; zero when none follows.
	retryAt time.Time
	// replaced says the attempt ended because a newer run replaced it (policy Replace); it is
	// known only when the record is settled from the deleted Job (it is not stored), and is not
	// a failure worth reporting; its retry is still decided (see recordOutcome).
	replaced bool
}

func (r *runRecord) toAPI() *v1.RunRecord {
	if r == nil {
		return nil
	}
	return &v1.RunRecord{
		ScheduledTime: timePtr(r.run.Scheduled),
		Attempt:       r.run.Attempt,
		Job:           r.job,
		Outcome:       r.outcome,
		FinishTime:    timePtr(r.finished),
		AdmittedTime:  timePtr(r.admitted),
		RetryTime:     timePtr(r.retryAt),
	}
}

func recordFromAPI(rr *v1.RunRecord) *runRecord {
	if rr == nil {
		return nil
	}
	return &runRecord{
		run:      runID{Scheduled: timeOf(rr.ScheduledTime).UTC(), Attempt: rr.Attempt},
		job:      rr.Job,
		outcome:  rr.Outcome,
		finished: timeOf(rr.FinishTime),
		admitted: timeOf(rr.AdmittedTime),
		retryAt:  timeOf(rr.RetryTime),
	}
}

// storedRecord is the record in the stored status or, for a status written by an earlier
// release, the closest record its fields allow.
func storedRecord(task *v1.Task) *runRecord {
	if rec := recordFromAPI(task.Status.CurrentRun); rec != nil {
		return rec
	}
	return legacyRecord(task)
}
