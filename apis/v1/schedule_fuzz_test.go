package v1

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

var oddZones = []string{
	"Australia/Lord_Howe", "Pacific/Chatham", "America/St_Johns", "Asia/Kathmandu", "Europe/Dublin",
	"America/Santiago", "Africa/Casablanca", "Antarctica/Troll", "Asia/Tehran", "America/Havana",
}

var (
	cronMinutes = []string{"0", "0,30", "15", "*/15", "45", "30", "*/20", "0-5", "59", "*", "30,45"}
	cronHours   = []string{"*", "0", "1-3", "*/2", "2", "3", "0,12", "23", "1", "2-4", "22-23", "0-1"}
	cronDoms    = []string{"*", "1", "15", "1,15", "31", "*/10", "7-14", "28-31", "*", "*"}
	cronMonths  = []string{"*", "1", "3,10", "*/3", "4", "9-12", "2", "*", "*"}
	cronDows    = []string{"*", "0", "1-5", "6", "0,6", "5", "*", "*"}
)

const oracleHorizon = 400 * 24 * time.Hour

// nextOracle is the brute-force answer: the first minute-aligned instant after t whose wall
// clock in loc matches ss and whose wall time occurs exactly once; zero if none within
// oracleHorizon. matches and occursOnce are returned for the caller's checks.
type nextOracle struct {
	ss  *cron.SpecSchedule
	loc *time.Location
}

func (o nextOracle) matches(u time.Time) bool {
	l := u.In(o.loc)
	if l.Second() != 0 || l.Nanosecond() != 0 {
		return false
	}
	s := o.ss
	dom := 1<<uint(l.Day())&s.Dom != 0
	dow := 1<<uint(l.Weekday())&s.Dow != 0
	day := dom || dow
	if s.Dom&(1<<63) != 0 || s.Dow&(1<<63) != 0 {
		day = dom && dow
	}
	return 1<<uint(l.Minute())&s.Minute != 0 && 1<<uint(l.Hour())&s.Hour != 0 && day &&
		1<<uint(l.Month())&s.Month != 0
}

// occurrences is how many instants have u's wall time (minute precision) in loc.
func (o nextOracle) occurrences(u time.Time) int {
	l := u.In(o.loc)
	w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
	n := 0
	for d := -4 * time.Hour; d <= 4*time.Hour; d += 15 * time.Minute {
		v := u.Add(d).In(o.loc)
		if time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), 0, 0, time.UTC).Equal(w) {
			n++
		}
	}
	return n
}

func (o nextOracle) next(t time.Time) time.Time {
	end := t.Add(oracleHorizon)
	for u := t.Truncate(time.Minute).Add(time.Minute); u.Before(end); u = u.Add(time.Minute) {
		if o.matches(u) && o.occurrences(u) == 1 {
			return u
		}
	}
	return time.Time{}
}

// checkNext compares s.Next(t) with the oracle: "" when it agrees, a kind ("earlier: a
// repeated wall time") when it differs in a documented way, an error otherwise.
func checkNext(s CronSchedule, o nextOracle, t time.Time) (kind string, err error) {
	return checkNextWant(s, o, t, o.next(t))
}

func checkNextWant(s CronSchedule, o nextOracle, t, want time.Time) (kind string, err error) {
	got := s.Next(t)
	wall := func(u time.Time) string {
		if u.IsZero() {
			return "zero"
		}
		return u.In(o.loc).Format("2006-01-02T15:04:05-07:00 Mon") + " (" + u.UTC().Format(time.RFC3339) + ")"
	}
	describe := fmt.Sprintf("Next(%s) = %s, oracle %s", wall(t), wall(got), wall(want))
	switch {
	case got.IsZero() && want.IsZero():
		return "", nil
	case got.IsZero():
		return "", fmt.Errorf("zero: %s", describe)
	case !got.After(t):
		return "", fmt.Errorf("not after t: %s", describe)
	case !o.matches(got) && tolerateGapAnswer && atAClockChange(got, o.loc):
		return "a clock change's instant, its wall clock not matching", nil
	case !o.matches(got):
		return "", fmt.Errorf("does not match the expression: %s", describe)
	case !want.IsZero() && got.After(want):
		return "", fmt.Errorf("skips a once-occurring time: %s", describe)
	case want.IsZero() && got.Before(t.Add(oracleHorizon)) && o.occurrences(got) == 1:
		return "", fmt.Errorf("oracle found nothing: %s", describe)
	case got.Equal(want):
		return "", nil
	}
	// got is before want, matches, and is after t: its wall time is not once-occurring.
	return fmt.Sprintf("earlier: a wall time occurring %d times", o.occurrences(got)), nil
}

