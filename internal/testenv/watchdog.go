package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/internal/process"
)

// The watchdog covers the exits that skip Stop: a panic outside the test
// goroutine, `go test -timeout`, SIGKILL. It is the harness's own binary
// re-executed with watchdogEnv set; it reads "watch <pid>" and "remove
// <path>" lines from a pipe whose write end only the harness holds, so the
// pipe reaches EOF exactly when the harness dies. On EOF without a prior
// "release" it kills the process group of every watched pid and removes the
// listed paths.
const watchdogEnv = "TESTENV_WATCHDOG"

func init() {
	if os.Getenv(watchdogEnv) != "1" || len(os.Args) < 3 {
		return
	}
	os.Exit(runWatchdog(os.Stdin, os.Stderr, os.Args[2]))
}

// runWatchdog implements the watchdog process. marker is the state
// directory: every watched process names it on its command line, which
// guards against killing a recycled pid.
func runWatchdog(in io.Reader, log io.Writer, marker string) int {
	// The harness's terminal may send these to a whole session; outliving
	// them is the point.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	var pids []int
	var paths []string
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		verb, arg, _ := strings.Cut(lines.Text(), " ")
		switch verb {
		case "release":
			return 0
		case "watch":
			if pid, err := strconv.Atoi(arg); err == nil {
				pids = append(pids, pid)
			}
		case "remove":
			paths = append(paths, arg)
		}
	}
	for _, pid := range pids {
		if err := KillGroup(pid, marker, 5*time.Second); err != nil {
			fmt.Fprintf(log, "watchdog: %v\n", err)
		}
	}
	fmt.Fprintf(log, "watchdog: harness exited without Stop; killed %v\n", pids)
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			fmt.Fprintf(log, "watchdog: %v\n", err)
		}
	}
	return 0
}

type watchdog struct {
	proc *process.Proc
	pipe *os.File // write end
}

// startWatchdog re-executes the running binary as a watchdog for the
// processes whose command lines mention dir.
func startWatchdog(dir, logPath string) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	defer r.Close()
	env := append(os.Environ(), watchdogEnv+"=1")
	// /proc/self/exe still works when `go run` has deleted the binary.
	p, err := process.Start(process.Spec{Name: "watchdog", Bin: "/proc/self/exe", Args: []string{"watchdog", dir}, Env: env, LogPath: logPath, Stdin: r})
	if err != nil {
		w.Close()
		return nil, err
	}
	return &watchdog{proc: p, pipe: w}, nil
}

func (wd *watchdog) watch(pid int) error {
	if _, err := fmt.Fprintf(wd.pipe, "watch %d\n", pid); err != nil {
		return fmt.Errorf("watchdog: watch pid %d: %w", pid, err)
	}
	return nil
}

// removeOnCrash has the watchdog delete path if the harness dies.
func (wd *watchdog) removeOnCrash(path string) error {
	if _, err := fmt.Fprintf(wd.pipe, "remove %s\n", path); err != nil {
		return fmt.Errorf("watchdog: remove %s: %w", path, err)
	}
	return nil
}

// release ends the watchdog without letting it kill anything.
func (wd *watchdog) release() error {
	_, _ = io.WriteString(wd.pipe, "release\n")
	wd.pipe.Close()
	if wd.proc.Wait(5 * time.Second) {
		return nil
	}
	return wd.proc.Kill()
}
