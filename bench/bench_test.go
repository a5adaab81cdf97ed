package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/bench/scenario"
)

// The smoke tests run every scenario at scenario.Smoke() sizes on one shared control plane.
// They assert correctness only (the counts that must be 0, and that each scenario completes),
// never speed. Tests run in file order, which is the order of scenario.All.

var env *harness.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctrllog.SetLogger(logr.Discard())
	var log bytes.Buffer
	var err error
	env, err = harness.Start(context.Background(), harness.Options{Nodes: 2, QPS: 200, Burst: 400, Log: &log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err, "\n", log.String())
		return 1
	}
	defer func() {
		if code != 0 {
			fmt.Fprintln(os.Stderr, "--- harness log ---\n"+log.String())
			for _, o := range env.Operators() {
				fmt.Fprintf(os.Stderr, "--- operator %s log (tail) ---\n%s\n", o.Name, o.Tail(40))
			}
		}
		env.Close()
	}()
	return m.Run()
}

func runScenario(t *testing.T, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not with -short)")
	}
	for _, sc := range scenario.All {
		if sc.Name != name {
			continue
		}
		r := scenario.Run(t.Context(), env, scenario.Smoke(), name, sc.Run)
		for _, row := range r.Rows {
			t.Logf("%s: %s (%s)", row.Metric, row.Value, row.Note)
		}
		t.Logf("operator processes restarted after crashing during start-up so far: %d", env.CrashedStarts)
		if r.Err != nil {
			t.Fatalf("scenario %s: %v", name, r.Err)
		}
		for what, n := range r.Violations {
			if n != 0 {
				t.Errorf("%s = %d, want 0", what, n)
			}
		}
		return
	}
	t.Fatalf("no scenario %q", name)
}

// Throughput: every Task Succeeded, no duplicate or orphaned Job, none Failed.
func TestThroughput(t *testing.T) { runScenario(t, "throughput") }

// Idle: the operator sent no write while the finished Tasks rested.
func TestIdle(t *testing.T) { runScenario(t, "idle") }

// Conversion: every LIST at v1, v1beta1 and v1alpha1 returned all Tasks; the Go benchmarks ran.
func TestConversion(t *testing.T) { runScenario(t, "conversion") }

// Memory: VmHWM was read; the Tasks all finished without duplicates.
func TestMemory(t *testing.T) { runScenario(t, "memory") }

// Kill: after SIGKILLs of the operator, no duplicate or orphaned Job and every Task terminal.
func TestKill(t *testing.T) { runScenario(t, "kill") }

// Failover: the survivor took the Lease after the leader's SIGKILL; no duplicate or orphaned Job,
// every Task terminal.
func TestFailover(t *testing.T) { runScenario(t, "failover") }

// Rolling: no read at v1alpha1 failed while both replicas were restarted in turn.
func TestRolling(t *testing.T) { runScenario(t, "rolling") }

// Migration: both methods left every Task stored at v1 and storedVersions [v1], without failed
// rewrites.
func TestMigration(t *testing.T) { runScenario(t, "migration") }

func TestSelectScenarios(t *testing.T) {
	got, err := selectScenarios("faults,throughput")
	if err != nil || strings.Join(got, ",") != "kill,failover,rolling,throughput" {
		t.Fatalf("selectScenarios = %v, %v", got, err)
	}
	if _, err := selectScenarios("nope"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}

func TestParseMetrics(t *testing.T) {
	in := `# HELP rest_client_requests_total x
rest_client_requests_total{code="200",host="127.0.0.1:1",method="POST"} 3
rest_client_requests_total{code="409",host="a\"b,c",method="PUT"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7
other 1
`
	s, err := harness.ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	w := harness.ClientWrites(s)
	if w["POST"] != 3 || w["PUT"] != 2 || len(w) != 2 {
		t.Fatalf("ClientWrites = %v", w)
	}
}
