package conversion

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	taskv1 "example.com/task-operator/apis/v1"
)

// Server-side apply removes a field its manager applied before and no longer applies, when no
// other manager owns it (structured-merge-diff's Updater.prune). To find out whether another
// manager still owns it, the apiserver converts the object without the field to the version of
// every managedFields entry and back, and adds back whatever is present in that conversion. A
// conversion that fills a field in is therefore read as someone keeping it: a Task's conversion
// fills defaults (parallelism, maxRetries, method, ...) and carries the v1 fields an old
// version cannot express in the preserved annotation, one value that the apiserver takes whole
// from the object before the removal. So the removed fields came back, owned by nobody (issue
// #27): after one write at another version, a v1 apply could no longer remove a v1-only field,
// nor an old-version apply a field the conversion defaults.
//
// The managedFields the apiserver records are right all the same: it is the object that keeps
// the field. droppedByApply reads them to do what the apply meant: the fields the writing
// manager's Apply entry owned before the write, owns no longer, and that no entry owns after it,
// are removed (and then take their defaults, as on any write).

// droppedByApply returns the v1 paths below part ("spec" or "status") that the write w removed
// by server-side apply, shortest first: the fields the Apply entry of w.FieldManager owned in
// w.OldObject and no entry owns in w.Object. A write at an old version removes only fields
// that version expresses (a manager that applied v1-only fields at v1 and then applies at an
// old version keeps their values, as any old-version write does). Nothing is returned when an
// entry cannot be read or translated: ownership unknown, nothing is removed.
func droppedByApply(w Write, part string) []fieldpath.Path {
	if w.Create || w.FieldManager == "" {
		return nil
	}
	subresource := ""
	if w.Status {
		subresource = "status"
	}
	before, ok := applySet(w.OldObject, w.FieldManager, subresource)
	if !ok || before.Empty() || !hasApplyEntry(w.Object, w.FieldManager, subresource) {
		// Not an apply by that manager: one that clears managedFields (the documented reset)
		// or writes by patch or update changes no field by what its entries stop owning.
		return nil
	}
	entries, ok := managedFieldsOf(w.Object)
	if !ok {
		return nil
	}
	owned := &fieldpath.Set{}
	for _, e := range entries {
		set, err := HubFieldSet(e)
		if err != nil {
			return nil
		}
		owned = owned.Union(withNamedParents(set))
	}
	dropped := withNamedParents(before).Difference(owned)
	for _, p := range droppedSharedTargets(w, subresource, entries) {
		dropped.Insert(p)
	}
	var out []fieldpath.Path
	dropped.Iterate(func(p fieldpath.Path) {
		if names := fieldNames(p); len(names) > 1 && names[0] == part && expressedAt(w.Version, p) {
			out = append(out, p.Copy())
		}
	})
	slices.SortStableFunc(out, func(a, b fieldpath.Path) int { return len(a) - len(b) })
	return out
}

// droppedSharedTargets are the v1 fields an apply at an old version stopped owning through an
// old field it no longer applies, where another old field it still applies fills the same v1
// field (v1alpha1's status.attempts, from retryCount and lastJobName): at v1 the manager's
// entries before and after both own it, so only the entries as recorded at the old version tell
// the drop. Such a field is dropped when no other entry owns it; removeDropped then resets it,
// and the conversion back to the old version fills it from the fields still applied.
func droppedSharedTargets(w Write, subresource string, entries []metav1.ManagedFieldsEntry) []fieldpath.Path {
	fields, ok := FieldMaps(w.Version)
	if !ok {
		return nil
	}
	at := taskv1.Group + "/" + w.Version
	before, ok := spokeApplySet(w.OldObject, w.FieldManager, subresource, at)
	if !ok {
		return nil
	}
	after, ok := spokeApplySet(w.Object, w.FieldManager, subresource, at)
	if !ok {
		return nil
	}
	others := &fieldpath.Set{}
	for _, e := range entries {
		if e.Manager == w.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			continue
		}
		set, err := HubFieldSet(e)
		if err != nil {
			return nil
		}
		others = others.Union(set)
	}
	var out []fieldpath.Path
	for _, f := range fields.mappings() {
		spoke := namedPath(path(f.Spoke).keys())
		if !before.Has(spoke) || after.Has(spoke) {
			continue
		}
		for _, h := range f.Hub {
			target := namedPath(path(h).keys())
			if fields.sharedTarget(f.Spoke, h) && !others.Has(target) {
				out = append(out, target)
			}
		}
	}
	return out
}

// sharedTarget says the v1 field hub is filled from another field of the version besides spoke.
func (m FieldMap) sharedTarget(spoke, hub string) bool {
	for _, f := range m.mappings() {
		if f.Spoke != spoke && slices.Contains(f.Hub, hub) {
			return true
		}
	}
	return false
}

// spokeApplySet is the field set of manager's Apply entry (for subresource) in obj as recorded,
// if it is recorded at apiVersion; ok is false otherwise.
func spokeApplySet(obj map[string]any, manager, subresource, apiVersion string) (*fieldpath.Set, bool) {
	e, found, ok := applyEntry(obj, manager, subresource)
	if !found || !ok || e.APIVersion != apiVersion || e.FieldsType != fieldsV1 || e.FieldsV1 == nil {
		return nil, false
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		return nil, false
	}
	return set, true
}

