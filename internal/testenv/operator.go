package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/internal/process"
)

// OperatorNamespace is where an operator started here keeps its webhook certificate Secret and
// its Lease, as config/default deploys it.
const OperatorNamespace = "task-operator-system"

// ErrOperatorExited says that the operator process ended while it was awaited.
var ErrOperatorExited = errors.New("operator exited")

const defaultOperatorReadyTimeout = 2 * time.Minute

// OperatorOptions says how to run the operator. Kubeconfig is required; every other field has
// a default that runs it as `make run` does: one process on loopback, no leader election, its
// webhooks called by the apiserver at its own port.
type OperatorOptions struct {
	// Name names the process in errors and its directory (default "operator").
	Name string
	// Kubeconfig is the identity the process runs as (required): the control plane's admin
	// kubeconfig, or one of a ServiceAccount's to run it with the RBAC of config/rbac.
	Kubeconfig string
	// Namespace holds the webhook certificate Secret and the Lease (default OperatorNamespace).
	// It must exist.
	Namespace string
	// LeaderElect turns leader election on, with the Lease in Namespace.
	LeaderElect bool
	// Host is the address the webhook, metrics and probe servers bind (default 127.0.0.1).
	Host string
	// WebhookPort, MetricsPort, ProbePort and PprofPort default to free ports.
	WebhookPort, MetricsPort, ProbePort, PprofPort int
	// WebhookURL is where the apiserver is told to call the webhooks (--webhook-local-url);
	// default https://<Host>:<WebhookPort>, localhost for a loopback Host. Replicas behind one
	// proxy share its URL.
	WebhookURL string
	// Args are appended to the command line; a flag repeated here overrides the default.
	Args []string
	// Env is added to the environment.
	Env []string
	// Dir receives operator.log and the webhook certificates (default a new directory under
	// WorkDir).
	Dir string
	// ReadyTimeout bounds StartOperator's wait for readiness (default 2m).
	ReadyTimeout time.Duration
}

// Operator is the operator binary running as a process outside the cluster.
type Operator struct {
	// Opts are the options it runs with, defaults filled in.
	Opts OperatorOptions
	proc *process.Proc
}

var operatorSeq atomic.Int64

func (o OperatorOptions) withDefaults() (OperatorOptions, error) {
	if o.Kubeconfig == "" {
		return o, errors.New("operator options: Kubeconfig is required")
	}
	if o.Name == "" {
		o.Name = "operator"
	}
	if o.Namespace == "" {
		o.Namespace = OperatorNamespace
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	for _, port := range []*int{&o.WebhookPort, &o.MetricsPort, &o.ProbePort, &o.PprofPort} {
		if *port != 0 {
			continue
		}
		var err error
		if *port, err = FreePort(); err != nil {
			return o, err
		}
	}
	if o.WebhookURL == "" {
		o.WebhookURL = "https://" + net.JoinHostPort(webhookHost(o.Host), strconv.Itoa(o.WebhookPort))
	}
	if o.Dir == "" {
		work, err := WorkDir()
		if err != nil {
			return o, err
		}
		o.Dir = filepath.Join(work, "operators", fmt.Sprintf("%s-%03d", o.Name, operatorSeq.Add(1)))
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = defaultOperatorReadyTimeout
	}
	return o, nil
}

// webhookHost is the name the apiserver calls a webhook server bound to host by. The operator
// puts that name in its certificate as a DNS name, so a loopback address goes by localhost.
func webhookHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "localhost"
	}
	return host
}

func (o OperatorOptions) args() []string {
	args := []string{"manager",
		"--install-crd",
		"--leader-elect=" + strconv.FormatBool(o.LeaderElect),
		"--webhook-host=" + o.Host, "--webhook-port=" + strconv.Itoa(o.WebhookPort),
		"--webhook-local-url=" + o.WebhookURL,
		"--webhook-namespace=" + o.Namespace,
		"--webhook-cert-dir=" + filepath.Join(o.Dir, "certs"),
		"--metrics-bind-address=" + net.JoinHostPort(o.Host, strconv.Itoa(o.MetricsPort)), "--metrics-secure=false",
		"--health-probe-bind-address=" + net.JoinHostPort(o.Host, strconv.Itoa(o.ProbePort)),
		"--pprof-bind-address=" + net.JoinHostPort(o.Host, strconv.Itoa(o.PprofPort)),
		// No version usage record (a ConfigMap PATCH a minute while Tasks are written), so
		// that the tests and benches that count the operator's writes count the reconciler's
		// alone; the tests of the record turn it on in Args.
		"--usage-record-interval=0",
	}
	if o.LeaderElect {
		args = append(args, "--leader-election-namespace="+o.Namespace)
	}
	return append(args, o.Args...)
}

// LaunchOperator starts the operator process and returns at once; StartOperator also waits
// until it is ready.
func LaunchOperator(opts OperatorOptions) (*Operator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bin, err := OperatorBinary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("operator %s: %w", opts.Name, err)
	}
	env := append(os.Environ(), "KUBECONFIG="+opts.Kubeconfig)
	p, err := process.Start(process.Spec{
		Name: opts.Name, Bin: bin, Args: opts.args(), Env: append(env, opts.Env...),
		LogPath: filepath.Join(opts.Dir, "operator.log"), DiesWithParent: true,
	})
	if err != nil {
		return nil, err
	}
	return &Operator{Opts: opts, proc: p}, nil
}

// StartOperator starts the operator and waits until it is ready (see WaitReady). On failure
// the process is killed; the error wraps ErrOperatorExited when it ended by itself.
func StartOperator(ctx context.Context, opts OperatorOptions) (*Operator, error) {
	o, err := LaunchOperator(opts)
	if err != nil {
		return nil, err
	}
	if err := o.WaitReady(ctx, o.Opts.ReadyTimeout); err != nil {
		_ = o.Kill()
		return nil, err
	}
	return o, nil
}

