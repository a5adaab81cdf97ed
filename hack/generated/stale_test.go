// Package generated_test fails when generated code or manifests no longer match their sources:
// run `make generate manifests` and commit the result.
package generated_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestChartCopiesAreCurrent: the Helm chart templates copies of generated files (Helm cannot
// read outside the chart); make manifests refreshes them.
func TestChartCopiesAreCurrent(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for source, chartCopy := range map[string]string{
		"config/crd/bases/example.com_tasks.yaml": "charts/task-operator/files/crd.yaml",
		"config/rbac/role.yaml":                   "charts/task-operator/files/role.yaml",
		"config/webhook/manifests.yaml":           "charts/task-operator/files/webhooks.yaml",
		"config/prometheus/rules.yaml":            "charts/task-operator/files/rules.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(root, source))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(filepath.Join(root, chartCopy))
		if err != nil || !bytes.Equal(want, have) {
			t.Errorf("%s is not a copy of %s: run `make manifests` and commit the result", chartCopy, source)
		}
	}
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file string
		args []string
	}{
		{"apis/v1/zz_generated.deepcopy.go", []string{"object", "paths=./apis/v1", "output:object:stdout"}},
		{"apis/v1beta1/zz_generated.deepcopy.go", []string{"object", "paths=./apis/v1beta1", "output:object:stdout"}},
		{"apis/v1alpha1/zz_generated.deepcopy.go", []string{"object", "paths=./apis/v1alpha1", "output:object:stdout"}},
		{"config/crd/bases/example.com_tasks.yaml", []string{"crd", "paths=./apis/...", "output:crd:stdout"}},
		{"config/webhook/manifests.yaml", []string{"webhook", "paths=./webhook/...", "output:webhook:stdout"}},
		{"config/rbac/role.yaml", []string{"rbac:roleName=manager-role", "paths=./reconciler/...", "paths=./webhook", "paths=./webhook/cert/...", "output:rbac:stdout"}},
		{"config/local/role.yaml", []string{"rbac:roleName=task-operator-local-role", "paths=./webhook/local/...", "output:rbac:stdout"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("go", append([]string{"tool", "controller-gen"}, tt.args...)...)
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("controller-gen %v: %v\n%s", tt.args, err, stderr.String())
			}
			have, err := os.ReadFile(filepath.Join(root, tt.file))
			if err != nil {
				t.Fatalf("%v (run make generate manifests)", err)
			}
			if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(have)) {
				t.Errorf("%s is stale: run `make generate manifests` and commit the result", tt.file)
			}
		})
	}
}
