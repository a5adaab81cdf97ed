package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
