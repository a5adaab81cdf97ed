package versions_test

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
	"example.com/task-operator/versions"
)

// One control plane in Full mode (the garbage collector of kube-controller-manager collects
// dependents; KWOK runs the Jobs), without the Task CRD: each test installs the previous
// release's and lets the operator upgrade it.

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{Full: true, CRDPaths: []string{}})
}

type testEnv struct {
	cp      *testenv.ControlPlane
	cfg     *rest.Config
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	upgrade *testenv.Upgrade
}

var (
	shared  *testEnv
	fixture = testenv.Fixture{Name: "versions test environment", Start: func(cp *testenv.ControlPlane) (err error) {
		shared, err = newTestEnv(cp)
		return err
	}}
)

func cluster(t testing.TB) *testEnv {
	t.Helper()
	fixture.Use(t)
	return shared
}

func newTestEnv(cp *testenv.ControlPlane) (*testEnv, error) {
	env := &testEnv{cp: cp, cfg: rest.CopyConfig(cp.Config)}
	env.cfg.QPS, env.cfg.Burst = -1, 0
	var err error
	if env.kube, err = kubernetes.NewForConfig(env.cfg); err != nil {
		return nil, err
	}
	if env.dyn, err = dynamic.NewForConfig(env.cfg); err != nil {
		return nil, err
	}
	c, err := testenv.NewClient(env.cfg)
	if err != nil {
		return nil, err
	}
	if err := testenv.CreateNamespace(context.Background(), c, testenv.OperatorNamespace); err != nil {
		return nil, err
	}
	if env.upgrade, err = testenv.NewUpgrade(context.Background(), cp); err != nil {
		return nil, err
	}
	testenv.AtExit(func(bool) { _ = env.upgrade.Close() })
	return env, nil
}

// previousRelease replaces the Task CRD with the previous release's (v1alpha1 only) and
// creates n Tasks at v1alpha1 in ns; they are stored at v1alpha1.
func (env *testEnv) previousRelease(ctx context.Context, t testing.TB, ns string, n int) []string {
	t.Helper()
	c, err := testenv.NewClient(env.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.CreateNamespace(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if err := env.upgrade.InstallPreviousRelease(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := env.upgrade.CreateV1alpha1Tasks(ctx, []string{ns}, n, 4)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// startOperator runs this release's operator, which applies its CRD over the previous one
// (v1 stored, the conversion webhook its own) and records writes every second. The
// usage ConfigMap is deleted first, so that the record is this operator's alone.
func (env *testEnv) startOperator(ctx context.Context, t testing.TB, name string) *testenv.Operator {
	t.Helper()
	err := env.kube.CoreV1().ConfigMaps(testenv.OperatorNamespace).Delete(ctx, versions.UsageConfigMap, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return env.restartOperator(ctx, t, name)
}

// restartOperator starts an operator and leaves the usage record as it is.
func (env *testEnv) restartOperator(ctx context.Context, t testing.TB, name string) *testenv.Operator {
	t.Helper()
	op, err := testenv.StartOperator(ctx, testenv.OperatorOptions{Name: name, Kubeconfig: env.cp.KubeconfigPath,
		Args: []string{"--usage-record-interval=1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator %s log (tail):\n%s", name, op.Tail(40))
		}
		_ = op.Stop(15 * time.Second)
	})
	if err := env.waitWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	return op
}

// waitWebhooks waits until the apiserver reaches the operator's webhooks: a server-side dry
// run of a create at v1beta1 (served whatever the walk retired) passes the conversion and the
// admission webhooks only then.
func (env *testEnv) waitWebhooks(ctx context.Context) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1beta1", "kind": taskv1.Kind,
		"metadata": map[string]any{"name": "webhook-probe", "namespace": metav1.NamespaceDefault},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}}
	tasks := env.upgrade.Tasks("v1beta1", metav1.NamespaceDefault)
	return testenv.Poll(ctx, 2*time.Minute, 250*time.Millisecond, "the apiserver to reach the webhooks", func(ctx context.Context) (bool, error) {
		_, err := tasks.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, err
	})
}

// waitStoredAtV1 waits until the apiserver stores new Tasks at v1.
func (env *testEnv) waitStoredAtV1(ctx context.Context, t testing.TB) {
	t.Helper()
	probe := v1Task(metav1.NamespaceDefault, "storage-probe", true)
	if err := env.cp.WaitStoredAt(ctx, env.upgrade.Tasks("v1", metav1.NamespaceDefault), probe, testenv.TaskEtcdPrefix); err != nil {
		t.Fatal(err)
	}
}

// v1Task is a shell Task at v1; a suspended one never runs.
func v1Task(ns, name string, suspend bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}},
			"suspend": suspend},
	}}
}

