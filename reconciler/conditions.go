package reconciler

import (
	"fmt"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// setConditions writes the six conditions to match the phase and the record.
// meta.SetStatusCondition keeps a condition's transition time while its status stays the same.
//
// What kstatus (sigs.k8s.io/cli-utils, used by Flux, kpt and Argo CD health checks) makes of
// them: Reconciling=True is InProgress, Stalled=True is Failed, otherwise Ready decides
// (True: Current, False: InProgress).
//
//	one-shot Pending, Queued, Running, Retrying   Reconciling   → InProgress
//	one-shot Suspended                    Ready=False   → InProgress (it has not run)
//	one-shot Succeeded                    Ready=True    → Current
//	one-shot Failed                       Stalled       → Failed
//	scheduled, latest run did not fail    Ready=True    → Current (like a CronJob)
//	scheduled, suspended                  Ready=False   → InProgress (no run starts)
//	scheduled, latest run failed          Ready=False   → InProgress until a run succeeds
//	schedule that does not parse          Stalled       → Failed
func setConditions(st *v1.TaskStatus, task *v1.Task, a analysis, now time.Time) {
	set := func(typ string, status bool, reason, msg string) {
		msg = fitConditionMessage(msg)
		s := metav1.ConditionFalse
		if status {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: task.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	setAdmitted(set, st, task, a)
	if a.invalid != nil {
		msg := a.invalid.Error()
		for _, typ := range []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionSucceeded, v1.ConditionFailed, v1.ConditionReconciling} {
			set(typ, false, a.invalidReason, msg)
		}
		set(v1.ConditionStalled, true, a.invalidReason, msg)
		return
	}
	progressing, reason, msg := progressOf(st, task, a)
	set(v1.ConditionProgressing, progressing, reason, msg)
	if task.Spec.Schedule == nil {
		setOneShotOutcome(set, st, a)
	} else {
		setScheduledOutcome(set, st, a)
	}
}

type setFunc func(typ string, status bool, reason, msg string)

// maxConditionMessage is the CRD's bound on a condition's message (metav1.Condition's): a longer
// one would make the apiserver refuse the whole status write, on every reconcile.
const maxConditionMessage = 32768

// fitConditionMessage cuts msg to maxConditionMessage bytes, at a character's start.
func fitConditionMessage(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	const more = "..."
	cut := maxConditionMessage - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// setNameTaken: the run due cannot start because its Job's name is someone else's. Only a
// person can clear that (delete the Job), so the Task is Stalled, saying which Job; the phase
// and the record stay as they are, and the next reconcile after the Job is gone sets every
// condition afresh. A condition the stored status already gives for the same reason keeps its
// transition time: the Task has been so since then, and each look again is no status write.
func setNameTaken(st *v1.TaskStatus, task *v1.Task, msg string, now time.Time) {
	for _, c := range []struct {
		typ    string
		status metav1.ConditionStatus
	}{
		{v1.ConditionStalled, metav1.ConditionTrue},
		{v1.ConditionProgressing, metav1.ConditionFalse},
		{v1.ConditionReconciling, metav1.ConditionFalse},
		{v1.ConditionReady, metav1.ConditionFalse},
	} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: c.typ, Status: c.status, Reason: v1.ReasonJobNameTaken, Message: msg,
			ObservedGeneration: task.Generation, LastTransitionTime: metav1.NewTime(now),
		})
		if prior := meta.FindStatusCondition(task.Status.Conditions, c.typ); prior != nil && prior.Status == c.status && prior.Reason == v1.ReasonJobNameTaken {
			meta.FindStatusCondition(st.Conditions, c.typ).LastTransitionTime = prior.LastTransitionTime
		}
	}
}