// tolerateGapAnswer lets the fuzzer go past the defect TestNextAnswersOnlyWallTimesTheExpressionNames
// pins (the instant of a clock change answered for a wall time in its gap).
var tolerateGapAnswer = true

func atAClockChange(u time.Time, loc *time.Location) bool {
	_, a := u.Add(-time.Second).In(loc).Zone()
	_, b := u.In(loc).Zone()
	return a != b
}

func cronOf(mi, h, dom, mo, dow uint8) string {
	return strings.Join([]string{cronMinutes[int(mi)%len(cronMinutes)], cronHours[int(h)%len(cronHours)],
		cronDoms[int(dom)%len(cronDoms)], cronMonths[int(mo)%len(cronMonths)], cronDows[int(dow)%len(cronDows)]}, " ")
}

// FuzzNextIsTheFirstOnceOccurringMatchingWallTime: for a five-field expression of small sets,
// a zone of odd clock changes and a time in 2026-2027, Next is after t, matches the expression
// and skips no matching wall time that occurs once that day; it may answer earlier only with a
// repeated wall time.
func FuzzNextIsTheFirstOnceOccurringMatchingWallTime(f *testing.F) {
	f.Add(uint8(1), uint8(2), uint8(0), uint8(0), uint8(0), uint8(0), uint32(0), uint8(0))    // 0,30 1-3 * * *
	f.Add(uint8(2), uint8(3), uint8(0), uint8(0), uint8(2), uint8(1), uint32(5000), uint8(0)) // 15 */2 * * 1-5
	f.Add(uint8(0), uint8(1), uint8(1), uint8(0), uint8(0), uint8(5), uint32(9000), uint8(7)) // 0 0 1 * *
	f.Fuzz(func(t *testing.T, mi, h, dom, mo, dow, zone uint8, minutes uint32, seconds uint8) {
		expr := cronOf(mi, h, dom, mo, dow)
		name := oddZones[int(zone)%len(oddZones)]
		s, err := ParseSchedule(&Schedule{Cron: expr, TimeZone: name})
		if err != nil {
			return
		}
		spec, _ := cronParser.Parse(expr)
		o := nextOracle{spec.(*cron.SpecSchedule), s.loc}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(minutes%(2*365*24*60))*time.Minute +
			time.Duration(seconds%61)*time.Second)
		if _, err := checkNext(s, o, at); err != nil {
			t.Fatalf("%q in %s: %v", expr, name, err)
		}
	})
}

// TestNextAroundEveryClockChangeOfTheOddZones sweeps Next asked every 5 minutes from 26 hours
// before to 26 hours after each change of UTC offset in 2026-2027 in each odd zone, for a fixed
// list of expressions, and reports every disagreement with the oracle; the documented kinds
// (an earlier, repeated wall time) are counted and logged.
func TestNextAroundEveryClockChangeOfTheOddZones(t *testing.T) {
	exprs := []string{"0,30 1-3 * * *", "15 */2 * * 1-5", "0 0 1 * *", "0 0 * * *", "30 0 * * *", "0 1 * * *",
		"0 2 * * *", "30 2 * * *", "45 2 * * *", "0 3 * * *", "0 23 * * *", "30 23 * * *", "*/15 * * * *", "0 0 * * 0", "0 0 * * 6", "59 23 * * *"}
	sweepNext(t, exprs, 5*time.Minute)
}

