package reconciler

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// computeStatus is the Task's status given its stored status and everything known about its
// Jobs. It keeps what only the stored status knows (the outcome of attempts whose Jobs are
// gone, missed runs) and never changes a field without a reason, so calling it again on its
// own result changes nothing.
func computeStatus(task *v1.Task, jobs []observedJob, now time.Time) v1.TaskStatus {
	return statusFrom(task, analyze(task, jobs, now), jobs, now)
}

// computeStatusIn is computeStatus in a cluster that does or does not serve Kueue's API.
func computeStatusIn(task *v1.Task, jobs []observedJob, now time.Time, kueueServed bool) v1.TaskStatus {
	return statusFrom(task, analyzeIn(task, jobs, now, kueueServed), jobs, now)
}

// statusAfter is the status once the plan is carried out, computed in one place from the stored
// record, the Jobs as they now are, and what the plan decided: the schedule times it counted as
// missed (once its run started) and a run blocked by someone else's Job of its name.
func statusAfter(task *v1.Task, jobs []observedJob, now time.Time, kueueServed bool, p plan, taken *errNameTaken) v1.TaskStatus {
	st := computeStatusIn(task, jobs, now, kueueServed)
	if taken != nil {
		setNameTaken(&st, task, taken.Error(), now)
	}
	if p.create != nil && !p.scheduled.IsZero() && st.CurrentRun != nil && st.CurrentRun.ScheduledTime.Equal(timePtr(p.scheduled)) {
		st.MissedRuns += p.missed
	}
	return st
}

func statusFrom(task *v1.Task, a analysis, jobs []observedJob, now time.Time) v1.TaskStatus {
	prior := task.Status
	st := v1.TaskStatus{
		ObservedGeneration:      task.Generation,
		Phase:                   phaseOf(task, a),
		LastPhaseTransitionTime: prior.LastPhaseTransitionTime,
		Conditions:              slices.Clone(prior.Conditions),
		ActiveJobs:              jobRefs(a.active),
		LastJob:                 prior.LastJob.DeepCopy(),
		LastError:               a.lastError,
		StartTime:               startTime(prior.StartTime, jobs),
		LastScheduleTime:        timePtr(a.lastScheduleTime),
		LastSuccessfulTime:      lastSuccessfulTime(prior.LastSuccessfulTime, a.rec, jobs),
		MissedRuns:              prior.MissedRuns,
		CurrentRun:              a.rec.toAPI(),
		ObservedSchedule:        a.observed,
		RunRequest:              honouredRunRequest(task, a),
		CancelRequest:           honouredCancelRequest(task, a),
	}
	if a.invalid != nil {
		// Keep what was observed while the schedule cannot be read.
		st.LastScheduleTime = prior.LastScheduleTime.DeepCopy()
		st.ObservedSchedule = prior.ObservedSchedule.DeepCopy()
	}
	if a.rec != nil {
		st.Attempts = a.rec.run.Attempt
		st.LastJob = a.rec.job.DeepCopy()
	}
	if st.Phase != prior.Phase || st.LastPhaseTransitionTime == nil {
		st.LastPhaseTransitionTime = timePtr(now)
	}
	if st.Phase == v1.PhaseSucceeded || st.Phase == v1.PhaseFailed {
		st.CompletionTime = prior.CompletionTime.DeepCopy()
		if st.CompletionTime == nil {
			st.CompletionTime = timePtr(a.rec.finished)
		}
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
	case task.Spec.Suspend && !admittedRuns(a.active):
		return v1.PhaseSuspended
	case a.waiting != nil:
		return v1.PhaseQueued
	case len(a.active) > 0 || a.phase == runActive:
		return v1.PhaseRunning
	case a.phase == runRetryPending:
		return v1.PhaseRetrying
	case oneShot:
		return v1.PhasePending
	default:
		return v1.PhaseScheduled
	}
}

// admittedRuns says a queued Job Kueue admitted still runs: spec.suspend does not stop it (its
// suspension is Kueue's), so a suspended Task shows it Running.
func admittedRuns(active []observedJob) bool {
	return slices.ContainsFunc(active, func(j observedJob) bool { return j.Queue != "" && !j.Suspended })
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
	if task.Spec.Schedule != nil && !a.due.Next.IsZero() && (t.IsZero() || a.due.Next.Before(t)) {
		t = a.due.Next
	}
	return t
}

func jobRefs(jobs []observedJob) []v1.JobReference {
	if len(jobs) == 0 {
		return nil
	}
	refs := make([]v1.JobReference, 0, len(jobs))
	for _, j := range jobs {
		refs = append(refs, v1.JobReference{Name: j.Name, UID: j.UID})
	}
	slices.SortFunc(refs, func(a, b v1.JobReference) int { return strings.Compare(a.Name, b.Name) })
	return refs
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

// lastSuccessfulTime is the latest finish of a succeeded attempt: the stored one (its Job may be
// gone), the current run's record, or a succeeded Job of any run (a superseded run's Job that
// succeeded late counts too). It only moves forward, so later failures keep it.
func lastSuccessfulTime(prior *metav1.Time, rec *runRecord, jobs []observedJob) *metav1.Time {
	latest := timeOf(prior)
	if rec != nil && rec.outcome == v1.RunSucceeded && rec.finished.After(latest) {
		latest = rec.finished
	}
	for _, j := range jobs {
		if j.State == jobSucceeded && j.Finished.After(latest) {
			latest = j.Finished
		}
	}
	return timePtr(latest)
}

func hasRef(refs []v1.JobReference, name string) bool {
	return slices.ContainsFunc(refs, func(r v1.JobReference) bool { return r.Name == name })
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
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
