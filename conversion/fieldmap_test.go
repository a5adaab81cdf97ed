package conversion

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/config"
)

var spokeTypes = map[string]reflect.Type{
	v1alpha1.GroupVersion.Version: reflect.TypeFor[v1alpha1.Task](),
	v1beta1.GroupVersion.Version:  reflect.TypeFor[v1beta1.Task](),
}

// TestFieldMapsMatchTheConverter checks each old version's field table against the typed
// mapping functions: a field set alone (to a value that is not its zero value, in otherwise
// empty objects) and converted to v1 fills exactly the v1 fields the table lists for it, and
// nothing else.
func TestFieldMapsMatchTheConverter(t *testing.T) {
	for version := range spokeTypes {
		t.Run(version, func(t *testing.T) {
			m, ok := FieldMaps(version)
			if !ok {
				t.Fatalf("no field map for %s", version)
			}
			s := spokes[version]
			for _, f := range m.Mappings() {
				typ := typeAt(t, spokeTypes[version], f.Spoke)
				// The objects the field lies in exist in both, so that their required fields
				// (a runner's script or url) appear in both as their zero values.
				spokeBody := body{}
				if i := strings.LastIndex(f.Spoke, "."); i > 0 {
					setAt(spokeBody, path(f.Spoke[:i]), map[string]any{})
				}
				baseline := upBody(t, s, deepCopy(spokeBody).(body))
				setAt(spokeBody, path(f.Spoke), sampleOf(t, typ))
				filled := leafPaths(diff(baseline, upBody(t, s, spokeBody)), "")
				slices.Sort(filled)
				want := slices.Sorted(slices.Values(f.Hub))
				if diff := cmp.Diff(want, filled); diff != "" {
					t.Errorf("%s %s set alone fills other v1 fields than the table says (-table +converter):\n%s", version, f.Spoke, diff)
				}
				for _, h := range f.Hub {
					if !hubPaths[path(h)] {
						t.Errorf("%s %s: %s is not a v1 field", version, f.Spoke, h)
					}
				}
				if f.Same {
					// Below the field, the paths must be the same ones at both versions.
					spokeTree, hubTree := jsonTree(typ, ""), jsonTree(typeAt(t, reflect.TypeFor[taskv1.Task](), f.Hub[0]), "")
					if diff := cmp.Diff(spokeTree, hubTree); diff != "" {
						t.Errorf("%s %s is marked Same but its value has another shape at v1 %s (-%s +v1):\n%s", version, f.Spoke, f.Hub[0], version, diff)
					}
				}
			}
		})
	}
}

// TestFieldMapsCoverEveryField checks that the table of each old version names every field of
// its Go type and of its CRD schema (objects aside: they map to the v1 object holding their
// fields), and nothing else; and that a Same field is a list keyed the same way at both
// versions in the CRD.
func TestFieldMapsCoverEveryField(t *testing.T) {
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(config.CRD, crd); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*apix.JSONSchemaProps{}
	for _, v := range crd.Spec.Versions {
		schemas[v.Name] = v.Schema.OpenAPIV3Schema
	}
	for version, typ := range spokeTypes {
		t.Run(version, func(t *testing.T) {
			m, _ := FieldMaps(version)
			var table []string
			for _, f := range m.Mappings() {
				table = append(table, f.Spoke)
			}
			var goLeaves, schemaLeaves []string
			for _, part := range []string{"spec", "status"} {
				goLeaves = append(goLeaves, goLeafPaths(typeAt(t, typ, part), part, m)...)
				schemaLeaves = append(schemaLeaves, schemaLeafPaths(schemas[version].Properties[part], part, m)...)
			}
			slices.Sort(goLeaves)
			slices.Sort(schemaLeaves)
			if diff := cmp.Diff(table, goLeaves); diff != "" {
				t.Errorf("the field table of %s and the fields of its Go type differ (-table +Go type):\n%s", version, diff)
			}
			if diff := cmp.Diff(table, schemaLeaves); diff != "" {
				t.Errorf("the field table of %s and the fields of its CRD schema differ (-table +schema):\n%s", version, diff)
			}
			for _, f := range m.Mappings() {
				if !f.Same {
					continue
				}
				sp, hp := schemaAt(schemas[version], f.Spoke), schemaAt(schemas["v1"], f.Hub[0])
				if sp == nil || hp == nil {
					t.Fatalf("%s %s or v1 %s not in the CRD schema", version, f.Spoke, f.Hub[0])
				}
				if sp.Type == "array" && (!reflect.DeepEqual(sp.XListType, hp.XListType) || !slices.Equal(sp.XListMapKeys, hp.XListMapKeys)) {
					t.Errorf("%s %s is a list of type %v keyed by %v, but v1 %s one of type %v keyed by %v",
						version, f.Spoke, deref(sp.XListType), sp.XListMapKeys, f.Hub[0], deref(hp.XListType), hp.XListMapKeys)
				}
			}
		})
	}
}

