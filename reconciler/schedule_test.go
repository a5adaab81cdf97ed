package reconciler

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

func mustSchedule(t *testing.T, cronSpec, tz string) v1.CronSchedule {
	t.Helper()
	s, err := v1.ParseSchedule(&v1.Schedule{Cron: cronSpec, TimeZone: tz})
	if err != nil {
		t.Fatalf("v1.ParseSchedule(%q, %q): %v", cronSpec, tz, err)
	}
	return s
}

func TestDueRun(t *testing.T) {
	base := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC) // a Tuesday
	tests := []struct {
		name       string
		cron, tz   string
		after, now time.Time
		want       due
	}{
		{
			name: "nothing due yet", cron: "*/5 * * * *",
			after: base, now: base.Add(4 * time.Minute),
			want: due{Next: base.Add(5 * time.Minute)},
		},
		{
			name: "exactly due", cron: "*/5 * * * *",
			after: base, now: base.Add(5 * time.Minute),
			want: due{Latest: base.Add(5 * time.Minute), Next: base.Add(10 * time.Minute)},
		},
		{
			name: "three passed, latest wins", cron: "*/5 * * * *",
			after: base, now: base.Add(21 * time.Minute),
			want: due{Latest: base.Add(20 * time.Minute), Next: base.Add(25 * time.Minute)},
		},
		{
			name: "after is exclusive", cron: "@hourly",
			after: base, now: base.Add(30 * time.Minute),
			want: due{Next: base.Add(time.Hour)},
		},
		{
			name: "every counts from after", cron: "@every 2s",
			after: base.Add(500 * time.Millisecond), now: base.Add(7 * time.Second),
			want: due{Latest: base.Add(6 * time.Second), Next: base.Add(8 * time.Second)},
		},
		{
			name: "time zone", cron: "0 9 * * *", tz: "America/New_York",
			// 09:00 in New York on 10 March 2026 (EDT, UTC-4) is 13:00 UTC.
			after: base, now: base.Add(2 * time.Hour),
			want: due{Latest: base.Add(time.Hour), Next: base.Add(25 * time.Hour)},
		},
		{
			name: "a leap day, years ahead", cron: "0 0 29 2 *",
			after: base, now: base.Add(time.Hour),
			want: due{Next: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		},
		{
			name: "a year of seconds away", cron: "@every 1s",
			after: base, now: base.Add(365 * 24 * time.Hour),
			want: due{Latest: base.Add(365 * 24 * time.Hour), Next: base.Add(365*24*time.Hour + time.Second)},
		},
		{
			// Uneven gaps: the first two times are a day apart, the latest gap before now is the
			// weekend. A window guessed from the first gap alone would find nothing.
			name: "weekdays only, looked at on a Monday", cron: "0 9 * * 1-5",
			after: base, now: time.Date(2026, 3, 16, 8, 0, 0, 0, time.UTC),
			want: due{Latest: time.Date(2026, 3, 13, 9, 0, 0, 0, time.UTC), Next: time.Date(2026, 3, 16, 9, 0, 0, 0, time.UTC)},
		},
		{
			name: "thirty days of minutes away", cron: "* * * * *",
			after: base, now: base.Add(30*24*time.Hour + 30*time.Second),
			want: due{Latest: base.Add(30 * 24 * time.Hour), Next: base.Add(30*24*time.Hour + time.Minute)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dueRun(mustSchedule(t, tc.cron, tc.tz), tc.after, tc.now)
			if !got.Latest.Equal(tc.want.Latest) || !got.Next.Equal(tc.want.Next) {
				t.Errorf("dueRun = {Latest:%v Next:%v}, want {Latest:%v Next:%v}", got.Latest, got.Next, tc.want.Latest, tc.want.Next)
			}
		})
	}
}

