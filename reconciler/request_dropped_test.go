package reconciler

import (
	"testing"

	v1 "example.com/task-operator/apis/v1"
)

// TestADroppedRunRequestLeavesTheScheduleAlone: a scheduled Task ("@every 1h", whose times count
// from the previous one) ran for a run request; that run's Job is gone (ttlSecondsAfterFinished:
// 0). Then `kubectl task rerun` and `kubectl task cancel` come a second apart, before the operator
// saw the first: the cancel drops the rerun, which starts nothing. The requested run is still no
// schedule time, so lastScheduleTime stays the schedule's, and the next run stays at the
// schedule's next time (docs/guarantees.md: "For a scheduled Task it is a run of its own:
// lastScheduleTime, the next schedule time and missedRuns stay the schedule's").
func TestADroppedRunRequestLeavesTheScheduleAlone(t *testing.T) {
	s := &sim{t: t, task: newTask(func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h", ConcurrencyPolicy: v1.AllowConcurrent}
	})}
	s.step(at(1))
	if p := s.step(at(3600)); p.create == nil || !p.create.Scheduled.Equal(at(3600)) {
		t.Fatalf("at 3600 started %s, want the run for 3600", created(p))
	}
	s.finish(jobName("t", runID{Scheduled: at(3600), Attempt: 1}), jobSucceeded, at(3610))
	s.step(at(3610))
	s.jobs = nil // ttlSecondsAfterFinished: 0, its outcome recorded

	// A rerun: a run of its own, which ends and whose Job goes too.
	request(v1.AnnotationRunRequested, at(4000))(s.task)
	if p := s.step(at(4000)); p.create == nil || !p.requested {
		t.Fatalf("the rerun started %s", created(p))
	}
	s.finish(jobName("t", runID{Scheduled: at(4000), Attempt: 1}), jobSucceeded, at(4010))
	s.step(at(4010))
	s.jobs = nil
	s.step(at(4020))
	if got := timeOf(s.task.Status.LastScheduleTime); !got.Equal(at(3600)) {
		t.Fatalf("after the rerun: lastScheduleTime %s, want %s", got, at(3600))
	}

	// A rerun and a cancel a second later, seen together: the rerun is dropped.
	request(v1.AnnotationRunRequested, at(5000))(s.task)
	request(v1.AnnotationCancelRequested, at(5001))(s.task)
	for _, now := range []int{5001, 5002, 5003} {
		if p := s.step(at(now)); p.create != nil {
			t.Fatalf("at %d the dropped rerun started %s", now, created(p))
		}
	}
	st := s.task.Status
	if got := timeOf(st.LastScheduleTime); !got.Equal(at(3600)) {
		t.Errorf("after the dropped rerun: lastScheduleTime %s, want %s (the requested run's time is no schedule time)", got.UTC(), at(3600).UTC())
	}
	if got := timeOf(st.NextRunTime); !got.Equal(at(7200)) {
		t.Errorf("after the dropped rerun: nextRunTime %s, want %s (the schedule's next time)", got.UTC(), at(7200).UTC())
	}
	if p := s.step(at(7200)); p.create == nil || !p.create.Scheduled.Equal(at(7200)) {
		t.Errorf("at %s the schedule started %s, want the run for %s", at(7200).UTC(), created(p), at(7200).UTC())
	}
}

// TestARequestedRunWhoseJobVanishedIsStillARequestedRun: a scheduled Task's requested run is
// active when its Job vanishes (its finalizer removed by hand and the Job deleted): the status
// recorded the request with the run (status.runRequest), so the run is still the request's, not
// a schedule time: lastScheduleTime stays the schedule's.
func TestARequestedRunWhoseJobVanishedIsStillARequestedRun(t *testing.T) {
	id := runID{Scheduled: at(4000), Attempt: 1}
	task := newTask(func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h", ConcurrencyPolicy: v1.AllowConcurrent}
		t.Status = v1.TaskStatus{
			ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1,
			LastScheduleTime: mtime(3600),
			ObservedSchedule: &v1.ObservedSchedule{Cron: "@every 1h", Since: *mtime(0)},
			RunRequest:       mtime(4000),
			ActiveJobs:       []v1.JobReference{*ref(jobName("t", id))},
			CurrentRun:       run(4000, 1, v1.RunActive, 0),
		}
	})
	request(v1.AnnotationRunRequested, at(4000))(task)
	request(v1.AnnotationRunRequested, at(4500))(task) // a later request, waiting for this run
	gone := observedJob{Name: jobName("t", id), UID: "job-uid", Run: id, Missing: true}
	st := computeStatus(task, []observedJob{gone}, at(4100))
	if got := timeOf(st.LastScheduleTime); !got.Equal(at(3600)) {
		t.Errorf("lastScheduleTime %s, want %s: the requested run at %s is taken for a schedule time", got.UTC(), at(3600).UTC(), at(4000).UTC())
	}
}
