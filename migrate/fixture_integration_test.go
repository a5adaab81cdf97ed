package migrate_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

var namespaces = []string{"migrate-a", "migrate-b", "migrate-c", "migrate-d"}

var versions = []string{"v1alpha1", "v1beta1", "v1"}

const fixtureLabel = "migrate-test/fixture"

func taskGVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.com", Version: version, Resource: "tasks"}
}

func (env *testEnv) tasks(version, namespace string) dynamic.ResourceInterface {
	return env.dyn.Resource(taskGVR(version)).Namespace(namespace)
}

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
	crds := env.ax.ApiextensionsV1().CustomResourceDefinitions()
	err := crds.Delete(ctx, crdName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete CRD: %v", err)
	}
	poll(ctx, t, "CRD deletion", 100*time.Millisecond, time.Minute, func() (bool, error) {
		_, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
	if _, err := crds.Create(ctx, previousReleaseCRD(env.current), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create previous release's CRD: %v", err)
	}
	poll(ctx, t, "CRD established", 50*time.Millisecond, time.Minute, func() (bool, error) {
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
				_, err := env.tasks("v1alpha1", namespaces[0]).List(ctx, metav1.ListOptions{Limit: 1})
				return err == nil, nil
			}
		}
		return false, nil
	})

	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("%s/task-%04d", namespaces[i%len(namespaces)], i)
	}
	parallel(t, keys, 8, func(i int, key string) error {
		ns, name, _ := strings.Cut(key, "/")
		obj := v1alpha1Task(ns, name, i)
		created, err := env.tasks("v1alpha1", ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if i%3 != 0 {
			return nil
		}
		states := []string{"Running", "Failed", "Succeeded"}
		created.Object["status"] = map[string]any{
			"state":          states[i%len(states)],
			"lastJobName":    name + "-run-1",
			"retryCount":     int64(i % 4),
			"lastError":      fmt.Sprintf("exit code %d", i%7),
			"lastUpdateTime": "2030-01-02T03:04:05Z",
		}
		_, err = env.tasks("v1alpha1", ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	t.Logf("previous release installed with %d Tasks in %s", n, time.Since(began).Round(time.Millisecond))
	return keys
}

func v1alpha1Task(ns, name string, i int) *unstructured.Unstructured {
	spec := map[string]any{
		"replicas": int64(1 + i%5),
		"maxRetry": int64(i % 4),
	}
	if i%2 == 0 {
		spec["type"] = "shell"
		spec["shell"] = fmt.Sprintf("echo task %d && sleep %d", i, i%10)
	} else {
		spec["type"] = "http"
		spec["url"] = fmt.Sprintf("https://hooks.example.com/task/%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1",
		"kind":       "Task",
		"metadata": map[string]any{
			"namespace": ns,
			"name":      name,
			"labels":    map[string]any{fixtureLabel: "true", "index": strconv.Itoa(i)},
		},
		"spec": spec,
	}}
}

// upgradeToCurrentRelease applies this release's CRD over the previous one: all three versions
// served, v1 stored, conversion by the in-process webhook. It returns once the apiserver stores
// new Tasks at v1.
func (env *testEnv) upgradeToCurrentRelease(ctx context.Context, t testing.TB) {
	t.Helper()
	crds := env.ax.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions = env.current.Spec.DeepCopy().Versions
		crd.Spec.Conversion = &apiextv1.CustomResourceConversion{
			Strategy: apiextv1.WebhookConverter,
			Webhook: &apiextv1.WebhookConversion{
				ClientConfig:             &apiextv1.WebhookClientConfig{URL: &env.webhookURL, CABundle: env.caBundle},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("upgrade CRD: %v", err)
	}
	// The apiserver swaps the storage of a CRD asynchronously; probe until a new Task lands in
	// etcd at v1.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Task",
		"metadata":   map[string]any{"namespace": namespaces[0], "name": "storage-probe"},
		"spec":       map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}}
	probes := env.tasks("v1", namespaces[0])
	poll(ctx, t, "v1 storage", 50*time.Millisecond, time.Minute, func() (bool, error) {
		if _, err := probes.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, nil // v1 not served yet
		}
		enc, _, err := env.storedEncodings(ctx)
		if err != nil {
			return false, err
		}
		stored := enc[namespaces[0]+"/storage-probe"]
		if err := probes.Delete(ctx, "storage-probe", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return stored == "example.com/v1", nil
	})
	poll(ctx, t, "probe deletion", 20*time.Millisecond, time.Minute, func() (bool, error) {
		enc, _, err := env.storedEncodings(ctx)
		_, there := enc[namespaces[0]+"/storage-probe"]
		return !there, err
	})
}

func (env *testEnv) storedVersions(ctx context.Context, t testing.TB) []string {
	t.Helper()
	crd, err := env.ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get CRD: %v", err)
	}
	return crd.Status.StoredVersions
}

// requireEncodings checks that exactly the Tasks keys are in etcd, all encoded at apiVersion.
func (env *testEnv) requireEncodings(ctx context.Context, t testing.TB, keys []string, apiVersion string) {
	t.Helper()
	enc, _, err := env.storedEncodings(ctx)
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
		list, err := env.dyn.Resource(taskGVR(v)).List(ctx, metav1.ListOptions{LabelSelector: fixtureLabel})
		if err != nil {
			t.Fatalf("list at %s: %v", v, err)
		}
		for _, item := range list.Items {
			var obj client.Object
			switch v {
			case "v1alpha1":
				obj = &v1alpha1.Task{}
			case "v1beta1":
				obj = &v1beta1.Task{}
			case "v1":
				obj = &taskv1.Task{}
			default:
				t.Fatalf("unknown version %s", v)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(item.Object, obj, true); err != nil {
				t.Fatalf("decode %s/%s at %s: %v", item.GetNamespace(), item.GetName(), v, err)
			}
			// What a rewrite may legitimately change.
			obj.SetResourceVersion("")
			obj.SetManagedFields(nil)
			obj.SetGeneration(0)
			s[v][item.GetNamespace()+"/"+item.GetName()] = obj
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

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func poll(ctx context.Context, t testing.TB, what string, interval, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// parallel runs fn over items with n goroutines and fails the test on the first error.
func parallel[T any](t testing.TB, items []T, n int, fn func(i int, item T) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range n {
		wg.Go(func() {
			for i := range next {
				if err := fn(i, items[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
