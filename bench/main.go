// Command bench measures the operator on a local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and KWOK fake nodes, see internal/testenv) with the
// operator binary running outside the cluster, and prints a markdown results table.
//
//	go run ./bench                                # the five measurements at full size
//	go run ./bench -scenarios faults              # the three fault scenarios
//	go run ./bench -scenarios scale               # 50,000 Tasks (make bench-scale)
//	go run ./bench -scenarios all -tasks 500      # everything, smaller throughput run
//
// Scenarios: throughput, idle, conversion, memory, migration (the measurements) and kill,
// failover, rolling (the faults). Progress goes to stderr, the table to stdout. The exit code
// is 1 when a scenario failed or counted a violation (a duplicate or orphaned Job, an unfinished
// Task, a failed read, a write at rest).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/bench/scenario"
	"example.com/task-operator/internal/testenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// sizeFlags set one Size field of some scenarios each.
var sizeFlags = []struct {
	name, usage string
	scenarios   []string
	field       sizeField
}{
	{"tasks", "Tasks in the throughput run (also measured at rest by idle)", []string{"throughput", "idle"}, tasks},
	{"list-tasks", "Tasks in each conversion LIST", []string{"conversion"}, tasks},
	{"list-reps", "LISTs per version", []string{"conversion"}, reps},
	{"conversion-benchtime", "go test -benchtime of the converter benchmarks, or none", []string{"conversion"}, benchtime},
	{"migrate-tasks", "v1alpha1-stored Tasks migrated by each method", []string{"migration"}, tasks},
	{"migrate-schema-ceilings", "timings each of the arms that split goal 2 into factors: the rewrite ceilings with and without the Task's schemas (Task-shaped Floors, no webhook) and the no-webhook ceiling with each write marked, D E F F E D between two timings of the same-calls floor, then the rename-only ceiling; an even count, 0 (A B B A alone) at full size", []string{"migration"}, pairedTimings},
	{"memory-tasks", "Tasks run before the peak RSS is read", []string{"memory"}, tasks},
	{"memory-applied", "give the memory scenario's Tasks kubectl apply's last-applied-configuration annotation, as Tasks a user applied carry", []string{"memory"}, applied},
	{"idle", "idle window", []string{"idle"}, gap},
	{"kill-tasks", "Tasks run while the operator is killed", []string{"kill"}, tasks},
	{"kills", "SIGKILLs of the operator", []string{"kill"}, reps},
	{"kill-gap", "mean gap between SIGKILLs", []string{"kill"}, gap},
	{"seed", "seed of the kill times", []string{"kill"}, seed},
	{"failover-tasks", "Tasks created around the leader's death", []string{"failover"}, tasks},
	{"rolling-tasks", "Tasks read during the rolling restart", []string{"rolling"}, tasks},
	{"queue-tasks", "queued Tasks (and as many plain Jobs) through the queue", []string{"queue"}, tasks},
	{"queue-pods", "pods the queue's ClusterQueue admits at once", []string{"queue"}, reps},
	{"scale-tasks", "Tasks at the scale scenario's last step (the others are a fifth and a half)", []string{"scale"}, tasks},
	{"scale-namespaces", "namespaces the scale scenario's second layout spreads its Tasks over", []string{"scale"}, reps},
}

// sizeField is one field of scenario.Size as a flag sets it.
type sizeField interface {
	set(s *scenario.Size, value string) error
	show(s scenario.Size) string
}

type field[T any] struct {
	at    func(*scenario.Size) *T
	parse func(string) (T, error)
}

func (f field[T]) set(s *scenario.Size, value string) error {
	v, err := f.parse(value)
	if err != nil {
		return err
	}
	*f.at(s) = v
	return nil
}

func (f field[T]) show(s scenario.Size) string { return fmt.Sprint(*f.at(&s)) }

