package reconciler

import (
	"testing"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// TestADailyScheduleRunsOnTheDayAfterAHalfHourClockChange: Australia/Lord_Howe moves its clocks
// by half an hour (02:00 +1100 back to 01:30 +1030 on 5 April 2026; 02:00 +1030 on to 02:30
// +1100 on 4 October 2026). A Task "0 0 * * *" in that zone whose last run was the midnight of
// the day the clocks changed must run at the next midnight, which exists once and is an
// ordinary day: 6 April 00:00 +1030 (2026-04-05T13:30:00Z), 5 October 00:00 +1100
// (2026-10-04T13:00:00Z). The status must announce it as the next run, and once it has passed
// the run for it must start.
func TestADailyScheduleRunsOnTheDayAfterAHalfHourClockChange(t *testing.T) {
	for _, tc := range []struct {
		last, want time.Time
	}{
		{last: time.Date(2026, 4, 4, 13, 0, 0, 0, time.UTC), want: time.Date(2026, 4, 5, 13, 30, 0, 0, time.UTC)},
		{last: time.Date(2026, 10, 3, 13, 30, 0, 0, time.UTC), want: time.Date(2026, 10, 4, 13, 0, 0, 0, time.UTC)},
	} {
		created := tc.last.Add(-72 * time.Hour)
		lastRun := runID{Scheduled: tc.last, Attempt: 1}
		task := newTask(func(t *v1.Task) {
			t.CreationTimestamp.Time = created
			t.Spec.Schedule = &v1.Schedule{Cron: "0 0 * * *", TimeZone: "Australia/Lord_Howe", ConcurrencyPolicy: v1.ForbidConcurrent}
			t.Status = v1.TaskStatus{
				ObservedGeneration: 1,
				LastScheduleTime:   timePtr(tc.last),
				ObservedSchedule:   &v1.ObservedSchedule{Cron: "0 0 * * *", TimeZone: "Australia/Lord_Howe", Since: *timePtr(created)},
				CurrentRun: &v1.RunRecord{ScheduledTime: timePtr(tc.last), Attempt: 1, Job: *ref(jobName("t", lastRun)),
					Outcome: v1.RunSucceeded, FinishTime: timePtr(tc.last.Add(time.Minute))},
			}
		})

		// An hour after the last run: the next run announced is the next midnight.
		now := tc.last.Add(time.Hour)
		if st := computeStatus(task, nil, now); !timeOf(st.NextRunTime).Equal(tc.want) {
			t.Errorf("last run %s: nextRunTime %s, want %s (the next midnight in Australia/Lord_Howe)",
				tc.last.Format(time.RFC3339), formatTime(st.NextRunTime), tc.want.Format(time.RFC3339))
		}

		// Five seconds after that midnight: its run starts.
		now = tc.want.Add(5 * time.Second)
		p := planRuns(task, analyze(task, nil, now), nil, now)
		if p.create == nil || !p.create.Scheduled.Equal(tc.want) {
			t.Errorf("last run %s, now %s: plan starts %v, want the run for %s",
				tc.last.Format(time.RFC3339), now.Format(time.RFC3339), p.create, tc.want.Format(time.RFC3339))
		}
	}
}
