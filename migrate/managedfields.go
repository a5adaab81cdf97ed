package migrate

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

// Server-side apply records each manager's fields at the apiVersion the manager wrote at. On
// every later write, of any manager at any version, the apiserver converts the old and the new
// object to the apiVersion of each entry that differs from the request's (structured-merge-
// diff's Updater.update, and reconcileManagedFieldsWithSchemaChanges before it): for a Task,
// calls to the conversion webhook, for as long as an entry at v1alpha1 or v1beta1 exists.
// The rewrite therefore also moves those entries to v1, with the field paths translated by the
// conversion package's field maps; the apiserver keeps the managedFields a client sends on an
// update of the main resource (FieldManager.Update decodes them from the request).

// fieldsType is the only encoding of an entry's fields the apiserver accepts.
const fieldsType = "FieldsV1"

// hubAPIVersion is what entries are moved to: example.com/v1.
var hubAPIVersion = taskv1.GroupVersion.String()

// movedManagedFields returns entries with every entry recorded at an old version moved to v1:
// each path of its set translated to the v1 paths the converter fills from that field
// (metadata unchanged, the preserved-fields annotation dropped: no v1 object has it), and then
// entries that name the same manager for the apiserver merged (see managerKey).
//
// moved is false when no entry is at an old version (nothing to do, entries is returned as it
// is). An error names the first entry and path that cannot be moved; the caller must then leave
// the object's managedFields as they are, so that ownership is never recorded wrongly.
func movedManagedFields(entries []metav1.ManagedFieldsEntry) (out []metav1.ManagedFieldsEntry, moved bool, err error) {
	old := false
	for _, e := range entries {
		if e.APIVersion != hubAPIVersion {
			old = true
			break
		}
	}
	if !old {
		return entries, false, nil
	}
	type merged struct {
		entry metav1.ManagedFieldsEntry
		set   *fieldpath.Set
	}
	var order []managerKey
	byKey := map[managerKey]*merged{}
	for _, e := range entries {
		set, err := movedSet(e)
		if err != nil {
			return nil, false, fmt.Errorf("the entry of manager %q (%s%s at %s): %w", e.Manager, e.Operation, subresourceText(e.Subresource), e.APIVersion, err)
		}
		e.APIVersion = hubAPIVersion
		key := keyOf(e)
		if have, ok := byKey[key]; ok {
			// The same manager at two versions: one entry at v1, owning what either owned,
			// changed when the later of the two last changed something.
			have.set = have.set.Union(set)
			if e.Time != nil && (have.entry.Time == nil || e.Time.After(have.entry.Time.Time)) {
				have.entry.Time = e.Time.DeepCopy()
			}
			continue
		}
		e.Time = e.Time.DeepCopy()
		byKey[key] = &merged{entry: e, set: set}
		order = append(order, key)
	}
	for _, key := range order {
		m := byKey[key]
		raw, err := m.set.ToJSON()
		if err != nil {
			return nil, false, fmt.Errorf("encode the fields of manager %q: %w", m.entry.Manager, err)
		}
		m.entry.FieldsType = fieldsType
		m.entry.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, m.entry)
	}
	// What the apiserver will decode: a list it cannot decode it would silently replace by
	// the stored one, and report nothing.
	if err := managedfields.ValidateManagedFields(out); err != nil {
		return nil, false, fmt.Errorf("the moved entries do not decode: %w", err)
	}
	return out, true, nil
}

// managerKey is what the apiserver identifies a manager by (BuildManagerIdentifier in
// k8s.io/apimachinery/pkg/util/managedfields/internal): the manager, the operation and the
// subresource, and for an Update also the apiVersion. Two entries with the same key would be
// one for the apiserver (the later one silently wins), so moved entries that collide are
// merged.
type managerKey struct {
	manager, subresource, apiVersion string
	operation                        metav1.ManagedFieldsOperationType
}

func keyOf(e metav1.ManagedFieldsEntry) managerKey {
	k := managerKey{manager: e.Manager, subresource: e.Subresource, apiVersion: e.APIVersion, operation: e.Operation}
	if e.Operation == metav1.ManagedFieldsOperationApply {
		k.apiVersion = ""
	}
	return k
}

// movedSet is the set of e translated to v1 (conversion.HubFieldSet).
func movedSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	return conversion.HubFieldSet(e)
}

func subresourceText(s string) string {
	if s == "" {
		return ""
	}
	return " of /" + s
}
