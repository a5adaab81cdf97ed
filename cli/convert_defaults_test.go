package cli

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestConvertToV1KeepsAV1TaskWhoseStatusHasAFieldThisReleaseDoesNotKnow: a Task saved with
// `kubectl get task -o yaml` from a cluster whose operator (and CRD) is newer than the plugin
// has status fields this release's types lack. Converted to v1 it gets the spec's defaults and
// keeps that status as it is: the apiserver takes no status from a create or apply.
func TestConvertToV1KeepsAV1TaskWhoseStatusHasAFieldThisReleaseDoesNotKnow(t *testing.T) {
	doc := "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: a}\nspec:\n  runner: {type: shell, shell: {script: echo hi}}\nstatus:\n  phase: Succeeded\n  fieldOfANewerRelease: 1\n"
	got, err := convertDocument([]byte(doc), "v1")
	if err != nil {
		t.Fatalf("a v1 Task was refused: %v", err)
	}
	if !strings.Contains(string(got), "fieldOfANewerRelease: 1") {
		t.Errorf("the status field was lost:\n%s", got)
	}
}

// TestConvertGivesAnEmptyRetryTheMaxRetriesTheClusterStores: a v1 manifest with `retry: {}` is
// stored with retry.maxRetries: 3 (the CRD's default for the absent field). convert promises
// "what the cluster would store, defaults included", and at v1beta1 the cluster reads it as
// maxRetries: 3, though the typed field (no omitempty: 0 never retries) reads an absent one as 0.
func TestConvertGivesAnEmptyRetryTheMaxRetriesTheClusterStores(t *testing.T) {
	doc := "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: a}\nspec:\n  runner: {type: shell, shell: {script: echo hi}}\n  retry: {}\n"
	for _, tc := range []struct{ to, path string }{
		{"v1", "spec.retry.maxRetries"},
		{"v1beta1", "spec.maxRetries"},
	} {
		t.Run(tc.to, func(t *testing.T) {
			got, err := convertDocument([]byte(doc), tc.to)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(got, &obj); err != nil {
				t.Fatal(err)
			}
			var v any = obj
			for _, k := range strings.Split(tc.path, ".") {
				m, _ := v.(map[string]any)
				v = m[k]
			}
			if n, ok := v.(float64); !ok || n != 3 {
				t.Errorf("%s is %v, want 3 as the cluster stores it:\n%s", tc.path, v, got)
			}
		})
	}
}
