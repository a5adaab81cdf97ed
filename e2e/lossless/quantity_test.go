package lossless_test

import (
	"fmt"
	"strings"
	"testing"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// TestAQuantityWithAHugeExponentIsRefusedAndTheWebhooksStayUp: the CRD's pattern takes a cpu of
// "1e3000000000", on which Go's quantity parser spins for minutes. Written at v1 it is refused
// with an error naming the field; smuggled in the preserved annotation of a write at v1alpha1
// it never reaches storage (a client's annotation is not kept); and the webhooks go on
// answering the next write at once.
func TestAQuantityWithAHugeExponentIsRefusedAndTheWebhooksStayUp(t *testing.T) {
	ns := setUp(t)
	const huge = "1e3000000000"
	writes := []struct {
		name, manifest string
	}{
		{"v1", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: q1}\nspec: {runner: {type: Shell, shell: {script: echo}}, resources: {limits: {cpu: \"" + huge + "\"}}}\n"},
		// The mutating webhook runs before the schema's pattern, which refuses the space.
		{"v1 with a space after it", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: q3}\nspec: {runner: {type: Shell, shell: {script: echo}}, resources: {limits: {cpu: \"1e-100000000 \"}}}\n"},
		{"v1alpha1, in the preserved annotation", fmt.Sprintf("apiVersion: example.com/v1alpha1\nkind: Task\nmetadata:\n  name: q2\n  annotations:\n    %s: '{\"patch\":{\"spec\":{\"resources\":{\"limits\":{\"cpu\":\"%s\"}}}}}'\nspec: {type: shell, shell: echo}\n",
			conversion.PreservedAnnotation, huge)},
	}
	for i, w := range writes {
		_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(w.manifest), "create", "-n", ns, "-f", "-")
		switch {
		case err == nil && (w.name == "v1" || strings.HasPrefix(w.name, "v1 ")):
			t.Errorf("%s: created", w.name)
		case err == nil:
			if stored := storedBody(t, ns, "q2"); strings.Contains(stored, huge) {
				t.Errorf("%s: stored %s", w.name, stored)
			}
		case strings.HasPrefix(w.name, "v1 ") || w.name == "v1":
			if !strings.Contains(stderr, "spec.resources.limits.cpu") {
				t.Errorf("%s: refused without naming spec.resources.limits.cpu: %s", w.name, stderr)
			}
		}
		if strings.Contains(stderr, "context deadline exceeded") || strings.Contains(stderr, "timeout") {
			t.Errorf("%s: a webhook timed out instead of refusing: %s", w.name, stderr)
		}
		createFrom(t, ns, fmt.Sprintf("apiVersion: example.com/v1\nkind: Task\nmetadata: {name: after-%d}\nspec: {runner: {type: Shell, shell: {script: echo}}, suspend: true}\n", i))
	}
}
