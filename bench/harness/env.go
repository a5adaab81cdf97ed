// Package harness runs what the benchmarks measure: a local control plane with fake nodes
// (e2e/controlplane), the operator binary as one or more processes outside the cluster behind a
// TCP proxy that stands in for the webhook Service, and helpers to create, watch and check
// Tasks and Jobs.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/apis/install"

	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/e2e/controlplane"
)

// OperatorNamespace holds the operator's Secret and Lease.
const OperatorNamespace = "task-operator-system"

// TaskGVR returns the Task resource at a version.
func TaskGVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.com", Version: version, Resource: "tasks"}
}

// Options configures Start.
type Options struct {
	// Nodes is the number of fake Nodes (default 2).
	Nodes int
	// QPS and Burst are the benchmark client's rate limits (default 500 and 1000).
	QPS   float32
	Burst int
	// OperatorArgs are appended to every operator's command line.
	OperatorArgs []string
	// Log receives progress lines (default stderr).
	Log io.Writer
	// KeepDir keeps the working directory (operator logs) after Close.
	KeepDir bool
}

// Env is a running control plane plus the operator replicas the benchmarks start.
type Env struct {
	CP *controlplane.ControlPlane
	// Cfg is an admin config with the benchmark client's rate limits.
	Cfg    *rest.Config
	Scheme *runtime.Scheme
	Client client.Client
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface
	// Dir holds the operator binary and one folder per operator process.
	Dir string

	// CrashedStarts counts operator processes that exited during start-up and were started
	// again.
	CrashedStarts int

	opts  Options
	bin   string
	proxy *Proxy
	ops   []*Operator
	seq   int
}

