package taskoperator_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "example.com/task-operator/"

// readLayers reads the layering block of docs/architecture.md: one layer per line, top first,
// "name: package package ...".
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		switch line := sc.Text(); {
		case line == "```layers":
			in = true
		case in && line == "```":
			in = false
		case in:
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		t.Fatal("docs/architecture.md has no ```layers block")
	}
	layerOf := map[string]int{}
	for i, line := range lines {
		_, pkgs, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("layers line %q: want \"name: packages\"", line)
		}
		for _, p := range strings.Fields(pkgs) {
			if _, dup := layerOf[p]; dup {
				t.Fatalf("package %s is in two layers", p)
			}
			layerOf[p] = len(lines) - i // the bottom layer is 1
		}
	}
	return layerOf
}

// TestPackagesImportOnlyLayersBelowThem holds the code to docs/architecture.md: every package
// is in a layer, and its non-test code imports project packages of lower layers only.
func TestPackagesImportOnlyLayersBelowThem(t *testing.T) {
	layerOf := readLayers(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue // the module root holds this test only
		}
		layer, ok := layerOf[pkg]
		if !ok {
			t.Errorf("package %s is in no layer of docs/architecture.md", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if ours && layerOf[dep] >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): only lower layers may be imported", pkg, layer, dep, layerOf[dep])
			}
		}
	}
}