// WaitReady waits until /readyz answers 200 and the webhook port presents a certificate: the
// process serves. Whether the apiserver can reach it is WaitWebhooks' question.
func (o *Operator) WaitReady(ctx context.Context, timeout time.Duration) error {
	probe := &http.Client{Timeout: 2 * time.Second}
	err := Poll(ctx, timeout, 200*time.Millisecond, fmt.Sprintf("operator %s to serve", o.Opts.Name), func(ctx context.Context) (bool, error) {
		if !o.Alive() {
			return false, Permanent(ErrOperatorExited)
		}
		if err := getOK(ctx, probe, o.ProbeURL()+"/readyz"); err != nil {
			return false, err
		}
		err := servesCertificate(ctx, o.WebhookAddr())
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%w\noperator log (tail):\n%s", err, o.Tail(40))
	}
	return nil
}

func getOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func servesCertificate(ctx context.Context, addr string) error {
	d := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 2 * time.Second},
		Config:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // only checks that a certificate is served
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	return conn.Close()
}

// WaitWebhooks waits until the apiserver can call the operator's webhooks: a server-side dry
// run of a create at v1alpha1 passes the conversion and the admission webhooks only then.
func WaitWebhooks(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("wait for webhooks: %w", err)
	}
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       taskv1.Kind,
		"metadata":   map[string]any{"name": "webhook-probe", "namespace": "default"},
		"spec":       map[string]any{"type": "shell", "shell": "true"},
	}}
	tasks := dyn.Resource(taskv1.ResourceAt(v1alpha1.GroupVersion.Version)).Namespace(metav1.NamespaceDefault)
	return Poll(ctx, timeout, 250*time.Millisecond, "the apiserver to reach the webhooks", func(ctx context.Context) (bool, error) {
		_, err := tasks.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, err
	})
}

// PID is the process id.
func (o *Operator) PID() int { return o.proc.PID() }

// Name is Opts.Name.
func (o *Operator) Name() string { return o.Opts.Name }

// WebhookAddr is where the webhook server listens.
func (o *Operator) WebhookAddr() string {
	return net.JoinHostPort(o.Opts.Host, strconv.Itoa(o.Opts.WebhookPort))
}

// MetricsURL is the plain-HTTP metrics endpoint.
func (o *Operator) MetricsURL() string {
	return "http://" + net.JoinHostPort(o.Opts.Host, strconv.Itoa(o.Opts.MetricsPort)) + "/metrics"
}

// ProbeURL is the base URL of /healthz and /readyz.
func (o *Operator) ProbeURL() string {
	return "http://" + net.JoinHostPort(o.Opts.Host, strconv.Itoa(o.Opts.ProbePort))
}

// PprofURL is the base URL of Go's /debug/pprof endpoints.
func (o *Operator) PprofURL() string {
	return "http://" + net.JoinHostPort(o.Opts.Host, strconv.Itoa(o.Opts.PprofPort)) + "/debug/pprof"
}

// LogPath is the file that receives the process's stdout and stderr.
func (o *Operator) LogPath() string { return filepath.Join(o.Opts.Dir, "operator.log") }

// Logs returns the whole log so far.
func (o *Operator) Logs() string {
	data, _ := os.ReadFile(o.LogPath())
	return string(data)
}

// Tail returns the last n lines of the log.
func (o *Operator) Tail(n int) string { return TailFile(o.LogPath(), n) }

// Exited is closed once the process has exited.
func (o *Operator) Exited() <-chan struct{} { return o.proc.Done() }

// Alive reports whether the process still runs.
func (o *Operator) Alive() bool {
	exited, _ := o.proc.ExitErr()
	return !exited
}

// Stop sends SIGTERM, waits up to grace for the process to exit and kills it after that; the
// error says so when it had to.
func (o *Operator) Stop(grace time.Duration) error { return o.proc.Stop(grace) }

// Kill sends SIGKILL, as the kernel's OOM killer or a node failure would, and waits until the
// process is gone.
func (o *Operator) Kill() error { return o.proc.Kill() }

// StopAtExit stops the operator when the test binary ends (AtExit), printing the last
// tailLines of its log first when a test failed.
func (o *Operator) StopAtExit(tailLines int) {
	AtExit(func(failed bool) {
		if failed {
			fmt.Fprintf(os.Stderr, "--- operator %s log (tail) ---\n%s\n", o.Name(), o.Tail(tailLines))
		}
		if err := o.Stop(15 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "stop the operator %s: %v\n", o.Name(), err)
		}
	})
}

// Metrics scrapes the process's metrics endpoint.
func (o *Operator) Metrics(ctx context.Context) ([]Sample, error) {
	return ScrapeMetrics(ctx, o.MetricsURL())
}

// IsLeader reports whether the process holds the Lease, by its leader_election_master_status
// gauge.
func (o *Operator) IsLeader(ctx context.Context) (bool, error) {
	samples, err := o.Metrics(ctx)
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

// WriteHeapProfile saves the process's heap profile, taken after a forced garbage collection
// (so its in-use figures are what is live), to file.
func (o *Operator) WriteHeapProfile(ctx context.Context, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.PprofURL()+"/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile of %s: %w", o.Opts.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile of %s: %s", o.Opts.Name, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return errors.Join(err, out.Close())
	}
	return out.Close()
}

// Memory returns the process's peak resident set (VmHWM) and its resident set now, in bytes.
func (o *Operator) Memory() (peak, now int64, err error) { return ProcessMemory(o.PID()) }
