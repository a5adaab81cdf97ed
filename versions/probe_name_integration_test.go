package versions_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/internal/testenv"
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
	removeAdmissionWebhooks(ctx, t, env)
	// The writers an earlier test's operator recorded are not this test's.
	if err := env.kube.CoreV1().ConfigMaps(testenv.OperatorNamespace).Delete(ctx, versions.UsageConfigMap, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
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

// removeAdmissionWebhooks deletes the Task admission webhook configurations an operator of an
// earlier test left behind: that operator is stopped, and a test without one (conversion by the
// in-process server) could write no Task at v1 through them.
func removeAdmissionWebhooks(ctx context.Context, t *testing.T, env *testEnv) {
	t.Helper()
	ar := env.kube.AdmissionregistrationV1()
	mutating, err := ar.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mutating.Items {
		if slices.ContainsFunc(c.Webhooks, func(w admissionv1.MutatingWebhook) bool { return w.Name == "mtask.example.com" }) {
			if err := ar.MutatingWebhookConfigurations().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	validating, err := ar.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range validating.Items {
		if slices.ContainsFunc(c.Webhooks, func(w admissionv1.ValidatingWebhook) bool { return w.Name == "vtask.example.com" }) {
			if err := ar.ValidatingWebhookConfigurations().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
