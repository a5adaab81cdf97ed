package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSourcesHashFollowsWhatTheBuildReads(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hash := func() string {
		t.Helper()
		h, err := sourcesHash(root)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("go.mod", "module x\n")
	write("a/a.go", "package a\n")
	base := hash()
	for _, change := range []struct {
		file    string
		matters bool
	}{
		{"a/a_test.go", false},
		{"docs/notes.md", false},
		{".cache/operator/task-operator-x", false},
		{"a/a.go", true},
		{"config/crd.yaml", true},
		{"go.sum", true},
	} {
		write(change.file, "changed\n")
		if got := hash(); (got != base) != change.matters {
			t.Errorf("writing %s changed the hash: %v, want %v", change.file, got != base, change.matters)
		}
		base = hash()
	}
}
