package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"example.com/task-operator/internal/process"
)

// The components of a control plane: the processes it runs, whether they live, what they log.

// Components lists the components of this control plane in start order.
func (cp *ControlPlane) Components() []string {
	names := []string{Etcd, KubeAPIServer}
	for _, p := range cp.procs {
		names = append(names, p.Name())
	}
	return names
}

// Logs returns the whole log of a component ("" if it has none).
func (cp *ControlPlane) Logs(component string) string {
	data, err := os.ReadFile(cp.logPath(component))
	if err != nil {
		return ""
	}
	return string(data)
}

// TailLogs returns the last lines of every component's log, for failure
// reports.
func (cp *ControlPlane) TailLogs(lines int) string {
	var b strings.Builder
	for _, name := range cp.Components() {
		fmt.Fprintf(&b, "==> %s <==\n%s\n", cp.logPath(name), Tail(cp.Logs(name), lines))
	}
	return b.String()
}

// PIDs returns the pid of every process the control plane started, by
// component name ("watchdog" included). The values stay available after Stop.
func (cp *ControlPlane) PIDs() map[string]int {
	pids := maps.Clone(cp.envPIDs)
	for _, p := range cp.procs {
		pids[p.Name()] = p.PID()
	}
	if cp.watchdog != nil {
		pids["watchdog"] = cp.watchdog.proc.PID()
	}
	return pids
}

// Alive returns nil while every component still runs, else an error naming
// the first one that exited, with the end of its log.
func (cp *ControlPlane) Alive() error {
	for _, name := range []string{Etcd, KubeAPIServer} {
		if pid, ok := cp.envPIDs[name]; ok && !ProcessAlive(pid) {
			return cp.componentError(name, errors.New("exited unexpectedly"))
		}
	}
	for _, p := range cp.procs {
		if exited, err := p.ExitErr(); exited {
			return cp.componentError(p.Name(), fmt.Errorf("exited unexpectedly: %w", err))
		}
	}
	return nil
}

func (cp *ControlPlane) logPath(component string) string {
	return filepath.Join(cp.LogDir, component+".log")
}

// componentError attributes err to a component and quotes the end of the
// logs of logsOf (default: the component itself).
func (cp *ControlPlane) componentError(component string, err error, logsOf ...string) error {
	if len(logsOf) == 0 {
		logsOf = []string{component}
	}
	var b strings.Builder
	for _, name := range logsOf {
		fmt.Fprintf(&b, "\n--- last %d lines of %s ---\n%s", logTailLines, cp.logPath(name), Tail(cp.Logs(name), logTailLines))
	}
	return fmt.Errorf("%s: %w%s", component, err, b.String())
}

// RestartComponent stops one of the components the control plane started itself
// (kube-controller-manager, kube-scheduler, KWOK) and starts it again with the same arguments,
// as an administrator restarts one to drop what it holds in memory. Its log until then moves
// to <component>.log.N, the first N free. If the new process fails to start, the old one stays
// listed, exited, so that Alive reports it. Not safe to call concurrently with Alive, PIDs or
// Stop.
func (cp *ControlPlane) RestartComponent(name string) error {
	i := slices.IndexFunc(cp.procs, func(p *process.Proc) bool { return p.Name() == name })
	if i < 0 {
		return fmt.Errorf("restart %s: not a component this control plane started (%v)", name, cp.Components())
	}
	// One that needed SIGKILL after the grace period is gone all the same.
	if err := cp.procs[i].Stop(stopGrace); err != nil && !errors.Is(err, process.ErrKilled) {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	if err := keepLog(cp.logPath(name)); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	p, err := cp.launch(name, cp.args[name])
	if p != nil {
		cp.procs[i] = p
	}
	if err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// keepLog moves a log aside to path.N, the first N not taken; a missing log is not an error.
func keepLog(path string) error {
	for n := 1; ; n++ {
		kept := fmt.Sprintf("%s.%d", path, n)
		if _, err := os.Stat(kept); err == nil {
			continue
		}
		err := os.Rename(path, kept)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
}
