package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAJustStartedDaemonCountsAsAlive: up judges the daemon it started by its reaper, so a
// daemon is alive from the moment Start returns. /proc cannot say so: for a moment after Start
// the new process's command line reads empty (the kernel fills it in after the exec Start
// waits for), which once made up declare a healthy daemon dead and stop it. The test counts
// those empty reads too: it shows the race it guards against is real on this machine.
func TestAJustStartedDaemonCountsAsAlive(t *testing.T) {
	const starts = 200
	emptyCmdlines := 0
	for range starts {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exitStatus := reap(cmd)
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline"))
		if len(cmdline) == 0 {
			emptyCmdlines++
		}
		if status := exitStatus(); status != "" {
			t.Fatalf("a process just started reads as ended (%q)", status)
		}
		_ = cmd.Process.Kill()
		deadline := time.Now().Add(10 * time.Second)
		for exitStatus() == "" && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := exitStatus(); got != "signal: killed" {
			t.Fatalf("a killed process reads %q, want \"signal: killed\"", got)
		}
	}
	t.Logf("%d of %d processes had an empty /proc command line right after Start", emptyCmdlines, starts)
}

// TestADaemonThatDiedIsReportedWithHowItEnded: the start-up failure names the daemon's exit
// (status or signal), and an empty or missing log says so instead of printing nothing.
func TestADaemonThatDiedIsReportedWithHowItEnded(t *testing.T) {
	killed := exec.Command("sleep", "60")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Process.Kill()
	_ = killed.Wait()
	failed := exec.Command("sh", "-c", "exit 3")
	_ = failed.Run()
	for _, tc := range []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"killed", killed, "(signal: killed)"},
		{"failed", failed, "(exit status 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := daemonExited(tc.cmd.Process.Pid, func() string { return tc.cmd.ProcessState.String() })
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
	// A daemon this process did not start: what /proc says (here: nothing, it is gone).
	if err := daemonExited(killed.Process.Pid, func() string { return "" }); !strings.Contains(err.Error(), "status unknown: gone from /proc") {
		t.Errorf("unknown status: got %q", err)
	}

	dir := t.TempDir()
	empty, full := filepath.Join(dir, "empty.log"), filepath.Join(dir, "full.log")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("cluster: start control plane: boom\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.log"): "(no daemon log: ",
		empty:                             "is empty)",
		full:                              "cluster: start control plane: boom",
	} {
		if got := daemonLogTail(path); !strings.Contains(got, want) {
			t.Errorf("daemonLogTail(%s) = %q, want it to contain %q", filepath.Base(path), got, want)
		}
	}
}
