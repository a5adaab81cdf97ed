// Package scenario holds the benchmark and fault scenarios. Each takes a running harness.Env,
// leaves the operator replicas it needs running, and returns a Result: rows for the results
// table plus violations, counts of things that must never happen (those of the invariant checker
// internal/testenv/invariants, failed reads, writes at rest).
package scenario

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/internal/testenv/invariants"
)

// Kind is what a scenario is for.
type Kind string

const (
	// Measurement scenarios produce the figures users judge the operator by.
	Measurement Kind = "measurement"
	// Fault scenarios break the operator on purpose and count what must never happen.
	Fault Kind = "fault"
	// Scale scenarios grow the cluster past what fits in `make bench` (make bench-scale).
	Scale Kind = "scale"
)

// Size is how much a scenario does. Each scenario reads the fields its row in All documents.
type Size struct {
	// Tasks is how many Tasks the scenario creates.
	Tasks int
	// Reps is how often it repeats its act.
	Reps int
	// Gap is its time knob.
	Gap time.Duration
	// Benchtime is go test -benchtime of the converter benchmarks; empty skips them.
	Benchtime string
	// Seed seeds its randomness.
	Seed uint64
	// Applied has the scenario's Tasks carry what `kubectl apply` writes on a Task it creates:
	// its last-applied-configuration annotation, the manifest as applied.
	Applied bool
}

func (s Size) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		set  bool
		val  any
	}{
		{"tasks", s.Tasks != 0, s.Tasks}, {"reps", s.Reps != 0, s.Reps}, {"gap", s.Gap != 0, s.Gap},
		{"benchtime", s.Benchtime != "", s.Benchtime}, {"seed", s.Seed != 0, s.Seed}, {"applied", s.Applied, s.Applied},
	} {
		if f.set {
			parts = append(parts, fmt.Sprintf("%s=%v", f.name, f.val))
		}
	}
	return strings.Join(parts, " ")
}

// Operators is the set of operator replicas a scenario starts from.
type Operators struct {
	Replicas    int
	LeaderElect bool
	// Fresh replaces the running replicas with new processes.
	Fresh bool
}

var (
	one      = Operators{Replicas: 1}
	oneFresh = Operators{Replicas: 1, Fresh: true}
	twoHA    = Operators{Replicas: 2, LeaderElect: true}
)

// Scenario is one row of All.
type Scenario struct {
	Name string
	Kind Kind
	// Operators run when Body starts; Body may change that.
	Operators Operators
	// Smoke is the size of the tests in bench/; Full the size of `make bench` and `make faults`.
	Smoke, Full Size
	// Body measures into r; its error means the scenario could not complete.
	Body func(ctx context.Context, e *harness.Env, s Size, r *Result) error
}

// All lists the scenarios in the order they run: the migration replaces the CRD and so runs
// last. The comment above a row says what its Size fields mean.
var All = []Scenario{
	// Tasks run to Succeeded at v1, with the raw Job create rate to compare.
	{"throughput", Measurement, one, Size{Tasks: 30}, Size{Tasks: 2000}, throughput},
	// Writes while Tasks (the throughput run's, or as many new) rest for Gap.
	{"idle", Measurement, one, Size{Tasks: 30, Gap: 10 * time.Second}, Size{Tasks: 2000, Gap: time.Minute}, idle},
	// LISTs of Tasks at every version, Reps per version; the converter's Go benchmarks at Benchtime.
	{"conversion", Measurement, one, Size{Tasks: 100, Reps: 2, Benchtime: "200x"}, Size{Tasks: 5000, Reps: 5, Benchtime: "1s"}, convert},
	// Peak RSS of a fresh operator with Tasks suspended Tasks and as many labelled Jobs in the
	// cluster, after Reps Tasks ran.
	{"memory", Measurement, oneFresh, Size{Tasks: 50, Reps: 20}, Size{Tasks: 10000, Reps: 200}, memory},
	// Reps SIGKILLs of the operator, a random 0..2×Gap apart (Seed), while Tasks run.
	{"kill", Fault, one, Size{Tasks: 20, Reps: 3, Gap: time.Second, Seed: 1}, Size{Tasks: 1000, Reps: 20, Gap: 3 * time.Second, Seed: 1}, kill},
	// The leader's SIGKILL while Tasks are created.
	{"failover", Fault, twoHA, Size{Tasks: 10}, Size{Tasks: 200}, failover},
	// Both replicas restarted in turn while Tasks are read at v1alpha1.
	{"rolling", Fault, twoHA, Size{Tasks: 5}, Size{Tasks: 50}, rolling},
	// Tasks queued through a Kueue ClusterQueue of Reps pods, against as many plain Jobs sent
	// straight to the same queue.
	{"queue", Measurement, one, Size{Tasks: 30, Reps: 5}, Size{Tasks: 1000, Reps: 50}, queue},
	// Suspended Tasks grown in three steps up to Tasks, in one namespace and over Reps: start,
	// handover and peak RSS at each step.
	{"scale", Scale, one, Size{Tasks: 30, Reps: 3}, Size{Tasks: 50000, Reps: 100}, scale},
	// Tasks stored at v1alpha1 migrated by each method; Reps (even) times each of the ceilings
	// with and without the Task's schemas and the marked no-webhook ceiling (againstCeiling), at
	// full size only when asked: two timings of each add about twelve minutes.
	{"migration", Measurement, one, Size{Tasks: 50, Reps: 2}, Size{Tasks: 10000}, migration},
}

