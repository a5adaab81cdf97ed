// Package scenario holds the benchmark and fault scenarios. Each takes a running harness.Env,
// leaves the operator replicas it needs running, and returns a Result: rows for the results
// table plus violations, counts of things that must never happen (duplicate or orphaned Jobs,
// unfinished Tasks, failed reads, writes at rest).
package scenario

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"example.com/task-operator/bench/harness"
)

// Sizes are the knobs of all scenarios.
type Sizes struct {
	// Workers is the number of concurrent client goroutines creating objects.
	Workers int
	// Tasks is the throughput run's size; the idle scenario measures those Tasks at rest.
	Tasks int
	// Idle is how long writes at rest are counted.
	Idle time.Duration
	// ListTasks Tasks are LISTed at each version, ListReps times.
	ListTasks, ListReps int
	// ConvBenchtime is passed to go test -benchtime for the conversion Go benchmarks; empty
	// skips them.
	ConvBenchtime string
	// MigrateTasks v1alpha1-stored Tasks are migrated by each method.
	MigrateTasks int
	// MemoryTasks Tasks run to completion before the operator's peak RSS is read.
	MemoryTasks int
	// KillTasks Tasks run while the operator is SIGKILLed Kills times, a random 0..2×KillGap
	// apart; Seed seeds the randomness.
	KillTasks, Kills int
	KillGap          time.Duration
	Seed             uint64
	// FailoverTasks are created around the leader's death.
	FailoverTasks int
	// RollingTasks are read at v1alpha1 during the rolling restart.
	RollingTasks int
}

// Full are the sizes the brief asks for.
func Full() Sizes {
	return Sizes{
		Workers: 32, Tasks: 2000, Idle: 60 * time.Second, ListTasks: 5000, ListReps: 5, ConvBenchtime: "1s",
		MigrateTasks: 10000, MemoryTasks: 10000, KillTasks: 1000, Kills: 20, KillGap: 3 * time.Second,
		Seed: 1, FailoverTasks: 200, RollingTasks: 50,
	}
}

// Smoke are the sizes of the tests in bench/.
func Smoke() Sizes {
	return Sizes{
		Workers: 8, Tasks: 30, Idle: 10 * time.Second, ListTasks: 100, ListReps: 2, ConvBenchtime: "200x",
		MigrateTasks: 50, MemoryTasks: 50, KillTasks: 20, Kills: 3, KillGap: time.Second,
		Seed: 1, FailoverTasks: 10, RollingTasks: 5,
	}
}

// Row is one line of the results table.
type Row struct {
	Scenario, Metric, Value, Note string
}

// Result is what a scenario measured.
type Result struct {
	Scenario string
	Rows     []Row
	// Violations must all be 0; the key says what was counted.
	Violations map[string]int
	// Err is set when the scenario could not complete; its rows so far stay.
	Err      error
	Duration time.Duration
}

func newResult(name string) *Result {
	return &Result{Scenario: name, Violations: map[string]int{}}
}

// Add appends a row.
func (r *Result) Add(metric, value, note string) {
	r.Rows = append(r.Rows, Row{Scenario: r.Scenario, Metric: metric, Value: value, Note: note})
}

// Addf appends a row with a formatted value.
func (r *Result) Addf(metric, note, format string, args ...any) {
	r.Add(metric, fmt.Sprintf(format, args...), note)
}

// Violation records a count that must be 0, as a row too.
func (r *Result) Violation(what string, n int, note string) {
	r.Violations[what] += n
	r.Add(what, fmt.Sprint(n), note)
}

// Failed reports whether the scenario errored or counted a violation.
func (r *Result) Failed() bool {
	if r.Err != nil {
		return true
	}
	for _, n := range r.Violations {
		if n != 0 {
			return true
		}
	}
	return false
}

// Summary is one line: the violations, and the error if any.
func (r *Result) Summary() string {
	keys := make([]string, 0, len(r.Violations))
	for k := range r.Violations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Violations[k]))
	}
	s := r.Scenario + ": " + strings.Join(parts, ", ")
	if r.Err != nil {
		s += "; error: " + r.Err.Error()
	}
	return s
}

func (r *Result) consistency(c harness.Consistency) {
	r.Addf("Tasks / Jobs checked", "", "%d / %d", c.Tasks, c.Jobs)
	r.Violation("duplicate Jobs", c.Duplicates, "a second Job for one attempt, or more Jobs than attempts")
	r.Violation("orphaned Jobs", c.Orphans, "Jobs whose owner Task does not exist")
	r.Violation("non-terminal Tasks", c.NonTerminal, "neither Succeeded nor Failed at the end")
	r.Violation("failed Tasks", c.Failed, "every pod was meant to succeed")
	for _, ex := range c.Examples {
		r.Add("example offender", ex, "")
	}
}

// Func is a scenario.
type Func func(ctx context.Context, e *harness.Env, s Sizes) *Result

// All lists the scenarios in the order they run: the migration replaces the CRD and so runs
// after the other measurements.
var All = []struct {
	Name  string
	Fault bool
	Run   Func
}{
	{"throughput", false, Throughput},
	{"idle", false, Idle},
	{"conversion", false, Conversion},
	{"memory", false, Memory},
	{"kill", true, Kill},
	{"failover", true, Failover},
	{"rolling", true, Rolling},
	{"migration", false, Migration},
}

// Run runs f, timing it and turning a panic-free error path into Result.Err.
func Run(ctx context.Context, e *harness.Env, s Sizes, name string, f Func) *Result {
	began := time.Now()
	e.Logf("=== scenario %s", name)
	r := f(ctx, e, s)
	r.Duration = time.Since(began)
	e.Logf("=== scenario %s done in %s: %s", name, r.Duration.Round(time.Second), r.Summary())
	return r
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// timeoutFor scales a wait with the number of objects: base plus per each.
func timeoutFor(n int, base, per time.Duration) time.Duration {
	return base + time.Duration(n)*per
}

func methods(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
