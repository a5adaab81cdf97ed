package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/internal/testenv"
)

// up starts the daemon unless one already runs, waits until the cluster is
// ready and prints the export line, the only thing it writes to stdout.
func up(args []string) error {
	var nodes int
	var timeout time.Duration
	var kueue bool
	dir, err := stateFlags("up", args, func(fs *flag.FlagSet) {
		fs.IntVar(&nodes, "nodes", 1, "number of fake nodes")
		fs.DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the cluster")
		fs.BoolVar(&kueue, "kueue", false, "also install and run Kueue (needs root and ip: its manager runs in a network namespace)")
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pid, running := daemonPID(dir)
	// How a daemon this process started ended: "" while it runs. Another's is not known.
	exitStatus := func() string { return "" }
	if running {
		fmt.Fprintf(os.Stderr, "cluster already running (pid %d) in %s\n", pid, dir)
	} else {
		// Leftovers of a daemon that died would clash with the new one.
		if err := stopCluster(dir); err != nil {
			return fmt.Errorf("clean up previous cluster: %w", err)
		}
		if pid, exitStatus, err = startDaemon(dir, nodes, timeout, kueue); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "starting cluster (daemon pid %d, state in %s) ...\n", pid, dir)
	}
	alive := func() bool { return daemonAlive(dir, pid) }
	if !running {
		// Not daemonAlive: for a moment after it starts, the new daemon's /proc command line
		// reads empty (the kernel fills it in after the exec that Start waits for).
		alive = func() bool { return exitStatus() == "" }
	}
	if err := waitReady(ctx, dir, timeout, alive, pid, exitStatus); err != nil {
		if !running {
			err = errors.Join(err, stopCluster(dir))
		}
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, kubeconfigFile))
	return nil
}

// startDaemon re-executes this binary as `serve` in a new session: it keeps
// running after `up` and `go run` exit, and the terminal's signals do not
// reach it. exitStatus says how the daemon ended ("exit status 1", "signal: killed"), or ""
// while it runs.
func startDaemon(dir string, nodes int, timeout time.Duration, kueue bool) (pid int, exitStatus func() string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("create state dir: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, daemonLog))
	if err != nil {
		return 0, nil, fmt.Errorf("create daemon log: %w", err)
	}
	defer logFile.Close()
	// /proc/self/exe, because `go run` deletes its binary once `up` exits.
	cmd := exec.Command("/proc/self/exe", serveCommand,
		"--dir", dir, "--nodes", strconv.Itoa(nodes), "--timeout", timeout.String(), "--kueue="+strconv.FormatBool(kueue))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start daemon: %w", err)
	}
	pid = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return 0, nil, fmt.Errorf("write pid file: %w", err)
	}
	return pid, reap(cmd), nil
}

// reap waits for a started cmd in the background, so that a daemon that dies does not linger as
// a zombie that looks alive, and returns how it ended: "exit status 1", "signal: killed", or ""
// while it runs. That is the daemon's liveness from the moment Start returns, which /proc is not.
func reap(cmd *exec.Cmd) (exitStatus func() string) {
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
	}()
	return func() string {
		select {
		case <-exited:
			return cmd.ProcessState.String()
		default:
			return ""
		}
	}
}

// waitReady waits for the daemon's ready file, failing fast when the daemon (pid) is no longer
// alive, with how it ended and the end of its log.
func waitReady(ctx context.Context, dir string, timeout time.Duration, alive func() bool, pid int, exitStatus func() string) error {
	err := testenv.Poll(ctx, timeout, 200*time.Millisecond, "the cluster to be ready", func(context.Context) (bool, error) {
		if _, err := os.Stat(filepath.Join(dir, readyFile)); err == nil {
			return true, nil
		}
		if !alive() {
			return false, testenv.Permanent(daemonExited(pid, exitStatus))
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n%s", err, daemonLogTail(filepath.Join(dir, daemonLog)))
}

// daemonExited names how the daemon ended. A daemon that no longer looks alive may still be
// being reaped: give the reaper a moment to record its status.
func daemonExited(pid int, exitStatus func() string) error {
	status := exitStatus()
	for deadline := time.Now().Add(time.Second); status == "" && time.Now().Before(deadline); status = exitStatus() {
		time.Sleep(20 * time.Millisecond)
	}
	if status == "" {
		status = "status unknown: " + processState(pid)
	}
	return fmt.Errorf("the cluster daemon (pid %d) exited during start-up (%s)", pid, status)
}

// processState is what /proc says of pid, for a daemon this process did not start or has not
// reaped yet.
func processState(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "gone from /proc"
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return fmt.Sprintf("stat %q, command line %q", strings.TrimSpace(string(stat)), strings.ReplaceAll(string(cmdline), "\x00", " "))
}

// daemonLogTail is the end of the daemon's log, or why there is none to show: an empty or
// missing log is itself a clue (killed before it wrote anything, or the state directory removed).
func daemonLogTail(path string) string {
	data, err := os.ReadFile(path)
	switch {
	case err != nil:
		return fmt.Sprintf("(no daemon log: %v)", err)
	case len(data) == 0:
		return fmt.Sprintf("(the daemon log %s is empty)", path)
	}
	return testenv.Tail(string(data), 60)
}
