package conversion

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestWithSchemaDefaultsAppliesEveryDefaultOfAnOldVersionsSchema: for every default anywhere in
// an old version's schema (an object's, a status field's, not only a scalar below spec), a Task
// written at that version without the field gets it from WithSchemaDefaults, as the apiserver
// gives it before it converts; offline conversion (kubectl task convert) relies on that.
func TestWithSchemaDefaultsAppliesEveryDefaultOfAnOldVersionsSchema(t *testing.T) {
	crd := generatedCRD(t)
	for _, v := range crd.Spec.Versions {
		if _, ok := spokes[v.Name]; !ok {
			continue
		}
		var walk func(p path, schema apix.JSONSchemaProps)
		walk = func(p path, schema apix.JSONSchemaProps) {
			if schema.Default != nil {
				want, err := decodeValue(schema.Default.Raw)
				if err != nil {
					t.Fatal(err)
				}
				// A Task holding the objects on the way to the field, and not the field.
				obj := map[string]any{"apiVersion": taskGroupPrefix + v.Name, "kind": "Task", "metadata": map[string]any{"name": "d"}}
				keys := p.keys()
				at := obj
				for _, k := range keys[:len(keys)-1] {
					next := map[string]any{}
					at[k] = next
					at = next
				}
				got, err := WithSchemaDefaults(obj)
				if err != nil {
					t.Fatal(err)
				}
				if have, _ := lookup(got, p); !cmp.Equal(have, want) {
					t.Errorf("%s %s: WithSchemaDefaults gives %v, the schema's default is %v", v.Name, p, have, want)
				}
			}
			for name, sub := range schema.Properties {
				if p == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
					continue
				}
				walk(join(p, name), sub)
			}
			if schema.Items != nil && schema.Items.Schema != nil && schema.Default == nil {
				// A default inside a list item needs an item to apply to: none is expected.
				var inItems func(s apix.JSONSchemaProps) bool
				inItems = func(s apix.JSONSchemaProps) bool {
					if s.Default != nil {
						return true
					}
					for _, sub := range s.Properties {
						if inItems(sub) {
							return true
						}
					}
					return false
				}
				if inItems(*schema.Items.Schema) {
					t.Errorf("%s %s: a default inside list items, which WithSchemaDefaults does not apply", v.Name, p)
				}
			}
		}
		walk("", *v.Schema.OpenAPIV3Schema)
	}
}
