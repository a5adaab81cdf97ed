package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// Time zones must resolve even in an image without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	v1 "example.com/task-operator/apis/v1"
)

// maxDueScan bounds how many schedule times one reconcile walks through; past it (a schedule
// of seconds and an operator that was down for days) the rest are caught up on the next pass.
const maxDueScan = 10000

// schedule is a parsed spec.schedule: the cron schedule evaluated in the Task's time zone.
type schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// Next is the first schedule time strictly after t, or the zero time if there is none.
func (s schedule) Next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.loc))
}

// parseSchedule reads a five-field cron expression or descriptor (@hourly, @every 5m) and the
// IANA time zone (empty is UTC).
func parseSchedule(s *v1.Schedule) (schedule, error) {
	if s == nil {
		return schedule{}, errors.New("no schedule")
	}
	spec := strings.TrimSpace(s.Cron)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return schedule{}, fmt.Errorf("cron %q: set the time zone in spec.schedule.timeZone, not in the expression", s.Cron)
	}
	c, err := cron.ParseStandard(spec)
	if err != nil {
		return schedule{}, fmt.Errorf("cron %q: %w", s.Cron, err)
	}
	loc := time.UTC
	if s.TimeZone != "" {
		if loc, err = time.LoadLocation(s.TimeZone); err != nil {
			return schedule{}, fmt.Errorf("time zone %q: %w", s.TimeZone, err)
		}
	}
	return schedule{cron: c, loc: loc}, nil
}

// due is what the schedule asks for at a given moment.
type due struct {
	// Latest is the latest schedule time in (after, now], the one a run may start for; zero if
	// none has come.
	Latest time.Time
	// Passed counts the earlier schedule times in (after, now] that Latest supersedes.
	Passed int32
	// Next is the first schedule time after Latest (after now unless Capped); zero if none.
	Next time.Time
	// Capped says the walk stopped at maxDueScan times; Latest is then not the latest.
	Capped bool
}

// dueRun walks the schedule times after `after` up to now.
func dueRun(s schedule, after, now time.Time) due {
	var d due
	t := s.Next(after)
	for n := 0; !t.IsZero() && !t.After(now); n++ {
		if n == maxDueScan {
			d.Capped = true
			break
		}
		if !d.Latest.IsZero() {
			d.Passed++
		}
		d.Latest = t
		t = s.Next(t)
	}
	d.Next = t
	return d
}

// tooLate reports whether a run scheduled for t may no longer start at now.
func tooLate(t, now time.Time, startingDeadlineSeconds *int64) bool {
	if startingDeadlineSeconds == nil {
		return false
	}
	return now.Sub(t) > time.Duration(*startingDeadlineSeconds)*time.Second
}
