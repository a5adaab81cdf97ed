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

// startSleeper starts a process up could have started as its daemon, stopped when the test ends.
func startSleeper(t *testing.T) daemon {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := daemon{pid: cmd.Process.Pid, cmd: cmd, exitStatus: reap(cmd)}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return d
}

// TestAJustStartedDaemonCountsAsAlive: up judges a daemon it started by its reaper, so the
// daemon is alive from the moment Start returns. /proc cannot say so: for a moment after Start
// the new process's command line reads empty (the kernel fills it in after the exec Start
// waits for), which once made up declare a healthy daemon dead and stop it. The test counts
// those empty reads too: they show the race it guards against is real on this machine.
func TestAJustStartedDaemonCountsAsAlive(t *testing.T) {
	dir := t.TempDir()
	const starts = 200
	emptyCmdlines := 0
	for range starts {
		d := startSleeper(t)
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(d.pid), "cmdline"))
		if len(cmdline) == 0 {
			emptyCmdlines++
		}
		if !d.alive(dir) {
			t.Fatalf("a daemon just started reads as ended (%q)", d.exitStatus())
		}
		_ = d.cmd.Process.Kill()
		waitEnded(t, d)
		if got := d.exitStatus(); got != "signal: killed" {
			t.Fatalf("a killed daemon reads %q, want \"signal: killed\"", got)
		}
	}
	t.Logf("%d of %d processes had an empty /proc command line right after Start", emptyCmdlines, starts)
}

// TestAStartedDaemonIsStoppedThroughItsProcess: when the cluster never gets ready, up stops the
// daemon it started by signalling its process, whatever /proc says of it, and clears the state.
func TestAStartedDaemonIsStoppedThroughItsProcess(t *testing.T) {
	dir := t.TempDir()
	d := startSleeper(t)
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(d.pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(dir); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d.alive(dir) {
		t.Fatal("the daemon still runs after stop")
	}
	if got := d.exitStatus(); got != "signal: terminated" {
		t.Errorf("the daemon ended with %q, want \"signal: terminated\" (asked, not killed)", got)
	}
	if _, err := os.Stat(filepath.Join(dir, pidFile)); !os.IsNotExist(err) {
		t.Errorf("the pid file is left behind: %v", err)
	}
}

func waitEnded(t *testing.T, d daemon) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for d.exitStatus() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs 10s after SIGKILL", d.pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestADaemonThatDiedIsReportedWithHowItEnded: the start-up failure names the daemon's exit
// (status or signal), and an empty or missing log says so instead of printing nothing.
func TestADaemonThatDiedIsReportedWithHowItEnded(t *testing.T) {
	for _, tc := range []struct {
		status, want string
	}{
		{"signal: killed", "(signal: killed)"},
		{"exit status 3", "(exit status 3)"},
		// A daemon this process did not start: what /proc says (here: nothing, no such pid).
		{"", "(status unknown: gone from /proc)"},
	} {
		// A pid above any pid_max: never a live process.
		if err := daemonExited(1<<30, tc.status); !strings.Contains(err.Error(), tc.want) {
			t.Errorf("status %q: got %q, want it to contain %q", tc.status, err, tc.want)
		}
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
