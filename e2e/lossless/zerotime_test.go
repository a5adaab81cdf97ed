package lossless_test

import (
	"strings"
	"testing"

	"example.com/task-operator/internal/testenv"
)

// TestAZeroInstantStatusTimeSurvivesAStatusWriteAtAnOldVersion: a v1 status time of
// 0001-01-01T00:00:00Z, then a status write at v1alpha1 (v1beta1) that changes nothing the old
// version shows: the stored v1 Task must keep the time.
func TestAZeroInstantStatusTimeSurvivesAStatusWriteAtAnOldVersion(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: zt}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
	for _, tc := range []struct{ version, v1status, patch, field string }{
		{alpha, `{"status":{"phase":"Running","lastPhaseTransitionTime":"0001-01-01T00:00:00Z"}}`, `{"status":{"state":"Running"}}`, `"lastPhaseTransitionTime":"0001-01-01T00:00:00Z"`},
		{beta, `{"status":{"phase":"Running","startTime":"0001-01-01T00:00:00Z"}}`, `{"status":{"phase":"Running"}}`, `"startTime":"0001-01-01T00:00:00Z"`},
	} {
		if _, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks.v1.example.com/zt",
			"--subresource=status", "--type=merge", "-p", tc.v1status); err != nil {
			t.Fatalf("v1 status write: %v %s", err, stderr)
		}
		before := storedBody(t, ns, "zt")
		if !strings.Contains(before, tc.field) {
			t.Fatalf("stored %s, want %s", before, tc.field)
		}
		if _, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks."+tc.version+".example.com/zt",
			"--subresource=status", "--type=merge", "-p", tc.patch); err != nil {
			t.Fatalf("status write at %s: %v %s", tc.version, err, stderr)
		}
		after := storedBody(t, ns, "zt")
		if !strings.Contains(after, tc.field) {
			t.Errorf("a status write at %s that changes nothing it shows lost %s:\n before %s\n after  %s", tc.version, tc.field, before, after)
		}
	}
}
