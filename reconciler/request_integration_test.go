package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// Run and cancel requests (annotations) on the real control plane, as `kubectl task rerun|run|
// cancel` make them.

// requestNow sets request annotation key on the Task to the current second and returns it.
func (e *env) requestNow(name, key string) time.Time {
	e.t.Helper()
	return e.requestAt(name, key, time.Now())
}

// requestAt sets request annotation key on the Task to the second of at and returns it.
func (e *env) requestAt(name, key string, at time.Time) time.Time {
	e.t.Helper()
	at = at.UTC().Truncate(time.Second)
	e.update(name, func(t *v1.Task) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[key] = at.Format(time.RFC3339)
	})
	return at
}

// waitStatus waits until ok says the Task's status is what the test waits for.
func (e *env) waitStatus(name, what string, ok func(*v1.Task) bool) *v1.Task {
	e.t.Helper()
	var task *v1.Task
	testenv.Eventually(e.t, waitTimeout, fmt.Sprintf("task %s: %s", name, what), func(context.Context) (bool, error) {
		task = e.get(name)
		return ok(task), fmt.Errorf("%s runRequest=%v cancelRequest=%v", describe(task), task.Status.RunRequest, task.Status.CancelRequest)
	})
	return task
}

func jobNamesOf(e *env, task string) []string {
	var names []string
	for _, j := range e.jobs(task) {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	return names
}

// TestRerunOfASucceededTaskRunsItOnceMore: a rerun of a Succeeded one-shot Task starts one new
// Job, named for the request, which succeeds again; the operator restarted while it runs
// creates no other.
func TestRerunOfASucceededTaskRunsItOnceMore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("again", withLabels(testenv.RunSecondsLabel, "3")))
	e.waitPhase(task.Name, v1.PhaseSucceeded)

	at := e.requestNow(task.Name, v1.AnnotationRunRequested)
	rerun := task.Name + "-" + strconv.FormatInt(at.Unix(), 10) + "-1"
	e.waitStatus(task.Name, "running the rerun", func(t *v1.Task) bool {
		return t.Status.Phase == v1.PhaseRunning && t.Status.LastJob != nil && t.Status.LastJob.Name == rerun
	})
	e.op.stop(t)
	e.op = e.startOperator()
	got := e.waitStatus(task.Name, "the rerun succeeded", func(t *v1.Task) bool {
		return t.Status.Phase == v1.PhaseSucceeded && t.Status.LastJob.Name == rerun
	})
	if !got.Status.RunRequest.Time.Equal(at) || got.Status.LastScheduleTime != nil || got.Status.Attempts != 1 {
		t.Errorf("after the rerun: runRequest %v lastScheduleTime %v, %s; want the request at %s recorded", got.Status.RunRequest, got.Status.LastScheduleTime, describe(got), at)
	}
	if names := jobNamesOf(e, task.Name); !slices.Equal(names, []string{task.Name + "-0-1", rerun}) {
		t.Errorf("Jobs %v, want the first run's and exactly one for the rerun (%s)", names, rerun)
	}
	if reasons := e.eventReasons(got); !slices.Contains(reasons, v1.EventRunRequested) {
		t.Errorf("no %s Event: %v", v1.EventRunRequested, reasons)
	}
}

// TestRunOfAScheduledTaskNow: a run request starts a run of a scheduled Task at once, as a run of
// its own: lastScheduleTime and the next schedule time stay the schedule's.
func TestRunOfAScheduledTaskNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("hourly", func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h", ConcurrencyPolicy: v1.ForbidConcurrent}
	}))
	before := e.waitPhase(task.Name, v1.PhaseScheduled)
	if before.Status.NextRunTime == nil {
		t.Fatalf("no next run time: %s", describe(before))
	}
	at := e.requestNow(task.Name, v1.AnnotationRunRequested)
	now := task.Name + "-" + strconv.FormatInt(at.Unix(), 10) + "-1"
	got := e.waitStatus(task.Name, "the requested run succeeded", func(t *v1.Task) bool {
		return t.Status.CurrentRun != nil && t.Status.CurrentRun.Job.Name == now && t.Status.CurrentRun.Outcome == v1.RunSucceeded
	})
	st := got.Status
	if st.LastScheduleTime != nil || !st.RunRequest.Time.Equal(at) || st.MissedRuns != 0 || !st.NextRunTime.Equal(before.Status.NextRunTime) || st.Phase != v1.PhaseScheduled {
		t.Errorf("after the requested run: lastScheduleTime %v runRequest %v missedRuns %d nextRunTime %v (was %v) phase %s",
			st.LastScheduleTime, st.RunRequest, st.MissedRuns, st.NextRunTime, before.Status.NextRunTime, st.Phase)
	}
	if names := jobNamesOf(e, task.Name); !slices.Equal(names, []string{now}) {
		t.Errorf("Jobs %v, want only %s", names, now)
	}
}

// TestCancelOfAHangingRun: a cancel request deletes the active Job of a run that would never
// end; the Task ends Failed, saying why, and no retry starts although retries are left.
func TestCancelOfAHangingRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("stuck", withLabels(testenv.OutcomeLabel, testenv.OutcomeHang), withRetries(2)))
	e.waitPhase(task.Name, v1.PhaseRunning)
	at := e.requestNow(task.Name, v1.AnnotationCancelRequested)
	got := e.waitPhase(task.Name, v1.PhaseFailed)
	st := got.Status
	if want := "cancelled at " + at.Format(time.RFC3339) + " by request"; st.LastError != want || st.Attempts != 1 ||
		!st.CancelRequest.Time.Equal(at) || st.NextRunTime != nil || st.CurrentRun.RetryTime != nil {
		t.Errorf("after the cancel: %s cancelRequest %v nextRunTime %v; want Failed at attempt 1 with lastError %q and no retry", describe(got), st.CancelRequest, st.NextRunTime, want)
	}
	// No retry was created: the only Job is the first attempt's (or none, once released and deleted).
	for _, j := range e.jobs(task.Name) {
		if j.Name != task.Name+"-0-1" {
			t.Errorf("a Job %s started after the cancel", j.Name)
		}
	}
	if reasons := e.eventReasons(got); !slices.Contains(reasons, v1.EventRunCancelled) {
		t.Errorf("no %s Event: %v", v1.EventRunCancelled, reasons)
	}
}

// TestACancelAheadOfTheOperatorsClockStopsTheRun: a cancel stamped a few seconds ahead (the
// client's clock runs ahead of the operator's) stops a hanging run, whose Job sends no event
// that would bring the Task back later.
func TestACancelAheadOfTheOperatorsClockStopsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("ahead", withLabels(testenv.OutcomeLabel, testenv.OutcomeHang), withRetries(2)))
	e.waitPhase(task.Name, v1.PhaseRunning)
	at := e.requestAt(task.Name, v1.AnnotationCancelRequested, time.Now().Add(3*time.Second))
	got := e.waitStatus(task.Name, "the cancel ahead recorded and its attempt judged", func(t *v1.Task) bool {
		return t.Status.CancelRequest != nil && t.Status.Phase == v1.PhaseFailed
	})
	if want := "cancelled at " + at.Format(time.RFC3339) + " by request"; got.Status.LastError != want || !got.Status.CancelRequest.Time.Equal(at) {
		t.Errorf("after the cancel: %s cancelRequest %v; want lastError %q", describe(got), got.Status.CancelRequest, want)
	}
}
