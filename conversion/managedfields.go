package conversion

import (
	"bytes"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	taskv1 "example.com/task-operator/apis/v1"
)

// fieldsV1 is the only encoding of a managedFields entry's fields the apiserver accepts.
const fieldsV1 = "FieldsV1"

// HubFieldSet returns the fields a managedFields entry of a Task owns, as v1 paths: an entry at
// v1 as it is, one at an old version with each path translated by that version's field map to
// the v1 fields the converter fills from it (metadata unchanged, the preserved-fields
// annotation dropped: it stands for v1 fields the server decides, and no v1 object has it).
// An error names the path that has no counterpart at v1.
func HubFieldSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	if e.FieldsType != fieldsV1 {
		return nil, fmt.Errorf("fieldsType %q, not %s", e.FieldsType, fieldsV1)
	}
	set := &fieldpath.Set{}
	if e.FieldsV1 != nil {
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("fieldsV1 does not decode: %w", err)
		}
	}
	if e.APIVersion == taskv1.GroupVersion.String() {
		return set, nil
	}
	gv, err := schema.ParseGroupVersion(e.APIVersion)
	if err != nil || gv.Group != taskv1.Group {
		return nil, fmt.Errorf("apiVersion %q is not a version of %s", e.APIVersion, taskv1.Group)
	}
	fields, ok := FieldMaps(gv.Version)
	if !ok {
		return nil, fmt.Errorf("%s has no field map to %s", e.APIVersion, taskv1.GroupVersion)
	}
	out := &fieldpath.Set{}
	var failed error
	set.Iterate(func(p fieldpath.Path) {
		if failed != nil {
			return
		}
		hub, err := fields.hubPaths(p)
		if err != nil {
			failed = err
			return
		}
		for _, h := range hub {
			out.Insert(h)
		}
	})
	return out, failed
}

// hubPaths translates one path of a set recorded at the old version m is of.
func (m FieldMap) hubPaths(p fieldpath.Path) ([]fieldpath.Path, error) {
	names := fieldNames(p)
	if len(names) == 0 {
		return nil, fmt.Errorf("path %s: not a field", p)
	}
	switch names[0] {
	case "apiVersion", "kind":
		if len(p) == 1 {
			return []fieldpath.Path{p.Copy()}, nil
		}
	case "metadata":
		if len(names) >= 3 && names[1] == "annotations" && names[2] == PreservedAnnotation {
			return nil, nil
		}
		return []fieldpath.Path{p.Copy()}, nil
	default:
		if len(names) == len(p) {
			if hub, ok := m.Map(names); ok {
				out := make([]fieldpath.Path, len(hub))
				for i, h := range hub {
					out[i] = namedPath(h)
				}
				return out, nil
			}
		} else if hub, ok := m.SameShape(names); ok {
			// List items and what is below them carry over as they are.
			rest := p[len(names):].Copy()
			return []fieldpath.Path{append(namedPath(hub), rest...)}, nil
		}
	}
	return nil, fmt.Errorf("path %s has no counterpart at %s", p, taskv1.GroupVersion)
}

// fieldNames returns the field names p starts with, up to its first list item or value.
func fieldNames(p fieldpath.Path) []string {
	var names []string
	for _, pe := range p {
		if pe.FieldName == nil {
			break
		}
		names = append(names, *pe.FieldName)
	}
	return names
}

func namedPath(names []string) fieldpath.Path {
	p := make(fieldpath.Path, len(names))
	for i, n := range names {
		p[i] = fieldpath.PathElement{FieldName: &n}
	}
	return p
}
