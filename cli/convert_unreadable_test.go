package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertRefusesATaskItCannotRead: a document that says it is a Task but is not valid YAML
// is refused naming the document, not printed back unconverted with a zero exit (which, with
// --in-place, leaves the file at v1alpha1 while reporting success).
func TestConvertRefusesATaskItCannotRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	text := "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: broken}\nspec: {type: shell, shell: [unclosed\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	root, out, _ := newTestRoot()
	root.SetArgs([]string{"convert", "-f", p})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Fatalf("error %v, want one naming document 1; printed:\n%s", err, out)
	}
}