// setAdmitted keeps the Admitted condition of a Task with spec.queueName: False with Kueue's
// reason while the current attempt's Job waits, True once Kueue admitted it, False with
// KueueNotInstalled while Kueue's API is not served. It says what it said last once the run
// finished, and goes away with spec.queueName.
func setAdmitted(set setFunc, st *v1.TaskStatus, task *v1.Task, a analysis) {
	switch {
	case task.Spec.QueueName == "":
		meta.RemoveStatusCondition(&st.Conditions, v1.ConditionAdmitted)
	case a.invalidReason == v1.ReasonKueueNotInstalled:
		set(v1.ConditionAdmitted, false, v1.ReasonKueueNotInstalled, a.invalid.Error())
	case a.waiting != nil:
		set(v1.ConditionAdmitted, false, orDefault(a.waiting.QueueReason, v1.ReasonQueuePending), orDefault(a.waiting.QueueMessage, "waiting in LocalQueue "+a.waiting.Queue))
	case a.phase == runActive && a.rec.job.Name != "" && !a.rec.admitted.IsZero():
		set(v1.ConditionAdmitted, true, v1.ReasonAdmitted, fmt.Sprintf("Kueue admitted Job %s at %s", a.rec.job.Name, a.rec.admitted.UTC().Format(time.RFC3339)))
	}
}

