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
	base := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
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
			want: due{Latest: base.Add(20 * time.Minute), Passed: 3, Next: base.Add(25 * time.Minute)},
		},
		{
			name: "after is exclusive", cron: "@hourly",
			after: base, now: base.Add(30 * time.Minute),
			want: due{Next: base.Add(time.Hour)},
		},
		{
			name: "every counts from after", cron: "@every 2s",
			after: base.Add(500 * time.Millisecond), now: base.Add(7 * time.Second),
			want: due{Latest: base.Add(6 * time.Second), Passed: 2, Next: base.Add(8 * time.Second)},
		},
		{
			name: "time zone", cron: "0 9 * * *", tz: "America/New_York",
			// 09:00 in New York on 10 March 2026 (EDT, UTC-4) is 13:00 UTC.
			after: base, now: base.Add(2 * time.Hour),
			want: due{Latest: base.Add(time.Hour), Next: base.Add(25 * time.Hour)},
		},
		{
			name: "never matching schedule", cron: "0 0 30 2 *",
			after: base, now: base.Add(time.Hour),
			want: due{},
		},
		{
			name: "capped walk", cron: "@every 1s",
			after: base, now: base.Add(time.Duration(maxDueScan+50) * time.Second),
			want: due{Latest: base.Add(maxDueScan * time.Second), Passed: maxDueScan - 1, Next: base.Add((maxDueScan + 1) * time.Second), Capped: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dueRun(mustSchedule(t, tc.cron, tc.tz), tc.after, tc.now)
			if !got.Latest.Equal(tc.want.Latest) || got.Passed != tc.want.Passed || !got.Next.Equal(tc.want.Next) || got.Capped != tc.want.Capped {
				t.Errorf("dueRun = {Latest:%v Passed:%d Next:%v Capped:%v}, want {Latest:%v Passed:%d Next:%v Capped:%v}",
					got.Latest, got.Passed, got.Next, got.Capped, tc.want.Latest, tc.want.Passed, tc.want.Next, tc.want.Capped)
			}
		})
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