func TestFieldMapMap(t *testing.T) {
	alpha, _ := FieldMaps("v1alpha1")
	beta, _ := FieldMaps("v1beta1")
	if _, ok := FieldMaps("v1"); ok {
		t.Errorf("the hub has a field map")
	}
	for _, tc := range []struct {
		m    FieldMap
		keys string
		want []string // "" for not ok
	}{
		{alpha, "spec.shell", []string{"spec.runner.shell.script"}},
		{alpha, "status.lastJobName", []string{"status.lastJob.name", "status.attempts"}},
		{alpha, "spec", []string{"spec"}},
		{alpha, "status", []string{"status"}},
		{alpha, "spec.shell.script", nil},
		{alpha, "spec.runner", nil},
		{alpha, "spec.bogus", nil},
		{beta, "spec.schedule", []string{"spec.schedule.cron"}},
		{beta, "spec.runner", []string{"spec.runner"}},
		{beta, "spec.runner.shell", []string{"spec.runner.shell"}},
		{beta, "spec.runner.http", []string{"spec.runner.http"}},
		{beta, "status.conditions", []string{"status.conditions"}},
		{beta, "status.conditions.anything", []string{"status.conditions.anything"}},
		{beta, "spec.schedule.cron", nil},
		{beta, "status.lastJob", nil},
		{beta, "metadata", nil},
	} {
		got, ok := tc.m.Map(strings.Split(tc.keys, "."))
		var joined []string
		for _, g := range got {
			joined = append(joined, strings.Join(g, "."))
		}
		if ok != (tc.want != nil) || !slices.Equal(joined, tc.want) {
			t.Errorf("%s Map(%s) = %v, %v; want %v", tc.m.Version(), tc.keys, joined, ok, tc.want)
		}
	}
}

func upBody(t *testing.T, s spoke, b body) body {
	t.Helper()
	pure, _, err := s.up(b, nil)
	if err != nil {
		t.Fatalf("%s up: %v", s.version, err)
	}
	out, err := toBody(pure)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// typeAt is the Go type of the field at p (JSON keys) in the struct type t.
func typeAt(t *testing.T, typ reflect.Type, p string) reflect.Type {
	t.Helper()
	for _, key := range strings.Split(p, ".") {
		typ = derefType(typ)
		f, ok := jsonField(typ, key)
		if !ok {
			t.Fatalf("%s has no field %q (at %s)", typ, key, p)
		}
		typ = f.Type
	}
	return derefType(typ)
}

func jsonField(typ reflect.Type, key string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == key {
			return f, true
		}
		if f.Anonymous && name == "" {
			if inner, ok := jsonField(f.Type, key); ok {
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

// deref is *v, or the zero value for nil.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

func derefType(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ
}

// isLeaf: a value with its own JSON form (a time) and anything but a struct is a leaf.
func isLeaf(typ reflect.Type) bool {
	typ = derefType(typ)
	marshaler := reflect.TypeFor[json.Marshaler]()
	return typ.Kind() != reflect.Struct || typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler)
}

// goLeafPaths lists the leaves below the struct type typ at p, not descending into Same fields.
func goLeafPaths(typ reflect.Type, p string, m FieldMap) []string {
	typ = derefType(typ)
	if isLeaf(typ) || m.fields[p].Same {
		return []string{p}
	}
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, goLeafPaths(f.Type, p+"."+name, m)...)
	}
	return out
}

func schemaLeafPaths(s apix.JSONSchemaProps, p string, m FieldMap) []string {
	if s.Type != "object" || len(s.Properties) == 0 || m.fields[p].Same {
		return []string{p}
	}
	var out []string
	for name, sub := range s.Properties {
		out = append(out, schemaLeafPaths(sub, p+"."+name, m)...)
	}
	return out
}

func schemaAt(s *apix.JSONSchemaProps, p string) *apix.JSONSchemaProps {
	for _, key := range strings.Split(p, ".") {
		sub, ok := s.Properties[key]
		if !ok {
			return nil
		}
		s = &sub
	}
	return s
}

// jsonTree lists every JSON path below typ (elements of lists included), with its Go kind.
func jsonTree(typ reflect.Type, p string) []string {
	typ = derefType(typ)
	switch {
	case typ.Kind() == reflect.Slice:
		return jsonTree(typ.Elem(), p+"[]")
	case isLeaf(typ):
		kind := typ.Kind().String()
		if typ.Kind() == reflect.Struct {
			kind = typ.String() // a type with its own JSON form
		}
		return []string{p + ":" + kind}
	}
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, jsonTree(f.Type, p+"."+name+"("+opts+")")...)
	}
	slices.Sort(out)
	return out
}

// sampleOf is a JSON value of typ that is not its zero value, every field of an object filled.
func sampleOf(t *testing.T, typ reflect.Type) any {
	t.Helper()
	typ = derefType(typ)
	switch {
	case typ == reflect.TypeFor[metav1.Time]():
		return "2030-01-02T03:04:05Z"
	case typ.Kind() == reflect.String:
		return "x"
	case typ.Kind() == reflect.Bool:
		return true
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64:
		return int64(2)
	case typ.Kind() == reflect.Slice:
		return []any{sampleOf(t, typ.Elem())}
	case typ.Kind() == reflect.Struct && !isLeaf(typ):
		obj := map[string]any{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" && f.IsExported() {
				obj[name] = sampleOf(t, f.Type)
			}
		}
		return obj
	}
	t.Fatalf("no sample value for %s", typ)
	return nil
}

// leafPaths lists the paths of the non-object values of a merge patch.
func leafPaths(patch map[string]any, at path) []string {
	var out []string
	for k, v := range patch {
		p := join(at, k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leafPaths(sub, p)...)
			continue
		}
		out = append(out, string(p))
	}
	return out
}