// TestNextAroundEveryClockChangeForEveryMinuteAndHourField: the same sweep, every 15 minutes,
// for every pair of the fuzzer's minute and hour fields, every day.
func TestNextAroundEveryClockChangeForEveryMinuteAndHourField(t *testing.T) {
	var exprs []string
	for _, m := range cronMinutes {
		for _, h := range cronHours {
			exprs = append(exprs, m+" "+h+" * * *")
		}
	}
	sweepNext(t, exprs, 15*time.Minute)
}

func sweepNext(t *testing.T, exprs []string, step time.Duration) {
	start, end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)
	kinds := map[string]int{}
	failures := map[string][]string{}
	for _, name := range oddZones {
		loc, _ := time.LoadLocation(name)
		var changes []time.Time
		_, prev := start.In(loc).Zone()
		for u := start; u.Before(end); u = u.Add(15 * time.Minute) {
			if _, off := u.In(loc).Zone(); off != prev {
				changes, prev = append(changes, u), off
			}
		}
		t.Logf("%s: %d changes in 2026-2027", name, len(changes))
		for _, expr := range exprs {
			s, err := ParseSchedule(&Schedule{Cron: expr, TimeZone: name})
			if err != nil {
				t.Fatal(err)
			}
			spec, _ := cronParser.Parse(expr)
			o := nextOracle{spec.(*cron.SpecSchedule), loc}
			for _, c := range changes {
				var times []time.Time
				for u := c.Add(-26 * time.Hour).Truncate(time.Minute); u.Before(c.Add(26*time.Hour + 40*24*time.Hour)); u = u.Add(time.Minute) {
					if o.matches(u) && o.occurrences(u) == 1 {
						times = append(times, u)
					}
				}
				for at := c.Add(-26 * time.Hour); at.Before(c.Add(26 * time.Hour)); at = at.Add(step) {
					i := sort.Search(len(times), func(i int) bool { return times[i].After(at) })
					if i == len(times) {
						t.Fatalf("no oracle time within 40 days of %s for %q", at, expr)
					}
					kind, err := checkNextWant(s, o, at, times[i])
					key := name + " " + expr
					if err != nil {
						failures[key] = append(failures[key], err.Error())
					}
					if kind != "" {
						kinds[key+": "+kind]++
					}
				}
			}
		}
	}
	var keys []string
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("documented: %s: %d starts", k, kinds[k])
	}
	keys = keys[:0]
	for k := range failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s: %d failures, first: %s", k, len(failures[k]), failures[k][0])
	}
}

// TestNextOfAYearlyExpressionTakesLittleTime reports how long Next takes on "0 0 1 1 *" in each
// odd zone, from starts spread over 2026-2027 (figures, no assertion).
func TestNextOfAYearlyExpressionTakesLittleTime(t *testing.T) {
	for _, name := range append([]string{"UTC"}, oddZones...) {
		s, err := ParseSchedule(&Schedule{Cron: "0 0 1 1 *", TimeZone: name})
		if err != nil {
			t.Fatal(err)
		}
		var ds []time.Duration
		for d := 0; d < 730; d += 7 {
			at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).AddDate(0, 0, d)
			begin := time.Now()
			_ = s.Next(at)
			ds = append(ds, time.Since(begin))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("%-22s Next(\"0 0 1 1 *\"): median %v, p90 %v, max %v over %d starts", name, ds[len(ds)/2], ds[len(ds)*9/10], ds[len(ds)-1], len(ds))
	}
}

