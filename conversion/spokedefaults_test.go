package conversion

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestSpokeDefaultsMatchTheCRD: the defaults an apply at an old version gives a field it drops
// are every scalar default of that version's schema below spec, as the apiserver applies them.
func TestSpokeDefaultsMatchTheCRD(t *testing.T) {
	crd := generatedCRD(t)
	for _, v := range crd.Spec.Versions {
		s, ok := spokes[v.Name]
		if !ok {
			continue
		}
		got := map[string]any{}
		var walk func(p path, schema apix.JSONSchemaProps)
		walk = func(p path, schema apix.JSONSchemaProps) {
			if schema.Default != nil && len(schema.Properties) == 0 {
				d, err := decodeValue(schema.Default.Raw)
				if err != nil {
					t.Fatal(err)
				}
				got[string(p)] = d
			}
			for name, sub := range schema.Properties {
				walk(join(p, name), sub)
			}
		}
		walk("spec", v.Schema.OpenAPIV3Schema.Properties["spec"])
		if diff := cmp.Diff(got, s.rules.defaults); diff != "" {
			t.Errorf("%s: the spoke's defaults are not its schema's (-schema +table):\n%s", v.Name, diff)
		}
	}
}

// generatedCRD is the Task CRD as make manifests generates it.
func generatedCRD(t *testing.T) *apix.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../config/crd/bases/example.com_tasks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}