var (
	tasks = field[int]{func(s *scenario.Size) *int { return &s.Tasks }, positive}
	reps  = field[int]{func(s *scenario.Size) *int { return &s.Reps }, positive}
	// pairedTimings is Reps where none is a choice (an optional timing turned off) and timings
	// come in pairs, so that two arms timed in turn sit symmetrically: 0, 2, 4 …
	pairedTimings = field[int]{func(s *scenario.Size) *int { return &s.Reps }, evenNonNegative}
	gap           = field[time.Duration]{func(s *scenario.Size) *time.Duration { return &s.Gap }, time.ParseDuration}
	benchtime     = field[string]{func(s *scenario.Size) *string { return &s.Benchtime }, noneIsEmpty}
	applied       = field[bool]{func(s *scenario.Size) *bool { return &s.Applied }, strconv.ParseBool}
	seed          = field[uint64]{func(s *scenario.Size) *uint64 { return &s.Seed }, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) }}
)

func positive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n <= 0 {
		err = errors.New("want a positive number")
	}
	return n, err
}

func evenNonNegative(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && (n < 0 || n%2 != 0) {
		err = errors.New("want an even count: 0, 2, 4 …")
	}
	return n, err
}

func noneIsEmpty(v string) (string, error) {
	if v == "none" {
		return "", nil
	}
	return v, nil
}