// Run runs the scenario at size s, timing it.
func (sc Scenario) Run(ctx context.Context, e *harness.Env, s Size) *Result {
	began := time.Now()
	e.Logf("=== scenario %s (%s)", sc.Name, s)
	r := &Result{Scenario: sc.Name, Violations: map[string]int{}}
	r.Err = e.EnsureOperators(ctx, sc.Operators.Replicas, sc.Operators.LeaderElect, sc.Operators.Fresh)
	if r.Err == nil {
		r.Err = sc.Body(ctx, e, s, r)
	}
	r.Duration = time.Since(began)
	e.Logf("=== scenario %s done in %s: %s", sc.Name, r.Duration.Round(time.Second), r.Summary())
	return r
}

// Named returns the scenarios of All that names select, by name, by kind ("measurements",
// "faults") or "all", in the order of All.
func Named(names []string) ([]Scenario, error) {
	for _, n := range names {
		if !slices.ContainsFunc(All, func(sc Scenario) bool { return sc.selectedBy(n) }) {
			return nil, fmt.Errorf("unknown scenario %q (want one of %s, or measurements, faults, scales or all)", n, strings.Join(Names(), ", "))
		}
	}
	var out []Scenario
	for _, sc := range All {
		if slices.ContainsFunc(names, sc.selectedBy) {
			out = append(out, sc)
		}
	}
	return out, nil
}

func (sc Scenario) selectedBy(name string) bool {
	return name == "all" || name == sc.Name || name == string(sc.Kind)+"s"
}

// Names lists the names of All.
func Names() []string {
	names := make([]string, len(All))
	for i, sc := range All {
		names[i] = sc.Name
	}
	return names
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

// checkInvariants waits until the n Tasks in ns settle, then counts what must never happen with
// the invariant checker TestChaos uses too: every pod of these Tasks was meant to succeed.
func checkInvariants(ctx context.Context, e *harness.Env, ns string, n int, r *Result) error {
	if err := e.Settle(ctx, ns, timeoutFor(n, 30*time.Second, 10*time.Millisecond)); err != nil {
		return err
	}
	rep, err := e.Check(ctx, ns, invariants.Options{})
	if err != nil {
		return err
	}
	r.Addf("Tasks / Jobs checked", "", "%d / %d", rep.Tasks, rep.Jobs)
	for _, c := range invariants.Categories {
		r.Violation(string(c), rep.Counts[c], c.Means())
	}
	for _, ex := range rep.Examples {
		r.Add("example offender", ex, "")
	}
	return nil
}

// runTasks creates n Tasks named prefix-<i> in ns, trying failed creates again, and waits until
// every one is terminal.
func runTasks(ctx context.Context, e *harness.Env, ns, prefix string, n int) error {
	tr := e.Track(ctx, ns)
	defer tr.Stop()
	if _, err := e.CreateTasks(ctx, ns, prefix, n, e.Workers, true, nil); err != nil {
		return err
	}
	return tr.WaitTerminal(ctx, n, timeoutFor(n, 2*time.Minute, time.Second))
}

// writes are the write requests counted at one moment: by the operator's own clients, by
// method, and by the apiserver from every client, by resource and verb.
type writes struct {
	operator, apiserver map[string]float64
}

func countWrites(ctx context.Context, e *harness.Env, op *testenv.Operator) (writes, error) {
	var w writes
	var err error
	if w.operator, err = harness.OperatorWrites(ctx, op); err != nil {
		return w, err
	}
	w.apiserver, err = harness.APIServerWrites(ctx, e.Kube)
	return w, err
}

// since is what was written between before and w.
func (w writes) since(before writes) writes {
	return writes{operator: harness.Delta(before.operator, w.operator), apiserver: harness.Delta(before.apiserver, w.apiserver)}
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