// TestNextAnswersOnlyWallTimesTheExpressionNames: Pacific/Chatham moves its clocks from 02:45 to
// 03:45 on 2026-09-27, so "45 2 * * *" has no time that day. Next must answer a time whose wall
// clock reads 02:45 (the next day's), not 03:45.
func TestNextAnswersOnlyWallTimesTheExpressionNames(t *testing.T) {
	loc, _ := time.LoadLocation("Pacific/Chatham")
	s, err := ParseSchedule(&Schedule{Cron: "45 2 * * *", TimeZone: "Pacific/Chatham"})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{
		time.Date(2026, 9, 26, 2, 45, 0, 0, loc), // the schedule time the day before
		time.Date(2026, 9, 26, 12, 0, 0, 0, loc),
		time.Date(2026, 9, 27, 1, 0, 0, 0, loc),
	} {
		got := s.Next(at).In(loc)
		raw := s.cron.Next(at.In(loc)).In(loc)
		if got.Hour() != 2 || got.Minute() != 45 {
			t.Errorf("Next(%s) = %s (robfig/cron alone: %s), not a 02:45", at.Format(time.RFC3339), got.Format(time.RFC3339), raw.Format(time.RFC3339))
		}
	}
}

// TestNextAnswersTheScheduledHourAroundAClockChange: Next's answer must read the hour the
// expression names on the zone's wall clock. Asked at a schedule time the day before (or an hour
// after it), the next run of a daily expression is the same wall time the next day, which
// occurs once: in Pacific/Chatham 03:59 on 2026-04-05 (clocks go back from 03:45 to 02:45, so
// 03:59 comes once), in Australia/Lord_Howe 01:45 on 2026-10-05 (the day after clocks go from
// 02:00 to 02:30).
func TestNextAnswersTheScheduledHourAroundAClockChange(t *testing.T) {
	for _, tc := range []struct {
		zone, cron string
		at, want   [6]int // y m d hh mm, wall clock in zone; [5] unused
	}{
		{"Pacific/Chatham", "59 3 * * *", [6]int{2026, 4, 4, 4, 0}, [6]int{2026, 4, 5, 3, 59}},
		{"Pacific/Chatham", "59 3 * * *", [6]int{2026, 4, 4, 3, 59}, [6]int{2026, 4, 5, 3, 59}},
		{"Australia/Lord_Howe", "45 1 * * *", [6]int{2026, 10, 4, 1, 45}, [6]int{2026, 10, 5, 1, 45}},
		{"Australia/Lord_Howe", "*/20 1 * * *", [6]int{2026, 10, 4, 1, 45}, [6]int{2026, 10, 5, 1, 0}},
	} {
		loc, _ := time.LoadLocation(tc.zone)
		s, err := ParseSchedule(&Schedule{Cron: tc.cron, TimeZone: tc.zone})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(tc.at[0], time.Month(tc.at[1]), tc.at[2], tc.at[3], tc.at[4], 0, 0, loc)
		want := time.Date(tc.want[0], time.Month(tc.want[1]), tc.want[2], tc.want[3], tc.want[4], 0, 0, loc)
		got := s.Next(at)
		if !got.Equal(want) {
			raw := s.cron.Next(at.In(loc))
			t.Errorf("%q in %s: Next(%s) = %s, want %s (robfig/cron alone: %s; Next of the answer: %s)", tc.cron, tc.zone,
				at.Format(time.RFC3339), got.In(loc).Format(time.RFC3339), want.Format(time.RFC3339),
				raw.In(loc).Format(time.RFC3339), s.Next(got).In(loc).Format(time.RFC3339))
		}
	}
}

// TestNextAroundEveryClockChangeForDayRestrictedExpressions: the sweep for expressions that
// name days of the week or of the month, whose day loop robfig/cron steps from midnight (which
// America/Santiago and America/Havana skip).
func TestNextAroundEveryClockChangeForDayRestrictedExpressions(t *testing.T) {
	var exprs []string
	for _, m := range []string{"0", "30", "59"} {
		for _, h := range []string{"0", "1", "12", "23", "0-1"} {
			for _, d := range []string{"* * 0", "* * 6", "* * 1-5", "1 * *", "8 * *", "6-8 * *", "5-6 * 0"} {
				exprs = append(exprs, m+" "+h+" "+d)
			}
		}
	}
	sweepNext(t, exprs, 15*time.Minute)
}

