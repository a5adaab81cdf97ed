package v1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestEveryAnnotationIsUnderTheAnnotationPrefix: the operator's Job cache keeps only the
// annotations under AnnotationPrefix; one outside it would read as absent on every cached Job.
// Every constant named Annotation… in names.go is checked, so a new one is too.
func TestEveryAnnotationIsUnderTheAnnotationPrefix(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Annotation") || name.Name == "AnnotationPrefix" || i >= len(spec.Values) {
				continue
			}
			lit, ok := spec.Values[i].(*ast.BasicLit)
			if !ok {
				t.Errorf("%s is not a string literal", name.Name)
				continue
			}
			value, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			if !strings.HasPrefix(value, AnnotationPrefix) || value == AnnotationPrefix {
				t.Errorf("%s = %q is not under %q", name.Name, value, AnnotationPrefix)
			}
		}
		return true
	})
	if checked < 6 {
		t.Errorf("checked %d annotations in names.go, want the six and more", checked)
	}
}