// ownedConfigMap is a ConfigMap whose owner is given as the Task at apiVersion.
func ownedConfigMap(ns, name, apiVersion string, owner *unstructured.Unstructured) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: taskv1.Kind, Name: owner.GetName(), UID: owner.GetUID()}}}}
}

// watchAt starts `kubectl get -w` on Tasks at version in every namespace, as a user would;
// the returned stop ends it.
func (env *testEnv) watchAt(t testing.TB, version string) (stop func()) {
	t.Helper()
	cmd := exec.Command("kubectl", "--kubeconfig", env.cp.KubeconfigPath, "get", taskv1.Resource+"."+version+"."+taskv1.Group, "-A", "-w")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// informerAt runs a controller-runtime informer on Tasks at version, as a controller built on
// the previous release's API would; synced says it listed within a few seconds. stop ends it.
func (env *testEnv) informerAt(t testing.TB, version string) (stop func(), synced bool) {
	t.Helper()
	c, err := crcache.New(env.cfg, crcache.Options{})
	if err != nil {
		t.Fatalf("informer cache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: taskv1.Group, Version: version, Kind: taskv1.Kind})
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	if _, err := c.GetInformer(syncCtx, obj); err != nil {
		return stop, false
	}
	return stop, c.WaitForCacheSync(syncCtx)
}

// status runs the report and logs it.
func (env *testEnv) status(t testing.TB, opts versions.Options) *versions.Report {
	t.Helper()
	r, err := versions.Status(t.Context(), env.cfg, opts)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return r
}

// awaitReport waits until the report satisfies cond, which says what it lacks.
func (env *testEnv) awaitReport(t testing.TB, what string, cond func(*versions.Report) error) *versions.Report {
	t.Helper()
	var last *versions.Report
	testenv.Eventually(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
		r, err := versions.Status(ctx, env.cfg, versions.Options{})
		if err != nil {
			return false, err
		}
		last = r
		err = cond(r)
		return err == nil, err
	})
	t.Logf("report:\n%s", last)
	return last
}

// conversions is the number of conversion webhook calls the apiserver made for the Task CRD.
func (env *testEnv) conversions(ctx context.Context, t testing.TB) float64 {
	t.Helper()
	raw, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := testenv.ParseMetrics(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, s := range samples {
		if s.Name == "apiserver_crd_conversion_webhook_duration_seconds_count" && s.Labels["crd_name"] == taskv1.CRDName {
			n += s.Value
		}
	}
	return n
}

// callsPerWrite patches a label of the Task ns/name at v1 writes times, a new value each time,
// and returns the conversion webhook calls per write.
func (env *testEnv) callsPerWrite(ctx context.Context, t testing.TB, ns, name string, writes int) float64 {
	t.Helper()
	tasks := env.upgrade.Tasks("v1", ns)
	before := env.settledConversions(ctx, t)
	for i := range writes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"probe":"w-%d-%d"}}}`, time.Now().UnixNano(), i)
		if _, err := tasks.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return (env.settledConversions(ctx, t) - before) / float64(writes)
}

// costAtV1 times n writes (a label patch) of the Task name and n LISTs of ns's Tasks at v1,
// one at a time, and returns the mean of each: what a client at v1 pays, with whatever versions
// are served (each served old version's watch cache converts every write's event).
func (env *testEnv) costAtV1(ctx context.Context, t testing.TB, ns, name string, n int) (write, list time.Duration) {
	t.Helper()
	tasks := env.upgrade.Tasks("v1", ns)
	start := time.Now()
	for i := range n {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"cost":"c-%d-%d"}}}`, time.Now().UnixNano(), i)
		if _, err := tasks.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	write = time.Since(start) / time.Duration(n)
	start = time.Now()
	for range n {
		if _, err := tasks.List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return write, time.Since(start) / time.Duration(n)
}

