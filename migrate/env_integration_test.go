package migrate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/internal/testenv"
)

// One control plane serves every integration test of the package, started by the first test
// that needs it, in Full mode because the StorageVersionMigration test needs
// kube-controller-manager. It starts without the Task CRD: every test installs the previous
// release's CRD itself. The unit tests never start it.

func TestMain(m *testing.M) {
	// The conversion server logs through controller-runtime's logger; the tests have no use for it.
	crlog.SetLogger(logr.Discard())
	testenv.AtExit(func(bool) { reportTimings() })
	testenv.Main(m, testenv.Options{Full: true, CRDPaths: []string{}})
}

// testEnv is the shared control plane with the upgrade fixture on it.
type testEnv struct {
	cp      *testenv.ControlPlane
	cfg     *rest.Config // without client-side rate limits
	kube    kubernetes.Interface
	scheme  *runtime.Scheme // Task at every version
	upgrade *testenv.Upgrade
}

var (
	shared  *testEnv
	fixture = testenv.Fixture{Name: "test environment", Start: func(cp *testenv.ControlPlane) (err error) {
		shared, err = newTestEnv(cp)
		return err
	}}
)

// cluster returns the shared test environment, starting it on first use.
func cluster(t testing.TB) *testEnv {
	t.Helper()
	fixture.Use(t)
	return shared
}

func newTestEnv(cp *testenv.ControlPlane) (*testEnv, error) {
	ctx := context.Background()
	env := &testEnv{cp: cp, cfg: rest.CopyConfig(cp.Config)}
	env.cfg.QPS, env.cfg.Burst = -1, 0
	var err error
	if env.kube, err = kubernetes.NewForConfig(env.cfg); err != nil {
		return nil, err
	}
	c, err := testenv.NewClient(env.cfg)
	if err != nil {
		return nil, err
	}
	env.scheme = c.Scheme()
	for _, ns := range namespaces {
		if err := testenv.CreateNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
	}
	if env.upgrade, err = testenv.NewUpgrade(ctx, cp); err != nil {
		return nil, err
	}
	testenv.AtExit(func(bool) {
		if err := env.upgrade.Close(); err != nil {
			fmt.Printf("stop the conversion server: %v\n", err)
		}
	})
	return env, nil
}

// rawStored returns the raw etcd bytes and mod revision of every Task.
func (env *testEnv) rawStored(ctx context.Context) (map[string]string, error) {
	objs, _, err := env.cp.StoredObjects(ctx, testenv.TaskEtcdPrefix)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range objs {
		out[o.Key] = fmt.Sprintf("%d:%s", o.ModRevision, o.Value)
	}
	return out, nil
}
