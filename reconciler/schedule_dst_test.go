package reconciler

import (
	"testing"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// TestNoRunForAScheduleTimeBeforeTheTaskExisted: in Pacific/Chatham the clocks go back from
// 03:45 (+1345) to 02:45 (+1245) on 5 April 2026, so 03:00 happens twice: 13:15 and 14:15 UTC
// on 4 April. A Task "0 3 * * *" created at 02:50 of the second pass (14:05 UTC) must start
// nothing before 14:15 UTC: 13:15 UTC was before it existed. And once a run for a time has
// started and its Job is gone, that time must not start again.
func TestNoRunForAScheduleTimeBeforeTheTaskExisted(t *testing.T) {
	created := time.Date(2026, 4, 4, 14, 5, 0, 0, time.UTC)
	first03 := time.Date(2026, 4, 4, 13, 15, 0, 0, time.UTC)
	chatham := func(st v1.TaskStatus) *v1.Task {
		return newTask(func(t *v1.Task) {
			t.CreationTimestamp.Time = created
			t.Spec.Schedule = &v1.Schedule{Cron: "0 3 * * *", TimeZone: "Pacific/Chatham", ConcurrencyPolicy: v1.AllowConcurrent}
			t.Status = st
		})
	}
	now := created.Add(10 * time.Second)
	task := chatham(v1.TaskStatus{})
	a := analyze(task, nil, now)
	if p := planRuns(task, a, nil, now); p.create != nil {
		t.Errorf("created at %v, now %v: starts the run for %v, before the Task existed", created, now, p.create.Scheduled.UTC())
	}
	if want := time.Date(2026, 4, 4, 14, 15, 0, 0, time.UTC); !a.due.Next.Equal(want) {
		t.Errorf("next run %v, want %v", a.due.Next.UTC(), want)
	}

	// The status a start for 13:15 UTC wrote, its Job since succeeded and deleted (TTL).
	id := runID{Scheduled: first03, Attempt: 1}
	task = chatham(v1.TaskStatus{
		ObservedGeneration: 1, LastScheduleTime: timePtr(first03),
		ObservedSchedule: &v1.ObservedSchedule{Cron: "0 3 * * *", TimeZone: "Pacific/Chatham", Since: *timePtr(created)},
		CurrentRun:       &v1.RunRecord{ScheduledTime: timePtr(first03), Attempt: 1, Job: *ref(jobName("t", id)), Outcome: v1.RunSucceeded, FinishTime: timePtr(now)},
	})
	now = now.Add(time.Minute)
	if p := planRuns(task, analyze(task, nil, now), nil, now); p.create != nil {
		t.Errorf("the run for %v already ran: starts %v again", first03, *p.create)
	}

	// Policy Replace, the run for 13:15 UTC still active: it must not be replaced by itself.
	task = chatham(v1.TaskStatus{
		ObservedGeneration: 1, LastScheduleTime: timePtr(first03),
		ObservedSchedule: &v1.ObservedSchedule{Cron: "0 3 * * *", TimeZone: "Pacific/Chatham", Since: *timePtr(created)},
		CurrentRun:       &v1.RunRecord{ScheduledTime: timePtr(first03), Attempt: 1, Job: *ref(jobName("t", id)), Outcome: v1.RunActive},
	})
	task.Spec.Schedule.ConcurrencyPolicy = v1.ReplaceConcurrent
	job := observedJob{Name: jobName("t", id), UID: "job-uid", Run: id, Created: created, State: jobActive, Protected: true}
	jobs := []observedJob{job}
	if p := planRuns(task, analyze(task, jobs, now), jobs, now); p.create != nil || len(p.replace) > 0 {
		t.Errorf("the run for %v active under Replace: replaces %v to start %v", first03, p.replace, p.create)
	}
}
