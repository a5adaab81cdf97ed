package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// proc is a process the harness started itself, in its own process group so
// that stopping it also stops anything it spawned.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // Wait's result, valid after done is closed

	// mu is held while signalling the group and while reaping the leader:
	// the group id is the leader's pid, which is free for reuse once reaped.
	mu     sync.Mutex
	reaped bool
}

// procSpec says how to start a process.
type procSpec struct {
	name    string
	bin     string
	args    []string
	env     []string // the whole environment
	logPath string   // receives stdout and stderr
	stdin   *os.File // nil: /dev/null
	// diesWithParent has the kernel SIGKILL the process when the thread that started it
	// ends, for processes no watchdog covers.
	diesWithParent bool
}

// startProc starts a process in a new process group.
func startProc(spec procSpec) (*proc, error) {
	logFile, err := os.Create(spec.logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", spec.name, err)
	}
	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Env = spec.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if spec.stdin != nil {
		cmd.Stdin = spec.stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.diesWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &proc{name: spec.name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer logFile.Close()
		p.reap()
	}()
	return p, nil
}

// reap waits for the leader to exit, kills what is left of its group while
// the exited (not yet reaped) leader still pins the group id, then reaps it.
func (p *proc) reap() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid(), &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	p.err = p.cmd.Wait()
	p.reaped = true
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// signalGroup signals the whole process group unless it is already gone.
func (p *proc) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(-p.pid(), sig)
	}
}

// exitErr reports whether the process has ended, and how.
func (p *proc) exitErr() (exited bool, err error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, errors.New("exit status 0")
		}
		return true, p.err
	default:
		return false, nil
	}
}

// errKilled says that a process ignored SIGTERM for its whole grace period.
var errKilled = errors.New("killed: still running after SIGTERM and the grace period")

// stop asks the process group to terminate and kills it after grace; the error wraps
// errKilled when it took SIGKILL.
func (p *proc) stop(grace time.Duration) error {
	p.signalGroup(syscall.SIGTERM)
	if p.wait(grace) {
		return nil
	}
	if err := p.kill(); err != nil {
		return err
	}
	return fmt.Errorf("stop %s: %w", p.name, errKilled)
}

// kill sends SIGKILL to the process group and waits for the leader to be reaped.
func (p *proc) kill() error {
	p.signalGroup(syscall.SIGKILL)
	if !p.wait(10 * time.Second) {
		return fmt.Errorf("stop %s: pid %d did not exit after SIGKILL", p.name, p.pid())
	}
	return nil
}

// wait reports whether the process ends within d.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// stopAll stops procs concurrently: each may spend its grace period. A component that needed
// SIGKILL is not an error: it is gone all the same.
func stopAll(procs []*proc, grace time.Duration) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			if err := p.stop(grace); !errors.Is(err, errKilled) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

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
