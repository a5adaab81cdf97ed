package versions_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/versions"
)

// TestATaskNamedLikeTheConversionProbeDoesNotBlockRetirement: the conversion probe of
// `versions retire` (a dry-run create at the version in the default namespace) is about the
// webhook's health, not about which names users chose: a Task of the default namespace that
// happens to be called like the probe must not make the retirement refuse, blaming the
// conversion webhook.
func TestATaskNamedLikeTheConversionProbeDoesNotBlockRetirement(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	const ns = "versions-probe-name"
	env.previousRelease(ctx, t, ns, 1)
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrateAll(ctx, env); err != nil {
		t.Fatal(err)
	}
	// A user's Task, written at v1 (no managedFields at v1alpha1), in the default namespace.
	tasks := env.upgrade.Tasks("v1", metav1.NamespaceDefault)
	if _, err := tasks.Create(ctx, v1Task(metav1.NamespaceDefault, "versions-conversion-probe", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tasks.Delete(context.Background(), "versions-conversion-probe", metav1.DeleteOptions{}) }()
	var out bytes.Buffer
	res, err := versions.Retire(ctx, env.cfg, "v1alpha1", versions.Options{Observe: time.Second, Out: &out})
	t.Logf("retire output:\n%s", out.String())
	if err != nil {
		t.Fatalf("retire v1alpha1 with nothing using it: %v", err)
	}
	if !res.Retired {
		t.Fatalf("not retired: %+v", res)
	}
}
