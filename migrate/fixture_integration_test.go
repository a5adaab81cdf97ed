package migrate_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/internal/testenv"
)

var namespaces = []string{"migrate-a", "migrate-b", "migrate-c", "migrate-d"}

var versions = []string{"v1alpha1", "v1beta1", "v1"}

// The apiVersions etcd holds Tasks at, before and after a migration.
var (
	atV1alpha1 = v1alpha1.GroupVersion.String()
	atV1       = taskv1.GroupVersion.String()
)

// fixtureSize is the number of Tasks each integration test starts from: MIGRATE_TASKS, default 300.
func fixtureSize(t testing.TB, env string, def int) int {
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q is not a positive number", env, s)
		}
		return n
	}
	return def
}

// installPreviousRelease replaces the Task CRD (and so every Task) with the previous release's
// CRD, which serves and stores only v1alpha1, and creates n Tasks at v1alpha1 spread over the
// test namespaces, a third of them with a status. It returns their "namespace/name" keys.
func (env *testEnv) installPreviousRelease(ctx context.Context, t testing.TB, n int) []string {
	t.Helper()
	began := time.Now()
	if err := env.upgrade.InstallPreviousRelease(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := env.upgrade.CreateV1alpha1Tasks(ctx, namespaces, n, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release installed with %d Tasks in %s", n, time.Since(began).Round(time.Millisecond))
	return keys
}

// upgradeToCurrentRelease applies this release's CRD over the previous one: all three versions
// served, v1 stored, conversion by the in-process webhook. It returns once the apiserver stores
// new Tasks at v1.
func (env *testEnv) upgradeToCurrentRelease(ctx context.Context, t testing.TB) {
	t.Helper()
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
}

func (env *testEnv) storedVersions(ctx context.Context, t testing.TB) []string {
	t.Helper()
	sv, err := env.upgrade.CRDStoredVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

// requireEncodings checks that exactly the Tasks keys are in etcd, all encoded at apiVersion.
func (env *testEnv) requireEncodings(ctx context.Context, t testing.TB, keys []string, apiVersion string) {
	t.Helper()
	enc, err := env.upgrade.StoredTaskVersions(ctx)
	if err != nil {
		t.Fatalf("read etcd: %v", err)
	}
	counts := map[string]int{}
	for _, v := range enc {
		counts[v]++
	}
	if len(enc) != len(keys) || counts[apiVersion] != len(keys) {
		t.Fatalf("etcd holds %d Tasks encoded as %v; want %d, all %s", len(enc), counts, len(keys), apiVersion)
	}
	for _, k := range keys {
		if _, ok := enc[k]; !ok {
			t.Fatalf("Task %s missing from etcd", k)
		}
	}
}

// snapshot holds every fixture Task as read at each served version, decoded into that
// version's Go type, by version and "namespace/name".
//
// The typed form is what is compared: the conversion webhook answers with typed objects, so a
// Task that went through it spells zero values differently from the JSON its client wrote
// ("status": {} appears, "retryCount": 0 disappears) without meaning anything else. Decoding
// rejects unknown fields, so nothing can hide in fields the type does not know.
type snapshot map[string]map[string]client.Object

func (env *testEnv) snapshot(ctx context.Context, t testing.TB, vs ...string) snapshot {
	t.Helper()
	s := snapshot{}
	for _, v := range vs {
		s[v] = map[string]client.Object{}
		list, err := env.upgrade.Tasks(v, metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: testenv.FixtureLabel})
		if err != nil {
			t.Fatalf("list at %s: %v", v, err)
		}
		for _, item := range list.Items {
			obj, err := env.scheme.New(item.GroupVersionKind())
			if err != nil {
				t.Fatalf("%s/%s at %s: %v", item.GetNamespace(), item.GetName(), v, err)
			}
			task := obj.(client.Object)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(item.Object, task, true); err != nil {
				t.Fatalf("decode %s/%s at %s: %v", item.GetNamespace(), item.GetName(), v, err)
			}
			// What a rewrite may legitimately change.
			task.SetResourceVersion("")
			task.SetManagedFields(nil)
			task.SetGeneration(0)
			s[v][item.GetNamespace()+"/"+item.GetName()] = task
		}
	}
	return s
}

// requireSame fails when any Task reads back differently at any version.
func requireSame(t testing.TB, before, after snapshot, skip func(key string) bool) {
	t.Helper()
	for _, v := range slices.Sorted(maps.Keys(before)) {
		b, a := before[v], after[v]
		if len(b) != len(a) {
			t.Errorf("at %s: %d Tasks before, %d after", v, len(b), len(a))
		}
		diffs := 0
		for _, key := range slices.Sorted(maps.Keys(b)) {
			if skip != nil && skip(key) {
				continue
			}
			if d := cmp.Diff(b[key], a[key]); d != "" {
				if diffs++; diffs <= 3 {
					t.Errorf("Task %s reads back differently at %s (-before +after):\n%s", key, v, d)
				}
			}
		}
		if diffs > 3 {
			t.Errorf("... %d Tasks differ at %s in all", diffs, v)
		}
	}
}