// TestDueRunAgreesWithAWalk checks the one-pass search against walking every time, on
// schedules with even and uneven gaps.
func TestDueRunAgreesWithAWalk(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, cron := range []string{"*/7 * * * *", "0 9 * * 1-5", "30 6-16/4 * * 1-5", "0 0 1,15 * *", "@every 90s", "5 4 * * 0"} {
		s := mustSchedule(t, cron, "Europe/Berlin")
		for _, span := range []time.Duration{0, time.Minute, 37 * time.Minute, 5 * time.Hour, 3 * 24 * time.Hour, 40 * 24 * time.Hour} {
			now := start.Add(span)
			var want, next time.Time
			for t := s.Next(start); !t.IsZero(); t = s.Next(t) {
				if t.After(now) {
					next = t
					break
				}
				want = t
			}
			if got := dueRun(s, start, now); !got.Latest.Equal(want) || !got.Next.Equal(next) {
				t.Errorf("%s after %v: dueRun = %v / %v, walking says %v / %v", cron, span, got.Latest, got.Next, want, next)
			}
			var missed int32
			for t := s.Next(start); !t.IsZero() && t.Before(want); t = s.Next(t) {
				missed++
			}
			if !want.IsZero() {
				if got := missedBetween(s, start, want); got != missed {
					t.Errorf("%s after %v: missedBetween = %d, walking says %d", cron, span, got, missed)
				}
			}
		}
	}
}

func TestMissedBetween(t *testing.T) {
	base := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name          string
		cron          string
		after, before time.Time
		want          int32
	}{
		{"none between", "*/5 * * * *", base, base.Add(5 * time.Minute), 0},
		{"three between", "*/5 * * * *", base, base.Add(20 * time.Minute), 3},
		{"after is exclusive, before too", "@hourly", base, base.Add(3 * time.Hour), 2},
		{"thirty days of hours", "@hourly", base, base.Add(30 * 24 * time.Hour), 719},
		// Past the walk limit the count is extrapolated: a day of seconds.
		{"a day of seconds", "@every 1s", base, base.Add(24 * time.Hour), 86399},
	}
	for _, tc := range tests {
		if got := missedBetween(mustSchedule(t, tc.cron, ""), tc.after, tc.before); got != tc.want {
			t.Errorf("%s: missedBetween = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTooLate(t *testing.T) {
	at := time.Unix(1000, 0)
	tests := []struct {
		name     string
		now      time.Time
		deadline *int64
		want     bool
	}{
		{"no deadline", at.Add(time.Hour), nil, false},
		{"within", at.Add(10 * time.Second), ptr.To[int64](10), false},
		{"past", at.Add(11 * time.Second), ptr.To[int64](10), true},
	}
	for _, tc := range tests {
		if got := tooLate(at, tc.now, tc.deadline); got != tc.want {
			t.Errorf("%s: tooLate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHugeStartingDeadlineMeansNoDeadline: startingDeadlineSeconds has no maximum, and
// time.Duration(10_000_000_000) * time.Second overflows int64 to a negative duration, so every
// schedule time reads as past its deadline: the Task never runs (and Forbid never holds a time
// back). A deadline of 317 years must read as "no practical deadline".
func TestHugeStartingDeadlineMeansNoDeadline(t *testing.T) {
	for _, d := range []int64{10_000_000_000, 1 << 62, 1<<63 - 1} {
		task := newTask(scheduled(v1.AllowConcurrent), deadline(d))
		p := planRuns(task, analyze(task, nil, at(61)), nil, at(61))
		if p.create == nil || !p.create.Scheduled.Equal(at(60)) {
			t.Errorf("startingDeadlineSeconds %d: one second after the schedule time, create = %v, want the run for %s", d, p.create, at(60))
		}
	}
}

// TestMissedTimesAreCountedWithinTheStartingDeadline: a CronJob counts missed times only within
// startingDeadlineSeconds (mostRecentScheduleTime moves its earliest time up to now minus the
// deadline), so a CronJob with a deadline of 60s whose controller was away for three hours warns
// of no TooManyMissedTimes, and the Event's own advice, "set a lower startingDeadlineSeconds", is
// what silences it. Here the count runs from the last run whatever the deadline: the warning
// comes, and the advice it gives cannot make it go.
func TestMissedTimesAreCountedWithinTheStartingDeadline(t *testing.T) {
	task := newTask(scheduled(v1.AllowConcurrent), deadline(60), withStatus(v1.TaskStatus{
		ObservedGeneration: 1, LastScheduleTime: mtime(0), CurrentRun: run(0+60, 1, v1.RunSucceeded, 70),
		ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)},
	}))
	now := at(3*3600 + 5)
	p := planRuns(task, analyze(task, nil, now), nil, now)
	if p.create == nil {
		t.Fatalf("no run started three hours later")
	}
	if ev, ok := p.missedEvent(); ok && ev.Reason == v1.EventTooManyMissedTimes {
		t.Errorf("startingDeadlineSeconds 60, away 3h: %s %q; a CronJob counts only the times within the deadline and warns of none", ev.Reason, ev.Note)
	}
}
