package versions_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/versions"
)

// TestLifecycleAtScale times the report, the ownerReference rewrite and the retirement on
// VERSIONS_TASKS Tasks stored at v1alpha1 (migrated first), each with one ConfigMap owned
// through a v1alpha1 ownerReference, and counts the apiserver's requests per object for each.
// It is a measurement, not run unless VERSIONS_TASKS is set.
func TestLifecycleAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VERSIONS_TASKS"))
	if n <= 0 {
		t.Skip("set VERSIONS_TASKS to the number of Tasks to measure with")
	}
	env := cluster(t)
	ctx := t.Context()
	const ns = "versions-scale"
	keys := env.previousRelease(ctx, t, ns, n)
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager's garbage collector watched Tasks at v1alpha1 while it was the
	// only version, and keeps that watch until it restarts; restarted before the dependents
	// exist, it has observed every owner when they come.
	env.restartControllerManager(t)
	env.waitGarbageCollector(ctx, t, ns)
	if _, err := migrateAll(ctx, env); err != nil {
		t.Fatal(err)
	}
	err := testenv.Parallel(ctx, n, 8, func(ctx context.Context, i int) error {
		name := strings.TrimPrefix(keys[i], ns+"/")
		owner, err := env.upgrade.Tasks("v1alpha1", ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = env.kube.CoreV1().ConfigMaps(ns).Create(ctx, ownedConfigMap(ns, name, "example.com/v1alpha1", owner), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	measure := func(what string, objects int, fn func() error) {
		t.Helper()
		before := env.requests(ctx, t)
		began := time.Now()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		took := time.Since(began)
		reqs := env.requests(ctx, t) - before
		t.Logf("%s: %s for %d objects, %.0f apiserver requests (%.3f per object)", what, took.Round(time.Millisecond), objects, reqs, reqs/float64(objects))
	}
	env.awaitReport(t, "no watch left at v1alpha1", func(r *versions.Report) error {
		if w := r.Version("v1alpha1").LiveWatches; w != 0 {
			return fmt.Errorf("%v watches open at v1alpha1", w)
		}
		return nil
	})
	measure("report", 2*n, func() error { _, err := versions.Status(ctx, env.cfg, versions.Options{}); return err })
	opts := versions.Options{RewriteOwnerRefs: true, QPS: 500, Observe: -1}
	measure("ownerReference rewrite and retire", n, func() error {
		res, err := versions.Retire(ctx, env.cfg, "v1alpha1", opts)
		if err == nil && (!res.Retired || res.OwnerRefsRewritten != n) {
			err = fmt.Errorf("result %+v", res)
		}
		return err
	})
	measure("serve (rollback)", n, func() error { return versions.Serve(ctx, env.cfg, "v1alpha1", versions.Options{}) })
	measure("retire again (nothing to rewrite)", n, func() error {
		_, err := versions.Retire(ctx, env.cfg, "v1alpha1", versions.Options{Observe: -1})
		return err
	})
}

// requests is the apiserver's apiserver_request_total, every resource and verb.
func (env *testEnv) requests(ctx context.Context, t testing.TB) float64 {
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
		if s.Name == "apiserver_request_total" {
			n += s.Value
		}
	}
	return n
}