// Start starts the control plane, builds the operator and creates the operator's namespace.
// No operator runs yet: see EnsureOperators.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 2
	}
	if opts.QPS == 0 {
		opts.QPS = 500
	}
	if opts.Burst == 0 {
		opts.Burst = 1000
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	e := &Env{opts: opts}
	if e.Dir, err = os.MkdirTemp("", "task-operator-bench-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	e.Logf("building the operator")
	if e.bin, err = controlplane.BuildOperator(e.Dir); err != nil {
		return nil, err
	}
	e.Logf("starting the control plane (%d fake nodes)", opts.Nodes)
	if e.CP, err = controlplane.Start(ctx, controlplane.Options{Full: true, Nodes: opts.Nodes, StartTimeout: 4 * time.Minute}); err != nil {
		return nil, err
	}
	e.Logf("control plane ready in %s", e.CP.StartedIn.Round(time.Millisecond))
	e.Cfg = rest.CopyConfig(e.CP.Config)
	e.Cfg.QPS, e.Cfg.Burst = opts.QPS, opts.Burst
	e.Cfg.UserAgent = "task-operator-bench"
	e.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	if err := install.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	if err := apix.AddToScheme(e.Scheme); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if e.Kube, err = kubernetes.NewForConfig(e.Cfg); err != nil {
		return nil, err
	}
	if e.Dyn, err = dynamic.NewForConfig(e.Cfg); err != nil {
		return nil, err
	}
	if err := e.EnsureNamespace(ctx, OperatorNamespace); err != nil {
		return nil, err
	}
	if e.proxy, err = NewProxy(); err != nil {
		return nil, err
	}
	return e, nil
}

// Logf writes a progress line.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.opts.Log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Close stops every operator, the proxy and the control plane.
func (e *Env) Close() {
	for _, o := range e.ops {
		_ = e.stop(o, 10*time.Second)
	}
	e.ops = nil
	if e.proxy != nil {
		e.proxy.Close()
	}
	if e.CP != nil {
		if err := e.CP.Stop(); err != nil {
			e.Logf("stop control plane: %v", err)
		}
	}
	if e.opts.KeepDir {
		e.Logf("kept %s", e.Dir)
	} else if e.Dir != "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// EnsureNamespace creates ns unless it exists.
func (e *Env) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// Operators returns the running replicas, oldest first.
func (e *Env) Operators() []*Operator { return slices.Clone(e.ops) }

// StartOperator starts a replica and waits until it serves its webhooks through the proxy and
// the apiserver trusts them.
//
// A process that exits during start-up is started again, at most twice more, as a Deployment
// would restart a crashing pod; CrashedStarts counts those.
func (e *Env) StartOperator(ctx context.Context, name string, leaderElect bool) (*Operator, error) {
	var o *Operator
	for attempt := 1; ; attempt++ {
		var err error
		if o, err = e.launch(name, leaderElect); err != nil {
			return nil, err
		}
		err = o.waitServing(ctx, 2*time.Minute)
		if err == nil {
			break
		}
		exited := !o.Alive()
		o.signal(syscall.SIGKILL)
		o.wait(10 * time.Second)
		if !exited || attempt == 3 || ctx.Err() != nil {
			return nil, err
		}
		e.CrashedStarts++
		e.Logf("operator %s crashed during start-up, starting it again: %v", name, lastLine(err.Error()))
	}
	e.proxy.Add(o.WebhookAddr())
	e.ops = append(e.ops, o)
	if err := e.WaitWebhooks(ctx, time.Minute); err != nil {
		return o, fmt.Errorf("%w\noperator log:\n%s", err, o.Tail(30))
	}
	return o, nil
}

// KillOperator sends SIGKILL and waits for the process to go. The proxy still lists the replica
// until it is gone, as endpoints would for a pod that died without notice.
func (e *Env) KillOperator(o *Operator) {
	o.signal(syscall.SIGKILL)
	o.wait(30 * time.Second)
	e.forget(o)
}

// StopOperator takes the replica out of the proxy first (as endpoints drop a terminating pod),
// waits drain, then sends SIGTERM and waits for a clean exit.
func (e *Env) StopOperator(o *Operator, drain time.Duration) error {
	e.proxy.Remove(o.WebhookAddr())
	time.Sleep(drain)
	err := e.stop(o, 30*time.Second)
	e.forget(o)
	return err
}

func (e *Env) stop(o *Operator, grace time.Duration) error {
	e.proxy.Remove(o.WebhookAddr())
	o.signal(syscall.SIGTERM)
	if o.wait(grace) {
		return nil
	}
	o.signal(syscall.SIGKILL)
	o.wait(10 * time.Second)
	return fmt.Errorf("operator %s ignored SIGTERM for %s", o.Name, grace)
}

func (e *Env) forget(o *Operator) {
	e.proxy.Remove(o.WebhookAddr())
	e.ops = slices.DeleteFunc(e.ops, func(x *Operator) bool { return x == o })
}

// StopAll stops every replica with SIGTERM.
func (e *Env) StopAll() error {
	var errs []error
	for _, o := range e.Operators() {
		errs = append(errs, e.StopOperator(o, 0))
	}
	return errors.Join(errs...)
}

// EnsureOperators leaves exactly n running replicas with the given leader election setting,
// stopping the others and starting what is missing. With n == 1 and fresh, the replica is
// always a new process.
func (e *Env) EnsureOperators(ctx context.Context, n int, leaderElect bool, fresh bool) error {
	for _, o := range e.Operators() {
		if fresh || o.LeaderElect != leaderElect || !o.Alive() {
			if err := e.StopOperator(o, 0); err != nil {
				e.Logf("%v", err)
			}
		}
	}
	for len(e.ops) > n {
		if err := e.StopOperator(e.ops[len(e.ops)-1], 0); err != nil {
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

// WaitWebhooks waits until a server-side dry-run create at v1alpha1 passes the conversion and
// admission webhooks.
func (e *Env) WaitWebhooks(ctx context.Context, timeout time.Duration) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1",
		"kind":       "Task",
		"metadata":   map[string]any{"name": "webhook-probe", "namespace": "default"},
		"spec":       map[string]any{"type": "shell", "shell": "true"},
	}}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		_, lastErr = e.Dyn.Resource(TaskGVR("v1alpha1")).Namespace("default").Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("webhooks not reachable through the apiserver: %w", lastErr)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
