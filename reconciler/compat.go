package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "example.com/task-operator/apis/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// This file reads what releases before status.currentRun wrote: a status without currentRun,
// Job names made by the earlier, non-injective fitting rule, active Jobs created without
// FinalizerRunOutcome, scheduled Tasks without status.observedSchedule. It can go once no
// supported upgrade starts from such a release: every Task has been reconciled by a release
// that writes currentRun and observedSchedule, and no Job of an earlier release still runs or
// is kept as history. The tests that pin it use the names of these functions.

// legacyRecord reads a status written before currentRun existed. Its attempts, lastJob and
// phase say which attempt ran last and how it ended; a retry pending keeps its due time.
func legacyRecord(task *v1.Task) *runRecord {
	st := task.Status
	if st.Attempts < 1 || st.LastJob == nil || st.LastJob.Name == "" {
		return nil
	}
	rec := &runRecord{run: runID{Attempt: st.Attempts}, job: *st.LastJob}
	if run, ok := legacyRunFromName(task.Name, st.LastJob.Name); ok {
		rec.run = run
	}
	switch {
	case hasRef(st.ActiveJobs, st.LastJob.Name):
		rec.outcome = v1.RunActive
	case st.Phase == v1.PhaseSucceeded:
		rec.outcome, rec.finished = v1.RunSucceeded, timeOf(st.CompletionTime)
	case st.Phase == v1.PhaseFailed:
		rec.outcome, rec.finished = v1.RunFailed, timeOf(st.CompletionTime)
	case st.Phase == v1.PhaseRetrying && st.NextRunTime != nil:
		rec.outcome, rec.retryAt = v1.RunFailed, st.NextRunTime.Time
		rec.finished = st.NextRunTime.Add(-nextRetryDelay(backoffOf(task), rec.run.Attempt))
	case conditionTrue(st.Conditions, v1.ConditionSucceeded):
		rec.outcome, rec.finished = v1.RunSucceeded, timeOf(st.LastPhaseTransitionTime)
	default:
		// A scheduled run whose last Job is gone and that was not running: it ended, and a
		// run that is not retrying failed for good or was superseded.
		rec.outcome, rec.finished = v1.RunFailed, timeOf(st.LastPhaseTransitionTime)
	}
	return rec
}

// scheduledByEarlierRelease recognises the status of a scheduled Task written before
// observedSchedule existed: it counts from the Task's creation (and lastScheduleTime), as it did.
func scheduledByEarlierRelease(st v1.TaskStatus) bool {
	return st.CurrentRun == nil && (st.LastScheduleTime != nil || st.Phase == v1.PhaseScheduled)
}

// earlierFitName is how releases before the injective rule fitted names: whole up to limit
// (63 included), else cut, trimmed of '-' and '.', hashed. Jobs they made keep those names,
// so reading a Job's run from its name accepts both rules; new Jobs get fitName's.
func earlierFitName(base, suffix string, limit int) string {
	if len(base)+len(suffix) <= limit {
		return base + suffix
	}
	hash := "-" + v1.NameHash(base)
	keep := max(1, limit-len(suffix)-len(hash))
	return strings.TrimRight(base[:min(keep, len(base))], "-.") + hash + suffix
}

// legacyAttemptLimit tells the two numbers of names made by earlier releases apart: attempts
// are at most 101 (maxRetries ≤ 100), schedule times in Unix seconds are far larger.
const legacyAttemptLimit = 1000

// legacyRunFromName reads a run out of a Job name made by an earlier release, for a status that
// names its last Job but has no currentRun: "<task>-<attempt>" for a one-shot run,
// "<task>-<unix>" for the first attempt of a scheduled run, "<task>-<unix>-<attempt>" for its
// retries.
func legacyRunFromName(taskName, name string) (runID, bool) {
	rest, last, ok := cutNumber(name)
	if !ok || last < 1 {
		return runID{}, false
	}
	if last <= legacyAttemptLimit {
		if earlierFitName(taskName, fmt.Sprintf("-%d", last), maxNameLength) == name {
			return runID{Attempt: int32(last)}, true
		}
		_, sched, ok := cutNumber(rest)
		if ok && sched > legacyAttemptLimit && earlierFitName(taskName, fmt.Sprintf("-%d-%d", sched, last), maxNameLength) == name {
			return runID{Scheduled: time.Unix(sched, 0).UTC(), Attempt: int32(last)}, true
		}
		return runID{}, false
	}
	if earlierFitName(taskName, fmt.Sprintf("-%d", last), maxNameLength) == name {
		return runID{Scheduled: time.Unix(last, 0).UTC(), Attempt: 1}, true
	}
	return runID{}, false
}

// protectJobs adds FinalizerRunOutcome to active Jobs an earlier release created without it.
func (r *Reconciler) protectJobs(ctx context.Context, s *scope) error {
	for _, o := range s.plan.protect {
		job := s.cached[o.Name]
		if job == nil {
			continue
		}
		patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(job, v1.FinalizerRunOutcome)
		if err := r.client.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("add finalizer to job %s: %w", job.Name, err)
		}
		s.changed(jobChange{name: o.Name, protected: new(true)})
	}
	return nil
}
