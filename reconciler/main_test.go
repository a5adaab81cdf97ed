package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/reconciler"
)

// The integration tests run the controller in-process against a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and KWOK fake nodes), started once
// for the package by the first test that needs it. Each test works in its own namespace with
// its own manager watching only that namespace, so tests run in parallel and a test can stop
// and restart "the operator" without disturbing the others.

var scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, batchv1.AddToScheme, corev1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{Verbosity: 0}))
	testenv.Main(m, testenv.Options{Full: true})
}

// cluster is a client config of the shared control plane, with the rate limits of a busy
// operator.
func cluster(t *testing.T) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Shared(t).Config)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// env is one test's namespace, client and operator.
type env struct {
	t   *testing.T
	cfg *rest.Config
	c   client.Client
	ns  string
	op  *operator
}

// newEnv makes a namespace and starts an operator for it.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOpts(t, false)
}

func newEnvOpts(t *testing.T, noOperator bool) *env {
	t.Helper()
	cfg := cluster(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	e := &env{t: t, cfg: cfg, c: c, ns: testenv.NewNamespace(t, c)}
	if !noOperator {
		e.op = e.startOperator()
	}
	return e
}

// newEnvWithoutOperator makes a namespace; the test starts the operator itself.
func newEnvWithoutOperator(t *testing.T) *env {
	t.Helper()
	return newEnvOpts(t, true)
}

// operator is a manager running the Task controller, with every API write it sends counted.
type operator struct {
	cancel context.CancelFunc
	done   chan error
	writes *writeCounter
}

func (e *env) startOperator() *operator { return e.startOperatorWith(operatorOptions{}) }

// startOperatorAs runs the operator as the given user (impersonated); "" is the admin.
func (e *env) startOperatorAs(user string) *operator {
	return e.startOperatorWith(operatorOptions{user: user})
}

// operatorOptions vary how a test's operator runs.
type operatorOptions struct {
	// user is impersonated; "" is the admin.
	user string
	// hide, when set, hides the Jobs it names from the controller's cache reads (a lagging
	// cache, or labels stripped by a policy); reads past the cache still see them.
	hide func(name string) bool
	// expectationTimeout shortens the wait for the cache to show a created Job.
	expectationTimeout time.Duration
}

func (e *env) startOperatorWith(oo operatorOptions) *operator {
	e.t.Helper()
	w := &writeCounter{}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: oo.user}
	cfg.Wrap(w.wrap)
	cacheOpts := reconciler.CacheOptions()
	cacheOpts.DefaultNamespaces = map[string]cache.Config{e.ns: {}}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		NewCache:               reconciler.NewCache,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 ctrl.Log.WithName(e.ns),
	}
	if oo.hide != nil {
		opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return &hidingClient{Client: c, hide: oo.hide}, nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		e.t.Fatalf("new manager: %v", err)
	}
	ropts := reconciler.Options{MaxConcurrentReconciles: 2}
	if oo.expectationTimeout > 0 {
		ropts = reconciler.WithExpectationTimeout(ropts, oo.expectationTimeout)
	}
	if err := reconciler.SetupWithManager(mgr, ropts); err != nil {
		e.t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan error, 1), writes: w}
	go func() { op.done <- mgr.Start(ctx) }()
	e.t.Cleanup(func() { op.stop(e.t) })
	return op
}

// hidingClient is the manager's client (cache reads) with some Jobs hidden from Get and List.
type hidingClient struct {
	client.Client
	hide func(name string) bool
}

func (c *hidingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); ok && c.hide(key.Name) {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *hidingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if jobs, ok := list.(*batchv1.JobList); ok {
		jobs.Items = slices.DeleteFunc(jobs.Items, func(j batchv1.Job) bool { return c.hide(j.Name) })
	}
	return nil
}

// stop stops the manager and waits for it; calling it again is harmless.
func (o *operator) stop(t *testing.T) {
	t.Helper()
	if o.cancel == nil {
		return
	}
	o.cancel()
	o.cancel = nil
	select {
	case err := <-o.done:
		if err != nil {
			t.Errorf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("manager did not stop within 30s")
	}
}

// writeCounter records every non-GET request a manager sends (GET covers list and watch).
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			w.mu.Lock()
			w.writes = append(w.writes, r.Method+" "+r.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// take returns the writes so far, split into Events and everything else, and resets.
func (w *writeCounter) take() (writes, events []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.writes {
		if strings.Contains(s, "/events") {
			events = append(events, s)
		} else {
			writes = append(writes, s)
		}
	}
	w.writes = nil
	return writes, events
}

// task returns a Task in the env's namespace: a Shell "true" with fast retries.
func (e *env) task(name string, mut ...func(*v1.Task)) *v1.Task {
	task := &v1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{}},
		Spec: v1.TaskSpec{
			Runner: v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "true"}},
			Retry: &v1.RetryPolicy{MaxRetries: 0, Backoff: &v1.Backoff{
				Initial: &metav1.Duration{Duration: time.Second}, Factor: 2, Max: &metav1.Duration{Duration: 4 * time.Second},
			}},
		},
	}
	for _, m := range mut {
		m(task)
	}
	return task
}

