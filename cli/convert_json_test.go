package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertInPlaceKeepsAJSONFileJSON: --in-place over a .json manifest writes JSON back; a
// .json file holding YAML breaks every JSON tool that reads it.
func TestConvertInPlaceKeepsAJSONFileJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "task.json")
	text := `{"apiVersion": "example.com/v1alpha1", "kind": "Task", "metadata": {"name": "j"}, "spec": {"type": "shell", "shell": "echo hi"}}` + "\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _, _ := newTestRoot()
	root.SetArgs([]string{"convert", "-f", p, "--in-place"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if s := strings.TrimSpace(string(got)); !strings.HasPrefix(s, "{") {
		t.Fatalf("task.json is no longer JSON:\n%s", got)
	}
}
