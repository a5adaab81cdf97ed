// Package harness is what only the benchmarks need on top of internal/testenv: operator
// replicas behind a TCP proxy that stands in for the webhook Service, the benchmark client,
// and the trackers and counts that turn a run into figures.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/kubelet"
	"example.com/task-operator/internal/testenv"
)

// startAttempts is how often a replica that exits during start-up is started, as a Deployment
// would restart a crashing pod.
const startAttempts = 3

// Options configures New.
type Options struct {
	// QPS and Burst are the benchmark client's rate limits (default 500 and 1000).
	QPS   float32
	Burst int
	// Workers is the number of concurrent clients that create objects (default 32).
	Workers int
	// OperatorArgs are appended to every operator's command line.
	OperatorArgs []string
	// Log receives progress lines (default stderr).
	Log io.Writer
}

// Env is a control plane plus the operator replicas the benchmarks start on it.
type Env struct {
	CP *testenv.ControlPlane
	// Cfg is an admin config with the benchmark client's rate limits.
	Cfg     *rest.Config
	Client  client.Client
	Kube    kubernetes.Interface
	Dyn     dynamic.Interface
	Workers int

	// CrashedStarts counts operator processes that exited during start-up and were started
	// again.
	CrashedStarts int

	opts  Options
	proxy *Proxy
	ops   []*testenv.Operator
	kueue *testenv.Kueue
}

// New makes the benchmark clients and the webhook proxy on cp and creates the operator's
// namespace. No operator runs yet: see EnsureOperators.
func New(ctx context.Context, cp *testenv.ControlPlane, opts Options) (*Env, error) {
	opts = opts.withDefaults()
	e := &Env{CP: cp, Workers: opts.Workers, opts: opts}
	e.Cfg = rest.CopyConfig(cp.Config)
	e.Cfg.QPS, e.Cfg.Burst = opts.QPS, opts.Burst
	e.Cfg.UserAgent = "task-operator-bench"
	if err := e.newClients(); err != nil {
		return nil, fmt.Errorf("bench clients: %w", err)
	}
	if err := testenv.CreateNamespace(ctx, e.Client, testenv.OperatorNamespace); err != nil {
		return nil, err
	}
	var err error
	if e.proxy, err = NewProxy(); err != nil {
		return nil, err
	}
	return e, nil
}