func progressOf(st *v1.TaskStatus, task *v1.Task, a analysis) (bool, string, string) {
	attempts := v1.MaxRetriesOf(task) + 1
	switch st.Phase {
	case v1.PhaseRunning:
		msg := fmt.Sprintf("%d Job(s) running; latest attempt %d of %d", len(st.ActiveJobs), st.Attempts, attempts)
		if !a.heldBack.IsZero() {
			msg += fmt.Sprintf("; the run for %s starts when they end (concurrency policy Forbid)", a.heldBack.UTC().Format(time.RFC3339))
		}
		return true, v1.ReasonJobActive, msg
	case v1.PhaseQueued:
		w := a.waiting
		return true, v1.ReasonQueued, fmt.Sprintf("Job %s (attempt %d of %d) waits in LocalQueue %s: %s: %s",
			w.Name, st.Attempts, attempts, w.Queue, orDefault(w.QueueReason, v1.ReasonQueuePending), w.QueueMessage)
	case v1.PhaseRetrying:
		return true, v1.ReasonRetryPending, fmt.Sprintf("attempt %d of %d due at %s", st.Attempts+1, attempts, formatTime(st.NextRunTime))
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

// setOneShotOutcome: Ready only once the run succeeded; Reconciling while there is something
// left to do; Stalled once it failed for good.
func setOneShotOutcome(set setFunc, st *v1.TaskStatus, a analysis) {
	switch st.Phase {
	case v1.PhaseSucceeded:
		msg := fmt.Sprintf("Job %s succeeded", a.rec.job.Name)
		set(v1.ConditionReady, true, v1.ReasonSucceeded, msg)
		set(v1.ConditionSucceeded, true, v1.ReasonRunSucceeded, msg)
		set(v1.ConditionFailed, false, v1.ReasonSucceeded, msg)
		set(v1.ConditionReconciling, false, v1.ReasonSucceeded, msg)
		set(v1.ConditionStalled, false, v1.ReasonSucceeded, msg)
	case v1.PhaseFailed:
		msg := fmt.Sprintf("%d attempt(s) failed; last: %s", st.Attempts, st.LastError)
		set(v1.ConditionReady, false, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionSucceeded, false, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionFailed, true, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionReconciling, false, v1.ReasonRetriesExhausted, msg)
		set(v1.ConditionStalled, true, v1.ReasonRetriesExhausted, msg)
	default:
		reason := string(st.Phase)
		msg := "the Task has not succeeded yet"
		set(v1.ConditionReady, false, reason, msg)
		set(v1.ConditionSucceeded, false, reason, msg)
		failMsg := msg
		if st.Phase == v1.PhaseRetrying {
			failMsg = st.LastError
		}
		set(v1.ConditionFailed, false, reason, failMsg)
		// A suspended Task waits for its user, not for the operator.
		set(v1.ConditionReconciling, st.Phase != v1.PhaseSuspended, reason, msg)
		set(v1.ConditionStalled, false, reason, msg)
	}
}

// setScheduledOutcome: Succeeded and Failed describe the latest finished run (the current run
// once it ended, else the one it replaced, else whatever they said before) and are kept while
// the next run is active, pending or not yet due. A scheduled Task is never Reconciling or
// Stalled for its runs: like a CronJob it is done once its schedule is in force.
func setScheduledOutcome(set setFunc, st *v1.TaskStatus, a analysis) {
	switch outcome, rec := latestFinished(a); outcome {
	case runSucceeded:
		msg := fmt.Sprintf("Job %s succeeded", rec.job.Name)
		set(v1.ConditionSucceeded, true, v1.ReasonRunSucceeded, msg)
		set(v1.ConditionFailed, false, v1.ReasonRunSucceeded, msg)
	case runFailed:
		reason := v1.ReasonRunFailed
		if a.exhausted && rec == a.rec {
			reason = v1.ReasonRetriesExhausted
		}
		set(v1.ConditionSucceeded, false, reason, st.LastError)
		set(v1.ConditionFailed, true, reason, st.LastError)
	default:
		for _, typ := range []string{v1.ConditionSucceeded, v1.ConditionFailed} {
			if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
				set(typ, c.Status == metav1.ConditionTrue, c.Reason, c.Message)
			} else {
				set(typ, false, v1.ReasonNoRunFinished, "no run has finished yet")
			}
		}
	}
	switch {
	case st.Phase == v1.PhaseSuspended:
		// Not healthy, whatever the last run did: no run starts until spec.suspend is cleared.
		set(v1.ConditionReady, false, v1.ReasonSuspended, "spec.suspend is set: no scheduled run starts")
	case meta.IsStatusConditionTrue(st.Conditions, v1.ConditionFailed):
		set(v1.ConditionReady, false, v1.ReasonLastRunFailed, meta.FindStatusCondition(st.Conditions, v1.ConditionFailed).Message)
	default:
		set(v1.ConditionReady, true, v1.ReasonHealthy, "the schedule is in force")
	}
	msg := "the schedule is in force"
	if st.Phase == v1.PhaseSuspended {
		msg = "spec.suspend is set: no scheduled run starts"
	}
	set(v1.ConditionReconciling, false, v1.ReasonAsExpected, msg)
	set(v1.ConditionStalled, false, v1.ReasonAsExpected, msg)
}

// latestFinished is the outcome of the latest run that finished for good, as far as this
// analysis knows: a superseded run's failure newer than the current run's outcome, the current
// run, or the one it replaced in this reconcile; and in place of a success, the failure the
// stored status tells after it (laterFailureTold).
func latestFinished(a analysis) (runPhase, *runRecord) {
	if f := a.supersededFailure; f != nil {
		return runFailed, &runRecord{run: f.Run, job: v1.JobReference{Name: f.Name, UID: f.UID}, outcome: v1.RunFailed, finished: f.Finished}
	}
	if a.phase.finished() {
		switch {
		case a.rec.replaced:
			return runNone, nil // ended by Replace, which is not an outcome
		case a.failedAfter(a.rec):
			return runFailed, &a.laterFailure.failed
		}
		return a.phase, a.rec
	}
	if p := a.previous; p != nil && !p.replaced && a.failedAfter(p) {
		return runFailed, &a.laterFailure.failed
	}
	if p := a.previous; p != nil && !p.replaced {
		switch p.outcome {
		case v1.RunSucceeded:
			return runSucceeded, p
		case v1.RunFailed:
			return runFailed, p
		}
	}
	return runNone, nil
}

// failedAfter says r is the stored record's success that a later failure, told in the stored
// lastError, superseded as the latest outcome.
func (a analysis) failedAfter(r *runRecord) bool {
	return a.laterFailure != nil && r.outcome == v1.RunSucceeded && r.run.equal(a.laterFailure.after)
}