// TestNextKeepsToTheScheduledDayWhenMidnightIsSkipped: America/Havana (2026-03-08) and
// America/Santiago (2026-09-06) move their clocks from 00:00 to 01:00 on a Sunday. A schedule
// for Saturdays (or the 7th) asked on the Saturday after its time must answer the next
// Saturday (the next 7th), not the Sunday: robfig/cron's hour loop steps from Saturday 23:00 to
// Sunday 01:00, never sees hour 0, and so never checks the day again.
func TestNextKeepsToTheScheduledDayWhenMidnightIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		zone, cron string
		at, want   [5]int // y m d hh mm, wall clock in zone
	}{
		{"America/Havana", "0 12 * * 6", [5]int{2026, 3, 7, 12, 0}, [5]int{2026, 3, 14, 12, 0}},
		{"America/Santiago", "0 12 * * 6", [5]int{2026, 9, 5, 12, 0}, [5]int{2026, 9, 12, 12, 0}},
		{"America/Havana", "0 12 7 * *", [5]int{2026, 3, 7, 12, 0}, [5]int{2026, 4, 7, 12, 0}},
		{"America/Santiago", "30 1 * * 6", [5]int{2026, 9, 5, 1, 30}, [5]int{2026, 9, 12, 1, 30}},
	} {
		loc, _ := time.LoadLocation(tc.zone)
		s, err := ParseSchedule(&Schedule{Cron: tc.cron, TimeZone: tc.zone})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(tc.at[0], time.Month(tc.at[1]), tc.at[2], tc.at[3], tc.at[4], 0, 0, loc)
		want := time.Date(tc.want[0], time.Month(tc.want[1]), tc.want[2], tc.want[3], tc.want[4], 0, 0, loc)
		if got := s.Next(at); !got.Equal(want) {
			raw := s.cron.Next(at.In(loc))
			t.Errorf("%q in %s: Next(%s) = %s, want %s (robfig/cron alone: %s)", tc.cron, tc.zone,
				at.Format(time.RFC3339+" Mon"), got.In(loc).Format(time.RFC3339+" Mon"), want.Format(time.RFC3339+" Mon"),
				raw.In(loc).Format(time.RFC3339+" Mon"))
		}
	}
}

// TestNextAtARepeatedWallTimeIsLogged documents (no assertion) what Next answers around a wall
// time that occurs twice: asked before it, and at its first occurrence.
func TestNextAtARepeatedWallTimeIsLogged(t *testing.T) {
	for _, tc := range []struct {
		zone, cron string
		day        string
	}{
		{"Europe/Dublin", "0 1 * * *", "2026-10-25"},
		{"Pacific/Chatham", "0 3 * * *", "2026-04-05"},
		{"Antarctica/Troll", "30 2 * * *", "2026-10-25"},
		{"America/Havana", "30 0 * * *", "2026-11-01"},
		{"America/Santiago", "30 23 * * *", "2026-04-04"},
		{"Africa/Casablanca", "30 2 * * *", "2026-02-15"},
	} {
		loc, _ := time.LoadLocation(tc.zone)
		s, _ := ParseSchedule(&Schedule{Cron: tc.cron, TimeZone: tc.zone})
		day, _ := time.ParseInLocation(time.DateOnly, tc.day, loc)
		first := s.Next(day.Add(-2 * time.Hour))
		second := s.Next(first)
		third := s.Next(second)
		f := func(u time.Time) string { return u.In(loc).Format("2006-01-02T15:04-07:00") }
		t.Logf("%-18s %-12q from %s: %s, then %s, then %s", tc.zone, tc.cron, f(day.Add(-2*time.Hour)), f(first), f(second), f(third))
	}
}
