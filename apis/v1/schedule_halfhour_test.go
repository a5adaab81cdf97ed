package v1

import (
	"testing"
	"time"
)

// TestNextSkipsNoDayAcrossAHalfHourClockChange: Australia/Lord_Howe moves its clocks by half an
// hour. Next asked at a schedule time of a daily expression must answer the same wall time the
// next day, which exists once and is an ordinary day. robfig/cron's hour loop, stepping an hour
// at a time from a wall time the half-hour change moved to :30, lands on hh:30 and wraps past
// the wanted hh:00 into the day after.
func TestNextSkipsNoDayAcrossAHalfHourClockChange(t *testing.T) {
	loc, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cron string
		at   time.Time // a schedule time, wall clock in Lord Howe
		want time.Time // the next one, wall clock in Lord Howe
	}{
		{"0 0 * * *", time.Date(2026, 4, 5, 0, 0, 0, 0, loc), time.Date(2026, 4, 6, 0, 0, 0, 0, loc)},
		{"0 23 * * *", time.Date(2026, 4, 4, 23, 0, 0, 0, loc), time.Date(2026, 4, 5, 23, 0, 0, 0, loc)},
		{"0 3 * * *", time.Date(2026, 4, 4, 3, 0, 0, 0, loc), time.Date(2026, 4, 5, 3, 0, 0, 0, loc)},
		{"0 0 * * *", time.Date(2026, 10, 4, 0, 0, 0, 0, loc), time.Date(2026, 10, 5, 0, 0, 0, 0, loc)},
		{"0 3 * * *", time.Date(2026, 10, 3, 3, 0, 0, 0, loc), time.Date(2026, 10, 4, 3, 0, 0, 0, loc)},
	} {
		s, err := ParseSchedule(&Schedule{Cron: tc.cron, TimeZone: "Australia/Lord_Howe"})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Next(tc.at); !got.Equal(tc.want) {
			t.Errorf("%q in Australia/Lord_Howe: Next(%s) = %s, want %s: a day's run is skipped",
				tc.cron, tc.at.Format(time.RFC3339), got.In(loc).Format(time.RFC3339), tc.want.Format(time.RFC3339))
		}
	}
}