// config is what the command line asks for.
type config struct {
	scenarios []scenario.Scenario
	sizes     map[string]scenario.Size // by scenario name
	nodes     int
	harness   harness.Options
	timeout   time.Duration
	keep      bool
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, cfg.timeout)
	defer cancelTimeout()

	began := time.Now()
	results, crashed, err := runScenarios(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	printReport(stdout, args, cfg, results, time.Since(began), crashed)
	for _, r := range results {
		if r.Failed() {
			return 1
		}
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	which := fs.String("scenarios", "measurements", "comma-separated scenarios, or measurements, faults, scales, all")
	smoke := fs.Bool("smoke", false, "start from the small sizes of the tests instead of the full ones (flags given still apply)")
	cfg := &config{}
	fs.IntVar(&cfg.nodes, "nodes", 4, "fake nodes (250 pods each)")
	qps := fs.Float64("qps", 500, "benchmark client QPS")
	fs.IntVar(&cfg.harness.Burst, "burst", 1000, "benchmark client burst")
	workers := fs.Int("workers", 0, "concurrent creating clients (default 32, smoke 8)")
	fs.DurationVar(&cfg.timeout, "timeout", 3*time.Hour, "give up after this long")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the working directory with the operator logs")
	fs.Var((*stringList)(&cfg.harness.OperatorArgs), "operator-arg", "extra operator flag, repeatable (e.g. -operator-arg=--kube-api-qps=100)")
	given := map[string]string{}
	for _, f := range sizeFlags {
		fs.Func(f.name, sizeUsage(f.usage, f.scenarios[0], f.field), func(v string) error {
			given[f.name] = v
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.scenarios, err = scenario.Named(strings.Split(*which, ",")); err != nil {
		return nil, err
	}
	cfg.harness.QPS = float32(*qps)
	cfg.harness.Workers = map[bool]int{false: 32, true: 8}[*smoke]
	if *workers > 0 {
		cfg.harness.Workers = *workers
	}
	cfg.sizes = map[string]scenario.Size{}
	for _, sc := range scenario.All {
		cfg.sizes[sc.Name] = map[bool]scenario.Size{false: sc.Full, true: sc.Smoke}[*smoke]
	}
	return cfg, applySizeFlags(cfg.sizes, given)
}

// applySizeFlags sets the given size flags on the sizes of their scenarios.
func applySizeFlags(sizes map[string]scenario.Size, given map[string]string) error {
	for _, f := range sizeFlags {
		v, ok := given[f.name]
		if !ok {
			continue
		}
		for _, name := range f.scenarios {
			s := sizes[name]
			if err := f.field.set(&s, v); err != nil {
				return fmt.Errorf("-%s: %w", f.name, err)
			}
			sizes[name] = s
		}
	}
	return nil
}

// sizeUsage adds the full and the smoke default of the flag's first scenario to usage.
func sizeUsage(usage, name string, field sizeField) string {
	i := slices.IndexFunc(scenario.All, func(sc scenario.Scenario) bool { return sc.Name == name })
	if i < 0 {
		return usage
	}
	sc := scenario.All[i]
	return fmt.Sprintf("%s (default %s, smoke %s)", usage, field.show(sc.Full), field.show(sc.Smoke))
}

// runScenarios starts a control plane and runs the scenarios on it, in order, until one ends
// the context.
func runScenarios(ctx context.Context, cfg *config, stderr io.Writer) ([]*scenario.Result, int, error) {
	fmt.Fprintf(stderr, "starting the control plane (%d fake nodes)\n", cfg.nodes)
	opts := harness.ControlPlaneOptions(cfg.nodes)
	opts.StartTimeout = 4 * time.Minute
	cp, err := testenv.Start(ctx, opts)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(stderr, "stop the control plane: %v\n", err)
		}
	}()
	defer keepOrRemoveWorkDir(cfg.keep, stderr)
	fmt.Fprintf(stderr, "control plane ready in %s\n", cp.StartedIn.Round(time.Millisecond))
	cfg.harness.Log = stderr
	env, err := harness.New(ctx, cp, cfg.harness)
	if err != nil {
		return nil, 0, err
	}
	defer env.Close()
	var results []*scenario.Result
	for _, sc := range cfg.scenarios {
		results = append(results, sc.Run(ctx, env, cfg.sizes[sc.Name]))
		if ctx.Err() != nil {
			break
		}
	}
	return results, env.CrashedStarts, nil
}

func keepOrRemoveWorkDir(keep bool, stderr io.Writer) {
	dir, _ := testenv.WorkDir()
	if keep {
		fmt.Fprintf(stderr, "kept %s\n", dir)
		return
	}
	if err := testenv.RemoveWorkDir(); err != nil {
		fmt.Fprintf(stderr, "remove %s: %v\n", dir, err)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func printReport(w io.Writer, args []string, cfg *config, results []*scenario.Result, took time.Duration, crashed int) {
	fmt.Fprintf(w, "## task-operator benchmarks\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs (nproc), %s memory, %s %s/%s\n", runtime.NumCPU(), memTotal(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- command: `go run ./bench %s`\n", strings.Join(args, " "))
	fmt.Fprintf(w, "- nodes: %d, workers: %d, client QPS %g burst %d\n", cfg.nodes, cfg.harness.Workers, cfg.harness.QPS, cfg.harness.Burst)
	for _, sc := range cfg.scenarios {
		fmt.Fprintf(w, "- %s (%s): %s\n", sc.Name, sc.Kind, cfg.sizes[sc.Name])
	}
	fmt.Fprintf(w, "- wall time: %s\n", took.Round(time.Second))
	fmt.Fprintf(w, "- operator processes that exited during start-up and were started again by the harness: %d\n\n", crashed)
	fmt.Fprintln(w, "| Scenario | Metric | Value | Notes |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, r := range results {
		for _, row := range r.Rows {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.Scenario, cell(row.Metric), cell(row.Value), cell(row.Note))
		}
		fmt.Fprintf(w, "| %s | scenario time | %s | |\n", r.Scenario, r.Duration.Round(time.Second))
		if r.Err != nil {
			fmt.Fprintf(w, "| %s | **error** | | %s |\n", r.Scenario, cell(r.Err.Error()))
		}
	}
	fmt.Fprintln(w)
	for _, r := range results {
		status := "ok"
		if r.Failed() {
			status = "FAILED"
		}
		fmt.Fprintf(w, "- %s: %s (%s)\n", r.Scenario, status, r.Summary())
	}
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "MemTotal" {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb); err == nil {
				return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	return "unknown"
}
