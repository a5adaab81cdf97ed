// Command bench measures the operator on a local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and KWOK fake nodes, see e2e/controlplane) with the
// operator binary running outside the cluster, and prints a markdown results table.
//
//	go run ./bench                                # the five measurements at full size
//	go run ./bench -scenarios faults              # the three fault scenarios
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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/bench/scenario"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

var measurements = []string{"throughput", "idle", "conversion", "memory", "migration"}

var faults = []string{"kill", "failover", "rolling"}

func run(args []string, stdout, stderr io.Writer) int {
	s := scenario.Full()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	which := fs.String("scenarios", "measurements", "comma-separated scenarios, or measurements, faults, all")
	smoke := fs.Bool("smoke", false, "start from the small sizes of the tests instead of the full ones (flags given still apply)")
	nodes := fs.Int("nodes", 4, "fake nodes (250 pods each)")
	qps := fs.Float64("qps", 500, "benchmark client QPS")
	burst := fs.Int("burst", 1000, "benchmark client burst")
	timeout := fs.Duration("timeout", 3*time.Hour, "give up after this long")
	keep := fs.Bool("keep", false, "keep the working directory with the operator logs")
	var operatorArgs stringList
	fs.Var(&operatorArgs, "operator-arg", "extra operator flag, repeatable (e.g. -operator-arg=--kube-api-qps=100)")
	sized := map[string]func(){}
	intFlag := func(p *int, name, usage string) {
		fs.Func(name, fmt.Sprintf("%s (default %d, smoke %d)", usage, *p, smallInt(name)), func(v string) error {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
				return fmt.Errorf("want a positive number")
			}
			sized[name] = func() { *p = n }
			return nil
		})
	}
	intFlag(&s.Tasks, "tasks", "Tasks in the throughput run (also measured at rest by idle)")
	intFlag(&s.ListTasks, "list-tasks", "Tasks in each conversion LIST")
	intFlag(&s.ListReps, "list-reps", "LISTs per version")
	intFlag(&s.MigrateTasks, "migrate-tasks", "v1alpha1-stored Tasks migrated by each method")
	intFlag(&s.MemoryTasks, "memory-tasks", "Tasks run before the peak RSS is read")
	intFlag(&s.KillTasks, "kill-tasks", "Tasks run while the operator is killed")
	intFlag(&s.Kills, "kills", "SIGKILLs of the operator")
	intFlag(&s.FailoverTasks, "failover-tasks", "Tasks created around the leader's death")
	intFlag(&s.RollingTasks, "rolling-tasks", "Tasks read during the rolling restart")
	intFlag(&s.Workers, "workers", "concurrent creating clients")
	idle := fs.Duration("idle", 0, "idle window (default 60s, smoke 10s)")
	gap := fs.Duration("kill-gap", 0, "mean gap between SIGKILLs (default 3s, smoke 1s)")
	benchtime := fs.String("conversion-benchtime", "", "go test -benchtime of the converter benchmarks, or none (default 1s, smoke 200x)")
	seed := fs.Uint64("seed", 0, "seed of the kill times (default 1)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *smoke {
		s = scenario.Smoke()
	}
	for _, set := range sized {
		set()
	}
	if *idle > 0 {
		s.Idle = *idle
	}
	if *gap > 0 {
		s.KillGap = *gap
	}
	switch *benchtime {
	case "":
	case "none":
		s.ConvBenchtime = ""
	default:
		s.ConvBenchtime = *benchtime
	}
	if *seed != 0 {
		s.Seed = *seed
	}
	selected, err := selectScenarios(*which)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, *timeout)
	defer cancelTimeout()

	began := time.Now()
	env, err := harness.Start(ctx, harness.Options{
		Nodes: *nodes, QPS: float32(*qps), Burst: *burst, OperatorArgs: operatorArgs, Log: stderr, KeepDir: *keep,
	})
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer env.Close()

	var results []*scenario.Result
	for _, sc := range scenario.All {
		if !slices.Contains(selected, sc.Name) {
			continue
		}
		results = append(results, scenario.Run(ctx, env, s, sc.Name, sc.Run))
		if ctx.Err() != nil {
			break
		}
	}
	printReport(stdout, args, s, *nodes, results, time.Since(began), env.CrashedStarts)
	for _, r := range results {
		if r.Failed() {
			return 1
		}
	}
	return 0
}

func smallInt(name string) int {
	s := scenario.Smoke()
	return map[string]int{
		"tasks": s.Tasks, "list-tasks": s.ListTasks, "list-reps": s.ListReps, "migrate-tasks": s.MigrateTasks,
		"memory-tasks": s.MemoryTasks, "kill-tasks": s.KillTasks, "kills": s.Kills,
		"failover-tasks": s.FailoverTasks, "rolling-tasks": s.RollingTasks, "workers": s.Workers,
	}[name]
}

func selectScenarios(spec string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(spec, ",") {
		switch name = strings.TrimSpace(name); name {
		case "measurements":
			out = append(out, measurements...)
		case "faults":
			out = append(out, faults...)
		case "all":
			out = append(out, measurements...)
			out = append(out, faults...)
		default:
			if !slices.Contains(measurements, name) && !slices.Contains(faults, name) {
				return nil, fmt.Errorf("unknown scenario %q (want %s, %s, measurements, faults or all)",
					name, strings.Join(measurements, ", "), strings.Join(faults, ", "))
			}
			out = append(out, name)
		}
	}
	return out, nil
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func printReport(w io.Writer, args []string, s scenario.Sizes, nodes int, results []*scenario.Result, took time.Duration, crashed int) {
	fmt.Fprintf(w, "## task-operator benchmarks\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs (nproc), %s memory, %s %s/%s\n", runtime.NumCPU(), memTotal(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- command: `go run ./bench %s`\n", strings.Join(args, " "))
	fmt.Fprintf(w, "- sizes: tasks=%d idle=%s list-tasks=%d×%d migrate-tasks=%d memory-tasks=%d kill-tasks=%d kills=%d failover-tasks=%d rolling-tasks=%d workers=%d nodes=%d\n",
		s.Tasks, s.Idle, s.ListTasks, s.ListReps, s.MigrateTasks, s.MemoryTasks, s.KillTasks, s.Kills, s.FailoverTasks, s.RollingTasks, s.Workers, nodes)
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
