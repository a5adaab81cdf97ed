package migrate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apixclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
)

// TestTasksAnEarlierReleaseStoredWithAnyRetryCountReadAndMigrate: the release before v1 took
// any status.retryCount (no bounds in its schema). After the upgrade such Tasks, one past what
// v1's int32 attempts hold and a negative one among them, still list at every version, the
// migration rewrites them all and trims storedVersions, and they read back at v1alpha1 with the
// count they were stored with.
func TestTasksAnEarlierReleaseStoredWithAnyRetryCountReadAndMigrate(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	if err := env.upgrade.DeleteCRD(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	crd, err := testenv.PreviousReleaseCRD()
	if err != nil {
		t.Fatal(err)
	}
	// That release's schema: no bounds on the count, no enum on the state.
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	for _, name := range []string{"retryCount", "state"} {
		p := status.Properties[name]
		p.Minimum, p.Maximum, p.Enum = nil, nil, nil
		status.Properties[name] = p
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	crds := apixclient.NewForConfigOrDie(env.cfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns = "migrate-a"
	testenv.Eventually(t, time.Minute, "the earlier release's CRD served", func(ctx context.Context) (bool, error) {
		c, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || !slices.ContainsFunc(c.Status.Conditions, func(c apix.CustomResourceDefinitionCondition) bool {
			return c.Type == apix.Established && c.Status == apix.ConditionTrue
		}) {
			return false, err
		}
		_, err = env.upgrade.Tasks("v1alpha1", ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
	counts := map[string]int64{"past-int32": 2147483647, "negative": -5, "in-range": 2}
	for name, count := range counts {
		created, err := env.upgrade.Tasks("v1alpha1", ns).Create(ctx, testenv.V1alpha1Task(ns, name, 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["status"] = map[string]any{"state": "Running", "lastJobName": name + "-0-3", "retryCount": count}
		if _, err := env.upgrade.Tasks("v1alpha1", ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("the earlier release refused retryCount %d: %v", count, err)
		}
	}
	env.upgradeToCurrentRelease(ctx, t)
	for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
		if _, err := env.upgrade.Tasks(v, ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("LIST at %s after the upgrade: %v", v, err)
		}
	}
	if _, err := migrate.Run(ctx, env.cfg, migrate.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if got := env.storedVersions(ctx, t); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions %v after the migration, want [v1]", got)
	}
	for name, count := range counts {
		task, err := env.upgrade.Tasks("v1alpha1", ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("GET %s at v1alpha1: %v", name, err)
		}
		if got, _, _ := unstructured.NestedInt64(task.Object, "status", "retryCount"); got != count {
			t.Errorf("%s reads back with retryCount %d, stored with %d", name, got, count)
		}
	}
}
