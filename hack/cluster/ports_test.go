package main

import (
	"bytes"
	"net"
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
