package v1

import (
	"archive/zip"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// TestNextSkipsNoWallTimeThatOccursOnceInAnyZone: in every IANA zone Go knows, around every
// change of UTC offset in 2026, Next asked at any minute answers no later than the first
// schedule time after it whose wall time occurs exactly once that day (neither in a gap nor in a
// repeated hour), for daily and hourly expressions. A later answer skips a run.
func TestNextSkipsNoWallTimeThatOccursOnceInAnyZone(t *testing.T) {
	z, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("the list of zones: %v", err)
	}
	var zones []string
	for _, f := range z.File {
		if !strings.HasSuffix(f.Name, "/") && f.Name[0] >= 'A' && f.Name[0] <= 'Z' && !strings.HasPrefix(f.Name, "Etc/") {
			zones = append(zones, f.Name)
		}
	}
	z.Close()
	crons := []string{"0 0 * * *", "15 0 * * *", "0 1 * * *", "0 2 * * *", "0 3 * * *", "0 4 * * *", "0 23 * * *", "45 2 * * *", "0 * * * *"}
	start, end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	var failures []string
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			continue
		}
		var changes []time.Time
		_, prev := start.In(loc).Zone()
		for u := start; u.Before(end); u = u.Add(15 * time.Minute) {
			if _, off := u.In(loc).Zone(); off != prev {
				changes, prev = append(changes, u), off
			}
		}
		for _, expr := range crons {
			s, err := ParseSchedule(&Schedule{Cron: expr, TimeZone: zone})
			if err != nil {
				t.Fatal(err)
			}
			spec, _ := cronParser.Parse(expr)
			ss := spec.(*cron.SpecSchedule)
			occursOnce := func(u time.Time) bool { // its wall time maps back to u alone
				l := u.In(loc)
				w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
				n := 0
				for d := -3 * time.Hour; d <= 3*time.Hour; d += 15 * time.Minute {
					v := u.Add(d).In(loc)
					if time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), 0, 0, time.UTC).Equal(w) {
						n++
					}
				}
				return n == 1
			}
			matches := func(u time.Time) bool {
				l := u.In(loc)
				return 1<<uint(l.Minute())&ss.Minute != 0 && 1<<uint(l.Hour())&ss.Hour != 0
			}
			for _, c := range changes {
				from, to := c.Add(-30*time.Hour).Truncate(time.Minute), c.Add(30*time.Hour)
				var times []time.Time
				for u := from; u.Before(to.Add(50 * time.Hour)); u = u.Add(time.Minute) {
					if matches(u) && occursOnce(u) {
						times = append(times, u)
					}
				}
				for at := from; at.Before(to); at = at.Add(time.Minute) {
					var want time.Time
					for _, x := range times {
						if x.After(at) {
							want = x
							break
						}
					}
					if got := s.Next(at); !want.IsZero() && got.After(want) {
						failures = append(failures, fmt.Sprintf("%s %q: Next(%s) = %s, skips %s",
							zone, expr, at.In(loc).Format(time.RFC3339), got.In(loc).Format(time.RFC3339), want.In(loc).Format(time.RFC3339)))
						break
					}
				}
			}
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
}
