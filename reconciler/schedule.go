package reconciler

import (
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// maxDueScan bounds how many schedule times one reconcile walks through; past it (a schedule
// of seconds and an operator that was down for days) the rest are caught up on the next pass.
const maxDueScan = 10000

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
func dueRun(s v1.CronSchedule, after, now time.Time) due {
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
