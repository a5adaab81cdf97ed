package reconciler

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "example.com/task-operator/apis/v1"
)

// eventSpec is one Event to record on the Task.
type eventSpec struct {
	Type, Reason, Action, Note string
	// ran is how long the attempt an outcome Event tells of ran (creation to finish of its
	// Job), for the run-duration metrics; negative when not known.
	ran time.Duration
}

func normal(reason, action, note string) eventSpec {
	return eventSpec{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: note}
}

func warning(reason, action, note string) eventSpec {
	return eventSpec{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: note}
}

// transitionEvents are the Events that going from status prior to status next deserves: one per
// Job that stopped being active (succeeded, failed, deleted, vanished), a retry newly scheduled,
// retries run out. They are recorded only once next is stored, so each transition is told once.
func transitionEvents(task *v1.Task, prior, next v1.TaskStatus, jobs []observedJob) []eventSpec {
	var out []eventSpec
	cancelled := false // a cancel request ended the run: RunCancelled told it, no "retries exhausted"
	for _, ref := range prior.ActiveJobs {
		if hasRef(next.ActiveJobs, ref.Name) {
			continue
		}
		j := findJob(jobs, ref.Name)
		switch {
		case j == nil:
			out = append(out, ranFor(warning(v1.EventRunFailed, "Fail", fmt.Sprintf("Job %s disappeared before its outcome was recorded", ref.Name)), nil))
		case j.State == jobSucceeded:
			out = append(out, ranFor(normal(v1.EventSucceeded, "Complete", fmt.Sprintf("Job %s succeeded", j.Name)), j))
		case j.Replaced:
			// Told when it was replaced.
		case j.State == jobActive && !j.gone():
			// Still running, and no longer listed: cannot happen; say nothing rather than lie.
		default:
			out = append(out, ranFor(warning(v1.EventRunFailed, "Fail", j.failure()), j))
			cancelled = cancelled || (isCurrent(next, j) && j.cancelled())
			if isCurrent(next, j) && !canRetry(task, j.Run.Attempt) && !j.cancelled() {
				out = append(out, warning(v1.EventRetriesExhausted, "Fail",
					fmt.Sprintf("attempt %d failed and no retries are left (maxRetries %d)", j.Run.Attempt, v1.MaxRetriesOf(task))))
			}
		}
	}
	if next.Phase == v1.PhaseRetrying && (prior.Phase != v1.PhaseRetrying || prior.Attempts != next.Attempts) && next.NextRunTime != nil {
		out = append(out, normal(v1.EventRetryScheduled, "Retry", fmt.Sprintf("attempt %d of %d at %s",
			next.Attempts+1, v1.MaxRetriesOf(task)+1, next.NextRunTime.UTC().Format(time.RFC3339))))
	}
	if next.Phase == v1.PhaseFailed && prior.Phase != v1.PhaseFailed && !hasEvent(out, v1.EventRetriesExhausted) && !cancelled && !cancelledNow(prior, next) {
		out = append(out, warning(v1.EventRetriesExhausted, "Fail", next.LastError))
	}
	return out
}

// ranFor sets how long j ran on its outcome Event e; unknown without j or its times.
func ranFor(e eventSpec, j *observedJob) eventSpec {
	e.ran = -1
	if j != nil && !j.Created.IsZero() && !j.Finished.Before(j.Created) {
		e.ran = j.Finished.Sub(j.Created)
	}
	return e
}

// isCurrent says j is the latest attempt of the current run in status st.
func isCurrent(st v1.TaskStatus, j *observedJob) bool {
	return st.CurrentRun != nil && st.CurrentRun.Job.Name == j.Name
}

func hasEvent(evs []eventSpec, reason string) bool {
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// cancelledNow says next records a cancel request prior did not: a run it ended is told by
// RunCancelled.
func cancelledNow(prior, next v1.TaskStatus) bool {
	return !timeOf(next.CancelRequest).Equal(timeOf(prior.CancelRequest))
}