func (e *env) create(task *v1.Task) *v1.Task {
	e.t.Helper()
	if err := e.c.Create(e.t.Context(), task); err != nil {
		e.t.Fatalf("create task %s: %v", task.Name, err)
	}
	return task
}

func (e *env) get(name string) *v1.Task {
	e.t.Helper()
	task := &v1.Task{}
	if err := e.c.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, task); err != nil {
		e.t.Fatalf("get task %s: %v", name, err)
	}
	return task
}

// update re-reads the Task, applies mut and updates it, retrying on conflicts.
func (e *env) update(name string, mut func(*v1.Task)) {
	e.t.Helper()
	for range 10 {
		task := e.get(name)
		mut(task)
		err := e.c.Update(e.t.Context(), task)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			e.t.Fatalf("update task %s: %v", name, err)
		}
	}
	e.t.Fatalf("update task %s: too many conflicts", name)
}

func (e *env) jobs(taskName string) []batchv1.Job {
	e.t.Helper()
	var list batchv1.JobList
	if err := e.c.List(e.t.Context(), &list, client.InNamespace(e.ns), client.MatchingLabels{v1.LabelTaskName: taskName}); err != nil {
		e.t.Fatalf("list jobs: %v", err)
	}
	return list.Items
}

func (e *env) pods(taskName string) []corev1.Pod {
	e.t.Helper()
	var list corev1.PodList
	if err := e.c.List(e.t.Context(), &list, client.InNamespace(e.ns), client.MatchingLabels{v1.LabelTaskName: taskName}); err != nil {
		e.t.Fatalf("list pods: %v", err)
	}
	return list.Items
}

const waitTimeout = 90 * time.Second

// waitPhase waits for the Task to reach phase and returns it.
func (e *env) waitPhase(name string, phase v1.Phase) *v1.Task {
	e.t.Helper()
	var task *v1.Task
	testenv.Eventually(e.t, waitTimeout, fmt.Sprintf("task %s to be %s", name, phase), func(context.Context) (bool, error) {
		task = e.get(name)
		return task.Status.Phase == phase, errors.New(describe(task))
	})
	return task
}

func describe(task *v1.Task) string {
	st := task.Status
	last := ""
	if st.LastJob != nil {
		last = st.LastJob.Name
	}
	return fmt.Sprintf("phase=%q attempts=%d active=%d lastJob=%q missed=%d lastError=%q", st.Phase, st.Attempts, len(st.ActiveJobs), last, st.MissedRuns, st.LastError)
}

// eventReasons lists the reasons of the Events recorded on the Task (events.k8s.io).
func (e *env) eventReasons(task *v1.Task) []string {
	e.t.Helper()
	var list corev1.EventList
	if err := e.c.List(e.t.Context(), &list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.UID == task.UID {
			out = append(out, ev.Reason)
		}
	}
	return out
}

func withLabels(kv ...string) func(*v1.Task) {
	return func(t *v1.Task) {
		for i := 0; i+1 < len(kv); i += 2 {
			t.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withRetries(n int32) func(*v1.Task) {
	return func(t *v1.Task) { t.Spec.Retry.MaxRetries = n }
}

// wantKstatus checks what kstatus (sigs.k8s.io/cli-utils, as Flux, kpt and Argo CD health checks
// use it) computes for a Task as read from the API server.
func wantKstatus(t *testing.T, task *v1.Task, want kstatus.Status) {
	t.Helper()
	got, err := kstatusOf(task)
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	if got != want {
		t.Errorf("kstatus of %s (phase %s) = %s, want %s", task.Name, task.Status.Phase, got, want)
	}
}

func kstatusOf(task *v1.Task) (kstatus.Status, error) {
	task = task.DeepCopy()
	task.APIVersion, task.Kind = v1.GroupVersion.String(), v1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		return "", err
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return "", err
	}
	return res.Status, nil
}
