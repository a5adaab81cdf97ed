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
	if running {
		fmt.Fprintf(os.Stderr, "cluster already running (pid %d) in %s\n", pid, dir)
	} else {
		// Leftovers of a daemon that died would clash with the new one.
		if err := stopCluster(dir); err != nil {
			return fmt.Errorf("clean up previous cluster: %w", err)
		}
		if pid, err = startDaemon(dir, nodes, timeout, kueue); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "starting cluster (daemon pid %d, state in %s) ...\n", pid, dir)
	}
	if err := waitReady(ctx, dir, pid, timeout); err != nil {
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
// reach it.
func startDaemon(dir string, nodes int, timeout time.Duration, kueue bool) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("create state dir: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, daemonLog))
	if err != nil {
		return 0, fmt.Errorf("create daemon log: %w", err)
	}
	defer logFile.Close()
	// /proc/self/exe, because `go run` deletes its binary once `up` exits.
	cmd := exec.Command("/proc/self/exe", serveCommand,
		"--dir", dir, "--nodes", strconv.Itoa(nodes), "--timeout", timeout.String(), "--kueue="+strconv.FormatBool(kueue))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("write pid file: %w", err)
	}
	// Reap the daemon should it die while we wait; otherwise, as a zombie,
	// it would still look alive.
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// waitReady waits for the daemon's ready file, failing fast when the daemon dies, with the end
// of its log.
func waitReady(ctx context.Context, dir string, pid int, timeout time.Duration) error {
	err := testenv.Poll(ctx, timeout, 200*time.Millisecond, "the cluster to be ready", func(context.Context) (bool, error) {
		if _, err := os.Stat(filepath.Join(dir, readyFile)); err == nil {
			return true, nil
		}
		if !daemonAlive(dir, pid) {
			return false, testenv.Permanent(errors.New("the cluster daemon exited during start-up"))
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, testenv.TailFile(filepath.Join(dir, daemonLog), 60))
	}
	return nil
}
