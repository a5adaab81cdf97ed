package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/internal/testenv"
)

// daemonStopTimeout covers the daemon's own graceful Stop of all components.
const daemonStopTimeout = 45 * time.Second

// down stops the cluster; nothing running is not an error.
func down(args []string) error {
	dir, err := stateFlags("down", args, nil)
	if err != nil {
		return err
	}
	if err := stopCluster(dir); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cluster in %s stopped\n", dir)
	return nil
}

// stopCluster asks the daemon to stop, then kills whatever is left: the
// recorded pids and any process whose command line names the cluster's run
// directory (components of a daemon that was SIGKILLed). Each kill is
// guarded by that command line check, so stale pid files cannot hit
// unrelated processes.
func stopCluster(dir string) error {
	var errs []error
	if pid, ok := daemonPID(dir); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		stopped := testenv.Poll(context.Background(), daemonStopTimeout, 0, "the daemon to stop", func(context.Context) (bool, error) {
			return !daemonAlive(dir, pid), nil
		})
		if stopped != nil {
			errs = append(errs, fmt.Errorf("daemon (pid %d) ignored SIGTERM for %s; killing it", pid, daemonStopTimeout))
			errs = append(errs, testenv.KillGroup(pid, dir, 10*time.Second))
		}
	}
	marker := filepath.Join(dir, runDir)
	for pid := range leftoverPIDs(dir, marker) {
		errs = append(errs, testenv.KillGroup(pid, marker, 10*time.Second))
	}
	for _, f := range []string{readyFile, pidFile, pidsFile, kubeconfigFile, runDir} {
		errs = append(errs, removeIfExists(filepath.Join(dir, f)))
	}
	return errors.Join(errs...)
}

// leftoverPIDs merges pids.json with a scan of /proc for marker.
func leftoverPIDs(dir, marker string) map[int]bool {
	pids := map[int]bool{}
	if data, err := os.ReadFile(filepath.Join(dir, pidsFile)); err == nil {
		var byName map[string]int
		if json.Unmarshal(data, &byName) == nil {
			for _, pid := range byName {
				pids[pid] = true
			}
		}
	}
	if found, err := testenv.FindProcesses(marker, 0); err == nil {
		for pid := range found {
			pids[pid] = true
		}
	}
	// Never our own parent: `go run ... --dir <dir>/run` would match.
	delete(pids, os.Getppid())
	return pids
}

// daemonPID reads the pid file and reports whether that daemon still runs.
func daemonPID(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, false
	}
	return pid, daemonAlive(dir, pid)
}

// daemonAlive reports whether pid is a live `serve` daemon for dir.
func daemonAlive(dir string, pid int) bool {
	if !testenv.ProcessAlive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return len(args) > 1 && args[1] == serveCommand && strings.Contains(string(cmdline), dir)
}
