package harness

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/e2e/controlplane"
)

// Operator is one operator process ("replica") running outside the cluster, as `make run`
// runs it. Its webhooks are reached through the Env's proxy.
type Operator struct {
	Name        string
	LeaderElect bool

	dir         string
	logPath     string
	webhookPort int
	metricsPort int
	probePort   int
	cmd         *exec.Cmd
	done        chan struct{}
	started     time.Time
}

// PID is the process id.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// WebhookAddr is where this replica's webhook server listens.
func (o *Operator) WebhookAddr() string { return fmt.Sprintf("127.0.0.1:%d", o.webhookPort) }

// MetricsURL is the plain-HTTP metrics endpoint.
func (o *Operator) MetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", o.metricsPort)
}

// LogPath is the file that receives the process's stdout and stderr.
func (o *Operator) LogPath() string { return o.logPath }

// Exited is closed when the process has exited.
func (o *Operator) Exited() <-chan struct{} { return o.done }

// Alive reports whether the process still runs.
func (o *Operator) Alive() bool {
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// Writes returns the write requests the operator's clients sent so far, by HTTP method.
func (o *Operator) Writes(ctx context.Context) (map[string]float64, error) {
	s, err := ScrapeURL(ctx, o.MetricsURL())
	if err != nil {
		return nil, err
	}
	return ClientWrites(s), nil
}

// IsLeader reads the leader_election_master_status gauge of the process.
func (o *Operator) IsLeader(ctx context.Context) (bool, error) {
	samples, err := ScrapeURL(ctx, o.MetricsURL())
	if err != nil {
		return false, err
	}
	for _, s := range samples {
		if s.Name == "leader_election_master_status" && s.Value == 1 {
			return true, nil
		}
	}
	return false, nil
}

// Memory reads VmHWM (peak resident set) and VmRSS from /proc/<pid>/status, in bytes.
func (o *Operator) Memory() (hwm, rss int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", o.PID()))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, perr := strconv.ParseInt(fields[0], 10, 64)
		if perr != nil {
			continue
		}
		switch k {
		case "VmHWM":
			hwm = n * 1024
		case "VmRSS":
			rss = n * 1024
		}
	}
	if hwm == 0 {
		return 0, 0, errors.New("no VmHWM in /proc status")
	}
	return hwm, rss, sc.Err()
}

// Tail returns the last n lines of the log.
func (o *Operator) Tail(n int) string {
	data, _ := os.ReadFile(o.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// launch starts the process; it does not wait for readiness.
func (e *Env) launch(name string, leaderElect bool) (*Operator, error) {
	e.seq++
	o := &Operator{Name: name, LeaderElect: leaderElect, done: make(chan struct{})}
	o.dir = filepath.Join(e.Dir, "operators", fmt.Sprintf("%s-%03d", name, e.seq))
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	o.logPath = filepath.Join(o.dir, "operator.log")
	for _, p := range []*int{&o.webhookPort, &o.metricsPort, &o.probePort} {
		var err error
		if *p, err = controlplane.FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"manager",
		"--install-crd",
		"--leader-elect=" + strconv.FormatBool(leaderElect),
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", o.webhookPort),
		// Every replica tells the apiserver to call the proxy, as an in-cluster replica would
		// name the Service.
		fmt.Sprintf("--webhook-local-url=https://localhost:%d", e.proxy.Port()),
		"--webhook-namespace=" + OperatorNamespace,
		"--webhook-cert-dir=" + filepath.Join(o.dir, "certs"),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", o.metricsPort), "--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", o.probePort),
	}
	if leaderElect {
		args = append(args, "--leader-election-namespace="+OperatorNamespace)
	}
	args = append(args, e.opts.OperatorArgs...)
	logFile, err := os.Create(o.logPath)
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(e.bin, args...)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+e.CP.KubeconfigPath)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start operator: %w", err)
	}
	o.started = time.Now()
	go func() { _ = o.cmd.Wait(); logFile.Close(); close(o.done) }()
	return o, nil
}

// waitServing waits until /readyz answers 200 and the webhook port presents a certificate.
func (o *Operator) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", o.probePort)
	client := &http.Client{Timeout: 2 * time.Second}
	ready := false
	for time.Now().Before(deadline) {
		if !o.Alive() {
			return fmt.Errorf("operator %s exited during start-up:\n%s", o.Name, o.Tail(40))
		}
		if !ready {
			if resp, err := client.Get(url); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		if ready {
			d := &net.Dialer{Timeout: 2 * time.Second}
			conn, err := tls.DialWithDialer(d, "tcp", o.WebhookAddr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks that a certificate is served
			if err == nil {
				_ = conn.Close()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("operator %s not serving after %s:\n%s", o.Name, timeout, o.Tail(40))
}

// signal sends sig to the process group.
func (o *Operator) signal(sig syscall.Signal) {
	if o.cmd.Process != nil {
		_ = syscall.Kill(-o.cmd.Process.Pid, sig)
	}
}

// wait waits up to d for the process to exit.
func (o *Operator) wait(d time.Duration) bool {
	select {
	case <-o.done:
		return true
	case <-time.After(d):
		return false
	}
}