// applySet returns, at v1, the fields the Apply entry of manager (for subresource) owns in obj;
// ok is false when managedFields cannot be read or translated.
func applySet(obj map[string]any, manager, subresource string) (*fieldpath.Set, bool) {
	e, found, ok := applyEntry(obj, manager, subresource)
	if !ok {
		return nil, false
	}
	if !found {
		return &fieldpath.Set{}, true
	}
	set, err := HubFieldSet(e)
	return set, err == nil
}

// applyEntry is manager's Apply entry (for subresource) in obj; found says there is one, ok
// that managedFields could be read.
func applyEntry(obj map[string]any, manager, subresource string) (e metav1.ManagedFieldsEntry, found, ok bool) {
	entries, ok := managedFieldsOf(obj)
	if !ok {
		return e, false, false
	}
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			return e, true, true
		}
	}
	return e, false, true
}

// hasApplyEntry says manager has an Apply entry (for subresource) in obj: after a server-side
// apply, the applier always has one.
func hasApplyEntry(obj map[string]any, manager, subresource string) bool {
	entries, _ := managedFieldsOf(obj)
	return slices.ContainsFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource
	})
}

// managedFieldsOf decodes obj's metadata.managedFields.
func managedFieldsOf(obj map[string]any) ([]metav1.ManagedFieldsEntry, bool) {
	meta, _ := obj["metadata"].(map[string]any)
	raw, present := meta["managedFields"]
	if !present {
		return nil, true
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, false
	}
	var entries []metav1.ManagedFieldsEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, false
	}
	return entries, true
}

// withNamedParents adds to set every object a path of it lies in (as structured-merge-diff's
// EnsureNamedFieldsAreMembers does for the fields of a schema's structs): a manager owns the
// object its fields are in, so one that owned spec.schedule.cron alone owned spec.schedule.
func withNamedParents(set *fieldpath.Set) *fieldpath.Set {
	out := set.Union(&fieldpath.Set{})
	set.Iterate(func(p fieldpath.Path) {
		for i := 1; i < len(p); i++ {
			if p[i-1].FieldName != nil {
				out.Insert(p[:i].Copy())
			}
		}
	})
	return out
}

// expressedAt reports whether the v1 field p is one version can express: any at v1; at an old
// version a field its field map converts to, or a list item or field below one of the same
// shape at both versions (an HTTP header at v1beta1), or a container it decides the existence
// of (spokeRules.containers).
func expressedAt(version string, p fieldpath.Path) bool {
	m, ok := FieldMaps(version)
	if !ok {
		return version == hubVersion
	}
	names := fieldNames(p)
	// A container the version decides (a v1beta1 schedule) goes whole, as the spoke's rules
	// drop a removed container's hidden fields.
	if len(names) == len(p) && spokes[version].rules.isContainer(path(strings.Join(names, "."))) {
		return true
	}
	for _, f := range m.fields {
		for i, h := range f.Hub {
			hub := path(h).keys()
			switch {
			case len(names) == len(p) && slices.Equal(names, hub):
				return true
			case i == 0 && f.Same && len(names) >= len(hub) && slices.Equal(names[:len(hub)], hub):
				return true
			}
		}
	}
	return false
}

// removeAt removes the value at p from doc: a field by its name, a list item by its key fields
// or its value. A path that leads nowhere removes nothing.
func removeAt(doc map[string]any, p fieldpath.Path) {
	if len(p) == 0 {
		return
	}
	var cur any = doc
	for i, pe := range p {
		last := i == len(p)-1
		switch node := cur.(type) {
		case map[string]any:
			if pe.FieldName == nil {
				return
			}
			if last {
				delete(node, *pe.FieldName)
				return
			}
			cur = node[*pe.FieldName]
		case []any:
			j := itemIndex(node, pe)
			if j < 0 {
				return
			}
			if last {
				setParentList(doc, p[:i], slices.Delete(slices.Clone(node), j, j+1))
				return
			}
			cur = node[j]
		default:
			return
		}
	}
}

// itemIndex finds the list item pe names, -1 if none.
func itemIndex(list []any, pe fieldpath.PathElement) int {
	for j, item := range list {
		switch {
		case pe.Key != nil:
			m, ok := item.(map[string]any)
			if ok && keyMatches(m, *pe.Key) {
				return j
			}
		case pe.Value != nil:
			if value.Equals(value.NewValueInterface(item), *pe.Value) {
				return j
			}
		case pe.Index != nil:
			if *pe.Index == j {
				return j
			}
		}
	}
	return -1
}

func keyMatches(item map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v, ok := item[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

// setParentList stores list at the field p names in doc (p ends with a field name).
func setParentList(doc map[string]any, p fieldpath.Path, list []any) {
	var cur any = doc
	for i, pe := range p {
		switch node := cur.(type) {
		case map[string]any:
			if pe.FieldName == nil {
				return
			}
			if i == len(p)-1 {
				node[*pe.FieldName] = list
				return
			}
			cur = node[*pe.FieldName]
		case []any:
			j := itemIndex(node, pe)
			if j < 0 {
				return
			}
			cur = node[j]
		default:
			return
		}
	}
}
