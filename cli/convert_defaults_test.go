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
	doc := "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: a}\nspec:\n  runner: {type: Shell, shell: {script: echo hi}}\nstatus:\n  phase: Succeeded\n  fieldOfANewerRelease: 1\n"
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
	doc := "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: a}\nspec:\n  runner: {type: Shell, shell: {script: echo hi}}\n  retry: {}\n"
	for _, tc := range []struct{ to, path string }{
		{"v1", "spec.retry.maxRetries"},
		{"v1beta1", "spec.maxRetries"},
	} {
		t.Run(tc.to, func(t *testing.T) {
			got, v := convertedField(t, doc, tc.to, tc.path)
			if n, ok := v.(float64); !ok || n != 3 {
				t.Errorf("%s is %v, want 3 as the cluster stores it:\n%s", tc.path, v, got)
			}
		})
	}
}

// TestConvertGivesAnOldVersionsTaskTheDefaultsOfItsSchema: the apiserver defaults a Task at the
// version it is written at, then converts it. A v1beta1 Task without maxRetries is stored with
// retry.maxRetries 3 (the v1beta1 schema's default), not the 0 its typed form reads; the same for
// every default of an old version's schema, a null included (pruned, then defaulted).
func TestConvertGivesAnOldVersionsTaskTheDefaultsOfItsSchema(t *testing.T) {
	for _, tc := range []struct {
		name, doc, to, path string
		want                any
	}{
		{"v1beta1 maxRetries", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: HTTP, http: {url: https://e.com}}\n",
			"v1", "spec.retry.maxRetries", float64(3)},
		{"v1beta1 maxRetries, back at v1beta1", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n",
			"v1beta1", "spec.maxRetries", float64(3)},
		{"v1beta1 maxRetries: null", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  maxRetries: null\n  runner: {type: Shell, shell: {script: echo}}\n",
			"v1", "spec.retry.maxRetries", float64(3)},
		{"v1beta1 maxRetries written stays", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  maxRetries: 0\n  runner: {type: Shell, shell: {script: echo}}\n",
			"v1", "spec.retry.maxRetries", float64(0)},
		{"v1beta1 parallelism", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n",
			"v1", "spec.parallelism", float64(1)},
		{"v1beta1 method", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: HTTP, http: {url: https://e.com}}\n",
			"v1", "spec.runner.http.method", "GET"},
		{"v1alpha1 replicas", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: shell, shell: echo}\n",
			"v1", "spec.parallelism", float64(1)},
		{"v1alpha1 maxRetry", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: shell, shell: echo}\n",
			"v1", "spec.retry.maxRetries", float64(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, v := convertedField(t, tc.doc, tc.to, tc.path)
			if v != tc.want {
				t.Errorf("%s is %v, want %v as the cluster stores it:\n%s", tc.path, v, tc.want, got)
			}
		})
	}
}

// convertedField converts doc to version and returns the output and the value at its dotted
// path (nil where there is none).
func convertedField(t *testing.T, doc, version, dotted string) ([]byte, any) {
	t.Helper()
	got, err := convertDocument([]byte(doc), version)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(got, &obj); err != nil {
		t.Fatal(err)
	}
	var v any = obj
	for _, k := range strings.Split(dotted, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return got, v
}
