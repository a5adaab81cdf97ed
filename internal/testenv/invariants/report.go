package invariants

import (
	"fmt"
	"strings"
)

// Category is one kind of violation: something that must never happen.
type Category string

// The categories, in the order a Report lists them.
const (
	Duplicates        Category = "duplicate Jobs"
	RerunAfterSuccess Category = "succeeded runs run again"
	ExtraPods         Category = "Jobs with more pods than parallelism"
	Orphans           Category = "orphaned Jobs"
	NonTerminal       Category = "non-terminal Tasks"
	UnexpectedFailure Category = "failed Tasks"
	WrongEnd          Category = "wrong final state"
	StatusLies        Category = "status disagreeing with Jobs"
	FinalizersLeft    Category = "finalizers left"
)

// Categories lists every Category in report order.
var Categories = []Category{Duplicates, RerunAfterSuccess, ExtraPods, Orphans, NonTerminal, UnexpectedFailure, WrongEnd, StatusLies, FinalizersLeft}

// Means says what a Category counts, for a report's reader.
func (c Category) Means() string {
	return map[Category]string{
		Duplicates:        "a second Job for one attempt, a Job name used twice, or more Jobs than attempts",
		RerunAfterSuccess: "an attempt after one of the same run completed",
		ExtraPods:         "a Job that ran more pods than its Task's parallelism",
		Orphans:           "Jobs whose owner Task does not exist",
		NonTerminal:       "neither Succeeded nor Failed at the end",
		UnexpectedFailure: "Failed, though set up to succeed",
		WrongEnd:          "Succeeded though set up to fail, or ended without any Job",
		StatusLies:        "currentRun, attempts, phase, conditions or kstatus not what the Jobs say",
		FinalizersLeft:    "a Task or Job still holding a finalizer",
	}[c]
}

// maxExamples is how many offenders a Report names.
const maxExamples = 10

// Report is what Check found: the violations by Category, a few named, and what was judged.
type Report struct {
	Counts map[Category]int
	// Examples names the first offenders, each with what it was judged from.
	Examples []string
	Stats
}

// Stats is what was judged.
type Stats struct {
	// Tasks and Jobs are the Tasks and operator Jobs listed at the end.
	Tasks, Jobs int
	// Seen is every Job judged (Input.Seen, or the Jobs listed); Runs the runs they make.
	Seen, Runs int
	// Retries are Jobs of attempts after the first; Completed and JobsFailed Jobs with that
	// outcome; CancelledAtSuccess Jobs deleted after their pod succeeded but before the Job
	// controller counted it (a failed attempt).
	Retries, Completed, JobsFailed, CancelledAtSuccess int
	// Succeeded and Failed count the Tasks in those phases.
	Succeeded, Failed int
}

func (r *Report) violate(c Category, n int, format string, args ...any) {
	r.Counts[c] += n
	if len(r.Examples) < maxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Violations is the total of every Category.
func (r *Report) Violations() int {
	n := 0
	for _, c := range Categories {
		n += r.Counts[c]
	}
	return n
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  judged                        %d Tasks (%d Succeeded, %d Failed), %d Jobs at the end\n", r.Tasks, r.Succeeded, r.Failed, r.Jobs)
	fmt.Fprintf(&b, "  Jobs (attempts) seen          %d for %d runs: %d retries; %d completed, %d failed\n", r.Seen, r.Runs, r.Retries, r.Completed, r.JobsFailed)
	fmt.Fprintf(&b, "  cancelled as their pod ended  %d (deleted before the Job controller counted the pod's success: a failed attempt)\n", r.CancelledAtSuccess)
	for _, c := range Categories {
		fmt.Fprintf(&b, "  %-36s  %d\n", c, r.Counts[c])
	}
	return b.String()
}
