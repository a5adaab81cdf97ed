package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessAlive reports whether pid exists and is not a zombie: a zombie has
// exited and only waits for its parent (or init) to reap it.
func ProcessAlive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] != 'Z'
}

// cmdlineContains reports whether pid's command line mentions marker; it
// guards every kill by recorded pid against pid reuse.
func cmdlineContains(pid int, marker string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(cmdline, []byte(marker))
}

// FindProcesses returns the live processes whose command line mentions
// marker (typically a state directory), keyed by pid, valued by the base
// name of their executable. ppid > 0 restricts the search to its children.
func FindProcesses(marker string, ppid int) (map[int]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	found := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ppid > 0 && parentPID(pid) != ppid {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) || !ProcessAlive(pid) {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		found[pid] = filepath.Base(argv0)
	}
	return found, nil
}

func parentPID(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// KillGroup sends SIGKILL to pid's process group (and to pid itself, in case
// it is not a group leader), if pid still runs with marker on its command
// line, and waits up to timeout for it to be gone.
func KillGroup(pid int, marker string, timeout time.Duration) error {
	if !ProcessAlive(pid) || !cmdlineContains(pid, marker) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return waitGone(pid, timeout)
}

// waitGone polls until pid no longer runs.
func waitGone(pid int, timeout time.Duration) error {
	return Poll(context.Background(), timeout, 20*time.Millisecond, fmt.Sprintf("pid %d to exit", pid), func(context.Context) (bool, error) {
		return !ProcessAlive(pid), nil
	})
}

// ProcessMemory reads a process's peak resident set (VmHWM) and its resident set now (VmRSS)
// from /proc/<pid>/status, in bytes.
func ProcessMemory(pid int) (peak, now int64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, fmt.Errorf("memory of pid %d: %w", pid, err)
	}
	for line := range strings.Lines(string(data)) {
		key, value, _ := strings.Cut(line, ":")
		switch key {
		case "VmHWM":
			peak, err = parseKiB(value)
		case "VmRSS":
			now, err = parseKiB(value)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("memory of pid %d: %s: %w", pid, key, err)
		}
	}
	if peak == 0 {
		return 0, 0, fmt.Errorf("memory of pid %d: no VmHWM in /proc status", pid)
	}
	return peak, now, nil
}

// parseKiB reads a /proc status value such as "  123456 kB" as bytes.
func parseKiB(value string) (int64, error) {
	fields := strings.Fields(value)
	if len(fields) == 0 {
		return 0, errors.New("empty value")
	}
	kib, err := strconv.ParseInt(fields[0], 10, 64)
	return kib * 1024, err
}
