package reconciler

import (
	"math"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// tooManyMissed is the number of missed schedule times past which a start is reported as
// TooManyMissedTimes rather than MissedRun, as a CronJob does.
const tooManyMissed = 100

// maxMissedWalk bounds the schedule times counted one by one; past it the count is extrapolated
// (a schedule of seconds and an operator that was down for days).
const maxMissedWalk = 10000

// due is what the schedule asks for at a given moment.
type due struct {
	// Latest is the latest schedule time in (after, now], the one a run may start for; zero if
	// none has come.
	Latest time.Time
	// Next is the first schedule time after now; zero if there is none.
	Next time.Time
}

// dueRun finds the latest schedule time in (after, now] and the first after now. It never walks
// the times in between one by one. The times of an "@every" schedule count from after, so they
// are computed; those of a cron expression do not depend on where the search starts, so it
// looks back from now over a window that doubles until the window holds a schedule time:
// catching up after days away costs a few dozen steps.
func dueRun(s v1.CronSchedule, after, now time.Time) due {
	first := s.Next(after)
	if first.IsZero() || first.After(now) {
		return due{Next: first}
	}
	if every := s.Every(); every > 0 {
		latest := first.Add(now.Sub(first) / every * every)
		return due{Latest: latest, Next: latest.Add(every)}
	}
	window := time.Second
	if second := s.Next(first); !second.IsZero() && second.Sub(first) > window {
		window = second.Sub(first)
	}
	for {
		from := after
		if window < now.Sub(after) {
			from = now.Add(-window)
		}
		if t := s.Next(from); !t.IsZero() && !t.After(now) {
			latest, next := lastUpTo(s, t, now)
			return due{Latest: latest, Next: next}
		}
		window *= 2
	}
}

// lastUpTo walks from t, a schedule time not after now, to the last one not after now, and
// returns it with the one after it. dueRun calls it on a window that holds few times.
func lastUpTo(s v1.CronSchedule, t, now time.Time) (latest, next time.Time) {
	for {
		n := s.Next(t)
		if n.IsZero() || n.After(now) {
			return t, n
		}
		t = n
	}
}

// missedBetween counts the schedule times strictly between after and before: the ones a run
// for before supersedes. "@every" schedules are counted by division; cron expressions are
// walked up to maxMissedWalk times and the rest is extrapolated from the spacing walked.
func missedBetween(s v1.CronSchedule, after, before time.Time) int32 {
	first := s.Next(after)
	if first.IsZero() || !first.Before(before) {
		return 0
	}
	if every := s.Every(); every > 0 {
		return clampInt32(int64(ceilDiv(before.Sub(first), every)))
	}
	var n int64
	for t := first; !t.IsZero() && t.Before(before); t = s.Next(t) {
		if n == maxMissedWalk {
			spacing := t.Sub(first) / time.Duration(n)
			if spacing <= 0 {
				break
			}
			return clampInt32(n + int64(ceilDiv(before.Sub(t), spacing)))
		}
		n++
	}
	return clampInt32(n)
}

func ceilDiv(d, by time.Duration) time.Duration { return (d + by - 1) / by }

func clampInt32(n int64) int32 { return int32(min(n, 1<<31-1)) }

// tooLate reports whether a run scheduled for t may no longer start at now.
func tooLate(t, now time.Time, startingDeadlineSeconds *int64) bool {
	if startingDeadlineSeconds == nil || *startingDeadlineSeconds > maxDeadlineSeconds {
		return false // a deadline past what a Duration holds (292 years) is none in practice
	}
	return now.Sub(t) > time.Duration(*startingDeadlineSeconds)*time.Second
}

// maxDeadlineSeconds is the largest startingDeadlineSeconds a time.Duration can hold; the API
// sets no maximum, and a larger one would overflow to a negative deadline.
const maxDeadlineSeconds = int64(math.MaxInt64 / int64(time.Second))

// deadlineStart is the earliest schedule time that may still start at now: now minus the
// starting deadline; zero without one.
func deadlineStart(now time.Time, startingDeadlineSeconds *int64) time.Time {
	if startingDeadlineSeconds == nil || *startingDeadlineSeconds > maxDeadlineSeconds {
		return time.Time{}
	}
	return now.Add(-time.Duration(*startingDeadlineSeconds) * time.Second)
}
