package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"example.com/task-operator/internal/testenv"
)

func TestPortsPrintsDistinctFreePorts(t *testing.T) {
	var out bytes.Buffer
	if err := ports(&out, []string{"3"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range strings.Fields(out.String()) {
		if seen[p] {
			t.Errorf("port %s printed twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			t.Errorf("port %s is not free once printed: %v", p, err)
			continue
		}
		_ = l.Close()
	}
	if len(seen) != 3 {
		t.Errorf("printed %q, want 3 ports", out.String())
	}
	for _, bad := range [][]string{nil, {"x"}, {"0"}, {"17"}, {"1", "2"}} {
		if err := ports(&out, bad); err == nil {
			t.Errorf("ports %q: no error", bad)
		}
	}
}

// TestRunRefusesAPortInUse: `make run` told to use a port another process holds stops at once,
// naming the port, before it starts anything: it never reports ready for the other process.
func TestRunRefusesAPortInUse(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
	for _, name := range []string{"WEBHOOK_PORT", "METRICS_PORT", "HEALTH_PORT"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("bash", filepath.Join(root, "hack", "run.sh"))
			cmd.Dir = root
			cmd.Env = append(cmd.Environ(), name+"="+port, "RUN_EXIT_WHEN_DONE=1")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("run.sh with %s=%s in use succeeded:\n%s", name, port, out)
			}
			if want := "port " + port + " (" + name + ")"; !strings.Contains(string(out), want) {
				t.Errorf("output does not name %q:\n%s", want, out)
			}
			if strings.Contains(string(out), "starting the local control plane") {
				t.Errorf("started the control plane before checking the ports:\n%s", out)
			}
		})
	}
}

// TestRunStartsTheOperatorAndTheSamplesSucceed runs `make run`'s script as CI does
// (RUN_EXIT_WHEN_DONE=1): free ports, the operator ready as its own process, the samples
// Succeeded, everything stopped after.
func TestRunStartsTheOperatorAndTheSamplesSucceed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".cache", "run", "cluster", readyFile)); err == nil {
		t.Skip("a `make run` cluster is running in .cache/run/cluster; this test would stop it")
	}
	build := exec.Command("make", "build")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "run.sh"))
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "RUN_EXIT_WHEN_DONE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, tailOf(out, 60))
	}
	for _, want := range []string{"==> operator ports on 127.0.0.1: webhook ", "operator ready", "samples Succeeded", "stopped."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("run.sh output lacks %q:\n%s", want, tailOf(out, 60))
		}
	}
}

// tailOf is the last n lines of out.
func tailOf(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
