package conversion

import (
	"strings"
	"testing"
)

// TestExplicitZerosThatWouldBecomeDefaultsAreRefused: a zero value an old version's type cannot
// tell from unset is refused, naming the field, when v1 would store its default instead; one
// with no default behind it converts as if left out.
func TestExplicitZerosThatWouldBecomeDefaultsAreRefused(t *testing.T) {
	tests := []struct {
		name, version string
		spec          map[string]any
		wantField     string // "" for no error
	}{
		{"v1alpha1 replicas 0", "v1alpha1", map[string]any{"type": "shell", "shell": "x", "replicas": int64(0)}, "spec.replicas"},
		{"v1alpha1 maxRetry 0 is a value", "v1alpha1", map[string]any{"type": "shell", "shell": "x", "maxRetry": int64(0)}, ""},
		{"v1beta1 parallelism 0", "v1beta1", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "x"}}, "parallelism": int64(0)}, "spec.parallelism"},
		{"v1beta1 empty method", "v1beta1", map[string]any{"runner": map[string]any{"type": "HTTP", "http": map[string]any{"url": "https://a.example/", "method": ""}}}, "spec.runner.http.method"},
		{"v1beta1 suspend false", "v1beta1", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "x"}}, "suspend": false}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "example.com/" + tt.version, "kind": "Task", "metadata": map[string]any{"name": "z", "namespace": "ns"}, "spec": tt.spec}
			_, err := Convert(obj, "v1")
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantField != "" && (err == nil || !strings.Contains(err.Error(), tt.wantField+": Invalid value")):
				t.Fatalf("error %v, want one naming %s", err, tt.wantField)
			}
		})
	}
}
