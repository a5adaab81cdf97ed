package lossless_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestAlphaStatusApplyRemovesRetryCountWhateverWasWrittenAtOtherVersions: rule 6 of the
// lossless guarantees ("an apply removes what its manager alone applied, whatever was written
// at other versions") for v1alpha1's status.retryCount: a status apply at v1alpha1 that drops
// retryCount, which its manager alone applied, and keeps lastJobName removes it (retryCount
// reads unset, v1's attempts is 1), as it does on a Task only ever written at v1alpha1, also
// after another manager's status write at v1beta1 or v1 that touched neither field.
func TestAlphaStatusApplyRemovesRetryCountWhateverWasWrittenAtOtherVersions(t *testing.T) {
	ns := setUp(t)
	for _, tc := range []struct {
		name, otherAt, patch string
	}{
		{name: "only-alpha"},
		{name: "after-beta-write", otherAt: beta, patch: `{"status":{"startTime":"2026-01-01T00:00:00Z"}}`},
		{name: "after-v1-write", otherAt: hubVersion, patch: `{"status":{"startTime":"2026-01-01T00:00:00Z"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			name := "retrycount-" + tc.name
			u := &unstructured.Unstructured{Object: obj{"apiVersion": "example.com/v1alpha1", "kind": "Task",
				"metadata": obj{"name": name, "namespace": ns}, "spec": obj{"type": "shell", "shell": "x", "maxRetry": int64(5)}}}
			if _, err := tasks(alpha, ns).Create(ctx, u, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
				t.Fatal(err)
			}
			applyStatus := func(status obj) {
				t.Helper()
				m := &unstructured.Unstructured{Object: obj{"apiVersion": "example.com/v1alpha1", "kind": "Task",
					"metadata": obj{"name": name, "namespace": ns}, "status": status}}
				if _, err := tasks(alpha, ns).ApplyStatus(ctx, name, m, metav1.ApplyOptions{FieldManager: "st", Force: true}); err != nil {
					t.Fatal(err)
				}
			}
			applyStatus(obj{"state": "Failed", "retryCount": int64(3), "lastJobName": name + "-0-4"})
			if tc.otherAt != "" {
				if _, err := tasks(tc.otherAt, ns).Patch(ctx, name, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{FieldManager: "other"}, "status"); err != nil {
					t.Fatal(err)
				}
			}
			applyStatus(obj{"state": "Failed", "lastJobName": name + "-0-4"})
			got, err := tasks(alpha, ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			hub, err := tasks(hubVersion, ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			status, _ := got.Object["status"].(map[string]any)
			if rc, ok := status["retryCount"]; ok {
				t.Errorf("status.retryCount, dropped by the only manager that applied it, is still %v at v1alpha1 (v1 status.attempts %v)\nmanagedFields: %s",
					rc, hub.Object["status"].(map[string]any)["attempts"], mustJSON(got.GetManagedFields()))
			}
		})
	}
}
