package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertConvertsTheTasksOfAList: `kubectl get tasks -o yaml` saves a List whose items are
// Tasks; converting that file converts the items, it does not print them back at v1alpha1.
func TestConvertConvertsTheTasksOfAList(t *testing.T) {
	p := filepath.Join(t.TempDir(), "export.yaml")
	text := `apiVersion: v1
kind: List
items:
- apiVersion: example.com/v1alpha1
  kind: Task
  metadata: {name: report}
  spec: {type: shell, shell: echo hi}
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	root, out, _ := newTestRoot()
	root.SetArgs([]string{"convert", "-f", p})
	err := root.Execute()
	if err == nil && strings.Contains(out.String(), "example.com/v1alpha1") {
		t.Fatalf("the List's Task was left at v1alpha1 without an error:\n%s", out)
	}
}
