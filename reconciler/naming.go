package reconciler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// maxNameLength bounds Job names and label values alike (v1.MaxJobNameLength).
const maxNameLength = v1.MaxJobNameLength

// runID names one attempt of one run of a Task. A one-shot Task has a single run whose attempts
// are retries; a scheduled Task has one run per schedule time, each with its own attempts.
type runID struct {
	// Scheduled is the schedule time the run is for; zero for a one-shot run.
	Scheduled time.Time
	// Attempt counts from 1; attempts after the first are retries. 0 means unknown.
	Attempt int32
}

func (r runID) isScheduled() bool { return !r.Scheduled.IsZero() }

// sameRun reports whether r and o are attempts of the same run.
func (r runID) sameRun(o runID) bool { return r.Scheduled.Equal(o.Scheduled) }

func (r runID) equal(o runID) bool { return r.sameRun(o) && r.Attempt == o.Attempt }

// scheduleKey is the run's schedule time in Unix seconds, 0 for a one-shot run.
func (r runID) scheduleKey() int64 {
	if !r.isScheduled() {
		return 0
	}
	return r.Scheduled.Unix()
}

// runLabel is the value of v1.LabelRun: the attempt for a one-shot run, the schedule time in Unix
// seconds for a scheduled one.
func (r runID) runLabel() string {
	if r.isScheduled() {
		return strconv.FormatInt(r.Scheduled.Unix(), 10)
	}
	return strconv.Itoa(int(r.Attempt))
}

// nameSuffix is what the run adds to the Task's name: always two numbers, the schedule time in
// Unix seconds (0 for a one-shot run) and the attempt, so "-0-3" is the third attempt of a
// one-shot Task and "-1767225600-1" the first attempt of a scheduled run. Because the suffix
// always has exactly two components, the Task's name is what is left once they are cut off
// from the right: two Tasks can never map to the same Job name.
func (r runID) nameSuffix() string {
	return fmt.Sprintf("-%d-%d", r.scheduleKey(), r.Attempt)
}

// less orders runs: by schedule time (one-shot first), then attempt.
func (r runID) less(o runID) bool {
	if !r.Scheduled.Equal(o.Scheduled) {
		return r.Scheduled.Before(o.Scheduled)
	}
	return r.Attempt < o.Attempt
}

func (r runID) String() string {
	if !r.isScheduled() {
		return fmt.Sprintf("attempt %d", r.Attempt)
	}
	return fmt.Sprintf("attempt %d of the run for %s", r.Attempt, r.Scheduled.UTC().Format(time.RFC3339))
}

// jobName is the deterministic name of the Job for a run (v1.JobName).
func jobName(taskName string, run runID) string {
	return v1.JobName(taskName, run.scheduleKey(), run.Attempt)
}

// runFromName reads the run back out of a Job name made by jobName for taskName. It is how a Job
// whose labels and annotations were stripped is still recognised; ok is false for any other
// name (another Task's Job, or one named by an earlier release).
func runFromName(taskName, name string) (runID, bool) {
	run, ok := runSuffix(name)
	if !ok || jobName(taskName, run) != name {
		return runID{}, false
	}
	return run, true
}

// runFromAnyName is runFromName that also reads the names earlier releases gave the same runs
// (earlierFitName: 63 characters kept whole, '-' and '.' trimmed off a cut). Those can be
// another Task's name under the current rule, so it is asked only of a Job already known to be
// this Task's, or, for one that lost its owner, together with its label and UID.
func runFromAnyName(taskName, name string) (runID, bool) {
	run, ok := runSuffix(name)
	if !ok || (jobName(taskName, run) != name && earlierFitName(taskName, run.nameSuffix(), maxNameLength) != name) {
		return runID{}, false
	}
	return run, true
}

// runSuffix reads the run off the two numbers a Job name ends in: "-<schedule>-<attempt>".
func runSuffix(name string) (runID, bool) {
	rest, attempt, ok := cutNumber(name)
	if !ok || attempt < 1 || attempt > 1<<31-1 {
		return runID{}, false
	}
	_, sched, ok := cutNumber(rest)
	if !ok {
		return runID{}, false
	}
	run := runID{Attempt: int32(attempt)}
	if sched != 0 {
		run.Scheduled = time.Unix(sched, 0).UTC()
	}
	return run, true
}

// cutNumber splits "<rest>-<decimal>" into rest and the number.
func cutNumber(s string) (string, int64, bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 || i == len(s)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(s[i+1:], "+") {
		return "", 0, false
	}
	return s[:i], n, true
}

// labelValue is name itself when it fits a label value (63 characters), else a cut of it plus a
// hash of the whole. Task names may be up to 253 characters. Unlike Job names, label values
// need not be unique: every reader of the label also checks the Job's controller.
// Its rule is the one earlier releases labelled their Jobs with, which are never relabelled.
func labelValue(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	return earlierFitName(name, "", maxNameLength)
}
