package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/bench/scenario"
	"example.com/task-operator/internal/testenv"
)

// The smoke tests run every scenario at its Smoke size on one shared control plane, in the
// order of scenario.All. They assert correctness only (the counts that must be 0, and that each
// scenario completes), never speed.

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, harness.ControlPlaneOptions(2))
}

// The harness the scenarios share, made by the first benchEnv.
var shared struct {
	once sync.Once
	env  *harness.Env
	log  bytes.Buffer
	err  error
}

func benchEnv(t *testing.T) *harness.Env {
	t.Helper()
	cp := testenv.Shared(t)
	shared.once.Do(func() {
		shared.env, shared.err = harness.New(t.Context(), cp, harness.Options{QPS: 200, Burst: 400, Workers: 8, Log: &shared.log})
		if shared.err == nil {
			testenv.AtExit(closeBenchEnv)
		}
	})
	if shared.err != nil {
		t.Fatalf("bench harness: %v\n%s", shared.err, shared.log.String())
	}
	return shared.env
}

func closeBenchEnv(failed bool) {
	if failed {
		fmt.Fprintln(os.Stderr, "--- harness log ---\n"+shared.log.String())
		for _, o := range shared.env.Operators() {
			fmt.Fprintf(os.Stderr, "--- operator %s log (tail) ---\n%s\n", o.Name(), o.Tail(40))
		}
	}
	shared.env.Close()
}

// TestScenarios runs every scenario at its smoke size and fails on any count that must be 0;
// docs/benchmarks.md lists them.
func TestScenarios(t *testing.T) {
	for _, sc := range scenario.All {
		t.Run(sc.Name, func(t *testing.T) {
			e := benchEnv(t)
			r := sc.Run(t.Context(), e, sc.Smoke)
			for _, row := range r.Rows {
				t.Logf("%s: %s (%s)", row.Metric, row.Value, row.Note)
			}
			t.Logf("operator processes restarted after crashing during start-up so far: %d", e.CrashedStarts)
			if errors.Is(r.Err, scenario.ErrUnsupported) {
				t.Skip(r.Err)
			}
			if r.Err != nil {
				t.Fatalf("scenario %s: %v", sc.Name, r.Err)
			}
			for what, n := range r.Violations {
				if n != 0 {
					t.Errorf("%s = %d, want 0", what, n)
				}
			}
		})
	}
}

func TestNamedScenarios(t *testing.T) {
	got, err := scenario.Named([]string{"faults", "throughput"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range got {
		names = append(names, sc.Name)
	}
	if strings.Join(names, ",") != "throughput,kill,failover,rolling" {
		t.Fatalf("Named(faults, throughput) = %v, want them in the order they run", names)
	}
	if _, err := scenario.Named([]string{"nope"}); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}

func TestSizeFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-smoke", "-tasks=7", "-kills=2", "-conversion-benchtime=none", "-scenarios=idle,kill,conversion"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.sizes["throughput"]; s.Tasks != 7 {
		t.Errorf("throughput size = %v, want tasks=7", s)
	}
	if s := cfg.sizes["idle"]; s.Tasks != 7 || s.Gap != scenario.All[1].Smoke.Gap {
		t.Errorf("idle size = %v, want tasks=7 and the smoke gap", s)
	}
	if s := cfg.sizes["kill"]; s.Reps != 2 || s.Tasks != 20 {
		t.Errorf("kill size = %v, want reps=2 and the smoke tasks", s)
	}
	if s := cfg.sizes["conversion"]; s.Benchtime != "" {
		t.Errorf("conversion size = %v, want no benchtime", s)
	}
	if cfg.harness.Workers != 8 || len(cfg.scenarios) != 3 {
		t.Errorf("workers %d, %d scenarios; want the smoke 8 workers and 3 scenarios", cfg.harness.Workers, len(cfg.scenarios))
	}
	if _, err := parseFlags([]string{"-kills=0"}, &bytes.Buffer{}); err == nil {
		t.Error("-kills=0 accepted")
	}
	for _, n := range []int{0, 2, 4} {
		cfg, err := parseFlags([]string{"-smoke", fmt.Sprintf("-migrate-schema-ceilings=%d", n)}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if s := cfg.sizes["migration"]; s.Reps != n {
			t.Errorf("-migrate-schema-ceilings=%d: migration size %v", n, s)
		}
	}
	for _, n := range []int{-1, 1, 3} {
		if _, err := parseFlags([]string{fmt.Sprintf("-migrate-schema-ceilings=%d", n)}, &bytes.Buffer{}); err == nil {
			t.Errorf("-migrate-schema-ceilings=%d accepted", n)
		}
	}
}

func TestClientWrites(t *testing.T) {
	in := `rest_client_requests_total{code="200",host="127.0.0.1:1",method="POST"} 3
rest_client_requests_total{code="409",host="a\"b,c",method="PUT"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7
other 1
`
	s, err := testenv.ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	w := harness.ClientWrites(s)
	if w["POST"] != 3 || w["PUT"] != 2 || len(w) != 2 {
		t.Fatalf("ClientWrites = %v", w)
	}
}