// settledConversions waits until the apiserver stops calling the conversion webhook (after a
// change of the CRD its new watch caches convert every object again, and the watch caches
// convert a write's event after the write returned) and returns the count of calls.
func (env *testEnv) settledConversions(ctx context.Context, t testing.TB) float64 {
	t.Helper()
	last := -1.0
	testenv.Eventually(t, 2*time.Minute, "conversion calls to stop", func(ctx context.Context) (bool, error) {
		n := env.conversions(ctx, t)
		settled := n == last
		last = n
		if !settled {
			time.Sleep(time.Second)
		}
		return settled, nil
	})
	return last
}

// deleteTasks deletes every Task of ns and waits until they are gone.
func (env *testEnv) deleteTasks(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	tasks := env.upgrade.Tasks("v1", ns)
	if err := tasks.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the Tasks of "+ns+" to be deleted", func(ctx context.Context) (bool, error) {
		list, err := tasks.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d left", len(list.Items))
	})
}

// waitGarbageCollector waits until kube-controller-manager's garbage collector watches Tasks:
// it starts watching a resource only at its next discovery pass (every 30s) after the resource
// appears, and until then polls an owner it has not observed with GETs, backing off, at the
// version the dependent's ownerReference names, which a retirement's checks rightly count as
// a client at that version. A foreground deletion proves the watch: the apiserver only marks
// the owner, and the collector acts on the mark when its informer delivers it (a GET of the
// owner alone, enough for a background deletion, never sees it).
func (env *testEnv) waitGarbageCollector(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	tasks := env.upgrade.Tasks("v1", ns)
	owner, err := tasks.Create(ctx, v1Task(ns, "gc-probe", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := env.kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, ownedConfigMap(ns, "gc-probe", "example.com/v1", owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreground := metav1.DeletePropagationForeground
	if err := tasks.Delete(ctx, owner.GetName(), metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the garbage collector to finish a foreground deletion of a Task", func(ctx context.Context) (bool, error) {
		if _, err := cms.Get(ctx, "gc-probe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("dependent not collected (%v)", err)
		}
		_, err := tasks.Get(ctx, owner.GetName(), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("owner not gone (%v)", err)
		}
		return true, nil
	})
}

// restartControllerManager restarts kube-controller-manager after the upgrade, as the README's
// runbook says: if its garbage collector saw the previous release, it watches Tasks at
// v1alpha1, and that informer outlives the monitor its next discovery pass drops when v1
// becomes the preferred version (kubernetes/kubernetes#79610); only a restart closes the watch.
// A cluster that ran the previous release for a while is always in that state; a test cluster
// only when the collector's pass fell between the two installs, so the tests always restart.
// Discovery follows the CRD on its own schedule: the restart waits until it prefers v1, or the
// new collector's first pass would watch at v1alpha1 again.
func (env *testEnv) restartControllerManager(t testing.TB) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "discovery to prefer example.com/v1", func(ctx context.Context) (bool, error) {
		groups, err := env.kube.Discovery().ServerGroups()
		if err != nil {
			return false, err
		}
		for _, g := range groups.Groups {
			if g.Name == taskv1.Group {
				return g.PreferredVersion.Version == "v1", fmt.Errorf("preferred %s", g.PreferredVersion.Version)
			}
		}
		return false, fmt.Errorf("no group %s", taskv1.Group)
	})
	if err := env.cp.RestartComponent(testenv.KubeControllerManager); err != nil {
		t.Fatal(err)
	}
}

// awaitQuiet waits until no watch is open at version and the apiserver's request counters at
// it have not moved for quietFor, across reports: the garbage collector's GETs back off
// exponentially, so a quiet stretch several times retire's --observe window is wanted before
// a runbook step that retires.
func (env *testEnv) awaitQuiet(t testing.TB, version string, quietFor time.Duration) {
	t.Helper()
	var last map[string]float64
	since := time.Now()
	env.awaitReport(t, fmt.Sprintf("no watch and no request at %s for %s", version, quietFor), func(r *versions.Report) error {
		v := r.Version(version)
		if !maps.Equal(v.Requests, last) || v.LiveWatches != 0 {
			last, since = v.Requests, time.Now()
			return fmt.Errorf("%v watches open at %s, requests %v", v.LiveWatches, version, v.Requests)
		}
		if quiet := time.Since(since); quiet < quietFor {
			return fmt.Errorf("quiet for %s", quiet.Round(time.Second))
		}
		return nil
	})
}

// migrateAll runs the storage migration with defaults.
func migrateAll(ctx context.Context, env *testEnv) (migrate.Summary, error) {
	return migrate.Run(ctx, env.cfg, migrate.Options{})
}
