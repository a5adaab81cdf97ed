package reconciler

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// maxNameLength keeps Job names usable as label values: the Job controller copies the name into
// the batch.kubernetes.io/job-name label of every pod.
const maxNameLength = 63

// runID names one run of a Task. A one-shot Task has a single run whose attempts are retries; a
// scheduled Task has one run per schedule time, each with its own attempts.
type runID struct {
	// Scheduled is the schedule time the run is for; zero for a one-shot Task.
	Scheduled time.Time
	// Attempt counts from 1; attempts after the first are retries.
	Attempt int32
}

func (r runID) isScheduled() bool { return !r.Scheduled.IsZero() }

// runLabel is the value of v1.LabelRun: the attempt for a one-shot run, the schedule time in Unix
// seconds for a scheduled one.
func (r runID) runLabel() string {
	if r.isScheduled() {
		return strconv.FormatInt(r.Scheduled.Unix(), 10)
	}
	return strconv.Itoa(int(r.Attempt))
}

// nameSuffix is what the run adds to the Task's name: "-3" for the third attempt of a one-shot
// Task, "-1767225600" for the first attempt of a scheduled run (Unix seconds, like a CronJob's
// minutes but precise enough for @every schedules) and "-1767225600-2" for its retry.
func (r runID) nameSuffix() string {
	if r.isScheduled() && r.Attempt > 1 {
		return fmt.Sprintf("-%d-%d", r.Scheduled.Unix(), r.Attempt)
	}
	return "-" + r.runLabel()
}

// less orders runs: by schedule time, then attempt.
func (r runID) less(o runID) bool {
	if !r.Scheduled.Equal(o.Scheduled) {
		return r.Scheduled.Before(o.Scheduled)
	}
	return r.Attempt < o.Attempt
}

// jobName is the deterministic name of the Job for a run: the Task's name plus the run's suffix.
// When that exceeds 63 characters the Task's name is cut and a hash of the whole name keeps
// different long names apart: "<cut name>-<8 hex>-<suffix>".
func jobName(taskName string, run runID) string {
	return fitName(taskName, run.nameSuffix(), maxNameLength)
}

// labelValue is name itself when it fits a label value (63 characters), else a cut of it plus a
// hash of the whole. Task names may be up to 253 characters.
func labelValue(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	return fitName(name, "", maxNameLength)
}

// fitName joins base and suffix, cutting base and adding its hash when the result would exceed
// limit. The cut never ends in '-' or '.', so the result stays a valid DNS label and label value.
func fitName(base, suffix string, limit int) string {
	if len(base)+len(suffix) <= limit {
		return base + suffix
	}
	hash := "-" + shortHash(base)
	keep := limit - len(suffix) - len(hash)
	if keep < 1 {
		keep = 1
	}
	cut := strings.TrimRight(base[:min(keep, len(base))], "-.")
	return cut + hash + suffix
}

// shortHash is 8 hex digits of the FNV-1a hash of s.
func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}
