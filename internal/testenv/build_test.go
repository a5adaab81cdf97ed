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
		h, err := sourcesHash(root, "./cmd/app")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("go.mod", "module x\n\ngo 1.22\n")
	write("go.sum", "")
	write("lib/lib.go", "package lib\n\nimport _ \"embed\"\n\n//go:embed data.yaml\nvar Data string\n")
	write("lib/data.yaml", "a: 1\n")
	write("cmd/app/main.go", "package main\n\nimport _ \"x/lib\"\n\nfunc main() {}\n")
	write("other/other.go", "package other\n")
	base := hash()
	for _, change := range []struct {
		file, content string
		matters       bool
	}{
		{"lib/lib_test.go", "package lib\n", false},
		{"other/other.go", "package other\n\nvar X int\n", false},
		{"lib/unused.yaml", "b: 2\n", false},
		{"lib/data.yaml", "a: 2\n", true},
		{"lib/lib.go", "package lib\n\nimport _ \"embed\"\n\n//go:embed data.yaml\nvar Data string\n\nvar More int\n", true},
		{"cmd/app/main.go", "package main\n\nimport _ \"x/lib\"\n\nfunc main() { println() }\n", true},
		{"go.mod", "module x\n\ngo 1.23\n", true},
	} {
		write(change.file, change.content)
		if got := hash(); (got != base) != change.matters {
			t.Errorf("writing %s changed the hash: %v, want %v", change.file, got != base, change.matters)
		}
		base = hash()
	}
}