func (o Options) withDefaults() Options {
	if o.QPS == 0 {
		o.QPS = 500
	}
	if o.Burst == 0 {
		o.Burst = 1000
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	return o
}

func (e *Env) newClients() error {
	scheme, err := testenv.NewScheme()
	if err != nil {
		return err
	}
	if e.Client, err = client.New(e.Cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if e.Kube, err = kubernetes.NewForConfig(e.Cfg); err != nil {
		return err
	}
	e.Dyn, err = dynamic.NewForConfig(e.Cfg)
	return err
}

// Logf writes a progress line.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.opts.Log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Close stops every operator, Kueue and the proxy; the control plane is the caller's.
func (e *Env) Close() {
	if err := e.StopAll(); err != nil {
		e.Logf("%v", err)
	}
	if e.kueue != nil {
		if err := e.kueue.Stop(); err != nil {
			e.Logf("stop kueue: %v", err)
		}
	}
	if e.proxy != nil {
		e.proxy.Close()
	}
}

// EnsureKueue installs Kueue on the control plane unless it runs already. The control plane
// must stand in for testenv.KueueNamespace (kubelet.Options: see ControlPlaneOptions). It says
// whether Kueue was installed now: operators started before do not watch its Workloads.
func (e *Env) EnsureKueue(ctx context.Context) (installed bool, err error) {
	if e.kueue != nil {
		return false, nil
	}
	began := time.Now()
	if e.kueue, err = e.CP.InstallKueue(ctx); err != nil {
		return false, err
	}
	e.Logf("kueue ready in %s", time.Since(began).Round(time.Millisecond))
	return true, nil
}

// KueueSupported says why Kueue cannot run here (its manager needs a pod network: root and ip),
// or nil.
func KueueSupported(cp *testenv.ControlPlane) error {
	if err := kubelet.PodNetworksSupported(); err != nil {
		return err
	}
	return cp.KueueAvailable()
}

// ControlPlaneOptions are the options the benchmarks start their control plane with: Full, on
// nodes fake Nodes, and standing in for Kueue's namespace where pod networks work, so the queue
// scenario can install Kueue.
func ControlPlaneOptions(nodes int) testenv.Options {
	opts := testenv.Options{Full: true, Nodes: nodes}
	if kubelet.PodNetworksSupported() == nil {
		_ = kubelet.CleanStalePodNetworks()
		opts.StandInNamespaces = []string{testenv.KueueNamespace}
	}
	return opts
}

// EnsureNamespace creates ns unless it exists.
func (e *Env) EnsureNamespace(ctx context.Context, ns string) error {
	return testenv.CreateNamespace(ctx, e.Client, ns)
}

// Operators returns the running replicas, oldest first.
func (e *Env) Operators() []*testenv.Operator { return slices.Clone(e.ops) }

// StartOperator starts a replica and waits until it serves its webhooks through the proxy and
// the apiserver trusts them. A process that exits during start-up is started again, at most
// startAttempts times in all; CrashedStarts counts those.
func (e *Env) StartOperator(ctx context.Context, name string, leaderElect bool, args ...string) (*testenv.Operator, error) {
	opts := testenv.OperatorOptions{
		Name:        name,
		Kubeconfig:  e.CP.KubeconfigPath,
		LeaderElect: leaderElect,
		// Every replica tells the apiserver to call the proxy, as an in-cluster replica would
		// name the Service.
		WebhookURL: fmt.Sprintf("https://localhost:%d", e.proxy.Port()),
		// Behind the proxy a replica drains as one behind a Service does: after SIGTERM it
		// keeps serving, closing each connection after its response.
		Args: append(append([]string{"--shutdown-delay=" + replicaDrain.String()}, e.opts.OperatorArgs...), args...),
	}
	o, err := testenv.StartOperator(ctx, opts)
	for attempt := 1; errors.Is(err, testenv.ErrOperatorExited) && attempt < startAttempts && ctx.Err() == nil; attempt++ {
		e.CrashedStarts++
		e.Logf("operator %s crashed during start-up, starting it again: %s", name, testenv.Tail(err.Error(), 1))
		o, err = testenv.StartOperator(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	e.proxy.Add(o.WebhookAddr())
	e.ops = append(e.ops, o)
	if err := testenv.WaitWebhooks(ctx, e.Cfg, time.Minute); err != nil {
		return o, fmt.Errorf("%w\noperator log:\n%s", err, o.Tail(30))
	}
	return o, nil
}

// KillOperator sends SIGKILL and waits for the process to go. The proxy still lists the replica
// until it is gone, as endpoints would for a pod that died without notice.
func (e *Env) KillOperator(o *testenv.Operator) error {
	err := o.Kill()
	e.forget(o)
	return err
}

// replicaDrain is each replica's --shutdown-delay.
const replicaDrain = 2 * time.Second

// StopOperator takes the replica out of the proxy (as endpoints drop a terminating pod) and
// sends SIGTERM; the replica drains for replicaDrain, and StopOperator waits for a clean exit.
func (e *Env) StopOperator(o *testenv.Operator) error {
	e.proxy.Remove(o.WebhookAddr())
	err := o.Stop(replicaDrain + 30*time.Second)
	e.forget(o)
	return err
}

func (e *Env) forget(o *testenv.Operator) {
	e.proxy.Remove(o.WebhookAddr())
	e.ops = slices.DeleteFunc(e.ops, func(x *testenv.Operator) bool { return x == o })
}

// StopAll stops every replica with SIGTERM.
func (e *Env) StopAll() error {
	var errs []error
	for _, o := range e.Operators() {
		errs = append(errs, e.StopOperator(o))
	}
	return errors.Join(errs...)
}

// EnsureOperators leaves exactly n running replicas with the given leader election setting,
// stopping the others and starting what is missing. With fresh, every replica is a new process.
func (e *Env) EnsureOperators(ctx context.Context, n int, leaderElect bool, fresh bool) error {
	for _, o := range e.Operators() {
		if fresh || o.Opts.LeaderElect != leaderElect || !o.Alive() {
			if err := e.StopOperator(o); err != nil {
				e.Logf("%v", err)
			}
		}
	}
	for len(e.ops) > n {
		if err := e.StopOperator(e.ops[len(e.ops)-1]); err != nil {
			e.Logf("%v", err)
		}
	}
	for len(e.ops) < n {
		name := fmt.Sprintf("replica-%d", len(e.ops))
		if _, err := e.StartOperator(ctx, name, leaderElect); err != nil {
			return err
		}
	}
	return nil
}
