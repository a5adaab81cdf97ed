// Package process starts the processes tests need (control-plane components, the operator,
// stand-in pods) in process groups of their own, and stops them with everything they spawned.
package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a process the harness started itself, in its own process group so
// that stopping it also stops anything it spawned.
type Proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // Wait's result, valid after done is closed

	// mu is held while signalling the group and while reaping the leader:
	// the group id is the leader's pid, which is free for reuse once reaped.
	mu     sync.Mutex
	reaped bool
}

// Spec says how to start a process.
type Spec struct {
	Name    string
	Bin     string
	Args    []string
	Env     []string // the whole environment
	LogPath string   // receives stdout and stderr
	Stdin   *os.File // nil: /dev/null
	// DiesWithParent has the kernel SIGKILL the process when the thread that started it
	// ends, for processes no watchdog covers.
	DiesWithParent bool
}

// Start starts a process in a new process group.
func Start(spec Spec) (*Proc, error) {
	logFile, err := os.Create(spec.LogPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Bin, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.DiesWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Proc{name: spec.Name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer logFile.Close()
		p.reap()
	}()
	return p, nil
}

// reap waits for the leader to exit, kills what is left of its group while
// the exited (not yet reaped) leader still pins the group id, then reaps it.
func (p *Proc) reap() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.PID(), &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	p.err = p.cmd.Wait()
	p.reaped = true
}

func (p *Proc) PID() int { return p.cmd.Process.Pid }

// SignalGroup signals the whole process group unless it is already gone.
func (p *Proc) SignalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(-p.PID(), sig)
	}
}

// ExitErr reports whether the process has ended, and how.
func (p *Proc) ExitErr() (exited bool, err error) {
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

// ErrKilled says that a process ignored SIGTERM for its whole grace period and was killed.
var ErrKilled = errors.New("killed: still running after SIGTERM and the grace period")

// Stop asks the process group to terminate and kills it after grace; the error wraps
// ErrKilled when it took SIGKILL.
func (p *Proc) Stop(grace time.Duration) error {
	p.SignalGroup(syscall.SIGTERM)
	if p.Wait(grace) {
		return nil
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("stop %s: %w", p.name, ErrKilled)
}

// Kill sends SIGKILL to the process group and waits for the leader to be reaped.
func (p *Proc) Kill() error {
	p.SignalGroup(syscall.SIGKILL)
	if !p.Wait(10 * time.Second) {
		return fmt.Errorf("stop %s: pid %d did not exit after SIGKILL", p.name, p.PID())
	}
	return nil
}

// Wait reports whether the process ends within d.
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// StopAll stops procs concurrently: each may spend its grace period. A component that needed
// SIGKILL is not an error: it is gone all the same.
func StopAll(procs []*Proc, grace time.Duration) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			if err := p.Stop(grace); !errors.Is(err, ErrKilled) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Name is the name the process was started under (Spec.Name).
func (p *Proc) Name() string { return p.name }
