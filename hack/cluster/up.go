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

	d, err := startOrFind(dir, nodes, timeout, kueue)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, dir, timeout, d); err != nil {
		if d.started() {
			err = errors.Join(err, d.stop(dir))
		}
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, kubeconfigFile))
	return nil
}

// daemon is the cluster daemon up waits for: one already running in dir, or one this process
// started. A started one is judged and stopped through its exec.Cmd, never through /proc: for
// a moment after Start its /proc command line reads empty (the kernel fills it in after the
// exec Start waits for), and daemonAlive would call it dead.
type daemon struct {
	pid int
	cmd *exec.Cmd
	// exitStatus says how a started daemon ended ("exit status 1", "signal: killed"), "" while
	// it runs.
	exitStatus func() string
}

func (d daemon) started() bool { return d.cmd != nil }

// alive reports whether the daemon still runs.
func (d daemon) alive(dir string) bool {
	if d.started() {
		return d.exitStatus() == ""
	}
	return daemonAlive(dir, d.pid)
}

// stop stops a daemon this process started, as down would, then what it left behind.
func (d daemon) stop(dir string) error {
	var errs []error
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	stopped := testenv.Poll(context.Background(), daemonStopTimeout, 0, "the daemon to stop", func(context.Context) (bool, error) {
		return !d.alive(dir), nil
	})
	if stopped != nil {
		errs = append(errs, fmt.Errorf("daemon (pid %d) ignored SIGTERM for %s; killing it", d.pid, daemonStopTimeout))
		_ = d.cmd.Process.Kill()
	}
	return errors.Join(append(errs, stopCluster(dir))...)
}

// startOrFind returns the daemon running in dir, or starts one after clearing what a dead one
// left.
func startOrFind(dir string, nodes int, timeout time.Duration, kueue bool) (daemon, error) {
	if pid, running := daemonPID(dir); running {
		fmt.Fprintf(os.Stderr, "cluster already running (pid %d) in %s\n", pid, dir)
		return daemon{pid: pid, exitStatus: func() string { return "" }}, nil
	}
	// Leftovers of a daemon that died would clash with the new one.
	if err := stopCluster(dir); err != nil {
		return daemon{}, fmt.Errorf("clean up previous cluster: %w", err)
	}
	d, err := startDaemon(dir, nodes, timeout, kueue)
	if err != nil {
		return daemon{}, err
	}
	fmt.Fprintf(os.Stderr, "starting cluster (daemon pid %d, state in %s) ...\n", d.pid, dir)
	return d, nil
}

// startDaemon re-executes this binary as `serve` in a new session: it keeps
// running after `up` and `go run` exit, and the terminal's signals do not
// reach it.
func startDaemon(dir string, nodes int, timeout time.Duration, kueue bool) (daemon, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return daemon{}, fmt.Errorf("create state dir: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, daemonLog))
	if err != nil {
		return daemon{}, fmt.Errorf("create daemon log: %w", err)
	}
	defer logFile.Close()
	// /proc/self/exe, because `go run` deletes its binary once `up` exits.
	cmd := exec.Command("/proc/self/exe", serveCommand,
		"--dir", dir, "--nodes", strconv.Itoa(nodes), "--timeout", timeout.String(), "--kueue="+strconv.FormatBool(kueue))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return daemon{}, fmt.Errorf("start daemon: %w", err)
	}
	d := daemon{pid: cmd.Process.Pid, cmd: cmd, exitStatus: reap(cmd)}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(d.pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return daemon{}, fmt.Errorf("write pid file: %w", err)
	}
	return d, nil
}

// reap waits for a started cmd in the background, so that a daemon that dies does not linger as
// a zombie that looks alive, and returns how it ended: "exit status 1", "signal: killed", or ""
// while it runs.
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

// waitReady waits for the daemon's ready file, failing fast when the daemon is no longer alive,
// with how it ended and the end of its log.
func waitReady(ctx context.Context, dir string, timeout time.Duration, d daemon) error {
	err := testenv.Poll(ctx, timeout, 200*time.Millisecond, "the cluster to be ready", func(context.Context) (bool, error) {
		if _, err := os.Stat(filepath.Join(dir, readyFile)); err == nil {
			return true, nil
		}
		if !d.alive(dir) {
			return false, testenv.Permanent(daemonExited(d.pid, d.exitStatus()))
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n%s", err, daemonLogTail(filepath.Join(dir, daemonLog)))
}

// daemonExited names how the daemon ended: status, or for a daemon up did not start ("") what
// /proc says.
func daemonExited(pid int, status string) error {
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
