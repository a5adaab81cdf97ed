package v1

import (
	"testing"
	"time"
)

// TestNextIsAlwaysAfterItsArgument: across the days clocks change, in zones that move them by
// an hour at 02:00 or 03:00, by half an hour (Lord_Howe), or at :45 (Chatham, where a daily
// 03:00 occurs twice and robfig/cron answers its first occurrence when asked during the
// second), Next asked at every minute of the day is strictly after what it was asked, and no
// later than the answer asked a minute before (it skips no schedule time).
func TestNextIsAlwaysAfterItsArgument(t *testing.T) {
	days := map[string][]string{
		"Pacific/Chatham":     {"2026-04-04", "2026-09-26"},
		"America/New_York":    {"2026-03-08", "2026-11-01"},
		"Australia/Lord_Howe": {"2026-04-05", "2026-10-04"},
		"Europe/London":       {"2026-03-29", "2026-10-25"},
	}
	for zone, dates := range days {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, cron := range []string{"0 3 * * *", "30 2 * * *", "0 * * * *", "*/20 1-4 * * *", "45 2 * * *"} {
			s, err := ParseSchedule(&Schedule{Cron: cron, TimeZone: zone})
			if err != nil {
				t.Fatal(err)
			}
			for _, date := range dates {
				day, _ := time.ParseInLocation(time.DateOnly, date, loc)
				from := day.Add(-12 * time.Hour).UTC()
				var previous time.Time
				for m := 0; m < 48*60; m++ {
					at := from.Add(time.Duration(m) * time.Minute)
					next := s.Next(at)
					if !next.After(at) {
						t.Fatalf("%s in %s: Next(%s) = %s, not after it", cron, zone, at, next.UTC())
					}
					if !previous.IsZero() && previous.After(at) && next.After(previous) {
						t.Fatalf("%s in %s: Next(%s) = %s skips %s, the answer a minute before", cron, zone, at, next.UTC(), previous.UTC())
					}
					previous = next
				}
			}
		}
	}
}
