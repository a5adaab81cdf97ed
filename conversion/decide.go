package conversion

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	taskv1 "example.com/task-operator/apis/v1"
)

// Write is a client's write of a Task, as the admission webhook sees it: at v1, whatever version
// the client wrote at.
type Write struct {
	// Version is the version the client wrote at (the AdmissionRequest's requestKind).
	Version string
	// Create is true for a CREATE, false for an UPDATE (a patch and an apply are updates).
	Create bool
	// Status is true for a write to the status subresource.
	Status bool
	// Object is the Task to be stored and OldObject the stored one (UPDATE only), at v1.
	Object, OldObject map[string]any
	// FieldManager is the field manager the request named (its options' fieldManager), which
	// every server-side apply names: what its Apply entry stopped owning is removed (see
	// droppedByApply). "" when the request named none.
	FieldManager string
}

// Decide returns the Task to store for w, at v1. The server decides what a client cannot see:
//
//   - A write at an old version sets only the fields that version expresses. The hidden fields
//     are those of the stored object (UPDATE) or the defaults (CREATE), whatever the client sent
//     (a preserved annotation it kept, edited, forged or deleted), except where the write changed
//     what owns them (see the spokes' rules: a removed runner or schedule, a new URL, another
//     Job).
//   - A write to the main resource never sets status, at any version: status is the stored one
//     (UPDATE) or none (CREATE); a write to status never sets spec.
//   - A server-side apply removes what its manager stopped applying and no manager owns, at
//     any version, as it does on a Task only ever written at one version (droppedByApply).
//   - The preserved annotation is never stored, and defaults are filled in (main resource only).
//
// Fields are spelled as the client or the stored object spelled them (a duration stays "5m").
func Decide(w Write) (map[string]any, error) {
	out, err := metadataWithout(w.Object)
	if err != nil {
		return nil, err
	}
	result := assemble(hubVersion, out, bodyOf(w.Object))
	if w.Version != hubVersion {
		b, err := decideHidden(w)
		if err != nil {
			return nil, err
		}
		if err := keepsOthersContainers(w, b); err != nil {
			return nil, err
		}
		replaceBody(result, b)
	}
	if w.Status {
		removeDropped(w, result, "status")
		return result, nil
	}
	removeDropped(w, result, "spec")
	b := bodyOf(result)
	delete(b, "status")
	if !w.Create {
		if status, ok := w.OldObject["status"]; ok {
			b["status"] = deepCopy(status)
		}
	}
	if b, err = withDefaults(b); err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(w.Object), err)
	}
	replaceBody(result, b)
	return result, nil
}

// decideHidden returns the body of a write at an old version with its hidden fields decided.
func decideHidden(w Write) (body, error) {
	s, ok := spokes[w.Version]
	if !ok {
		return nil, fmt.Errorf("%s: written at unknown version %q", nameOf(w.Object), w.Version)
	}
	hub := &taskv1.Task{}
	if err := fromBody(bodyOf(w.Object), hub); err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(w.Object), err)
	}
	spokeBody, pure, err := s.down(hub)
	if err != nil {
		return nil, err
	}
	if w.Create {
		return defaultedBody(pure, taskv1.SetDefaults)
	}
	_, old, err := s.read(w.OldObject, nil)
	if err != nil {
		return nil, err
	}
	b, err := s.restore(pure, spokeBody, old)
	if err != nil {
		return nil, err
	}
	if w.Status {
		b["spec"] = deepCopy(w.OldObject["spec"])
	}
	return b, nil
}

// keepsOthersContainers refuses an apply at an old version that removes a container the
// version decides (a v1beta1 schedule) while another manager owns a field in it: the version
// has nowhere to keep that field, and at v1 the same apply keeps it (and is refused when what
// is left is invalid, a schedule without a cron). Ownership is read off the stored object: by
// admission the apiserver has dropped the entries of fields the conversion lost. Updates
// remove it as at v1.
func keepsOthersContainers(w Write, decided body) error {
	if w.Create || w.Status || !hasApplyEntry(w.Object, w.FieldManager, "") {
		return nil
	}
	entries, ok := managedFieldsOf(w.OldObject)
	if !ok {
		return nil
	}
	for _, c := range spokes[w.Version].rules.containers {
		if _, had := lookup(w.OldObject, c); !had {
			continue
		}
		if _, kept := lookup(decided, c); kept {
			continue
		}
		for _, e := range entries {
			if e.Manager == w.FieldManager || e.Subresource != "" {
				continue
			}
			if set, err := HubFieldSet(e); err == nil && ownsBelow(set, c) {
				return fmt.Errorf("%s: %s: an apply at %s cannot remove it while field manager %q owns fields in it that %s cannot express; apply without them at %s, or have %q release them",
					nameOf(w.Object), c, w.Version, e.Manager, w.Version, hubVersion, e.Manager)
			}
		}
	}
	return nil
}

// ownsBelow says set holds a field strictly below the object at p.
func ownsBelow(set *fieldpath.Set, p path) bool {
	keys := p.keys()
	found := false
	set.Iterate(func(fp fieldpath.Path) {
		names := fieldNames(fp)
		if len(names) > len(keys) && slices.Equal(names[:len(keys)], keys) {
			found = true
		}
	})
	return found
}

// replaceBody sets obj's spec and status to b's.
func replaceBody(obj map[string]any, b body) {
	for _, key := range []string{"spec", "status"} {
		if v, ok := b[key]; ok {
			obj[key] = v
		} else {
			delete(obj, key)
		}
	}
}

// removeDropped removes from obj, below part, the fields the write's apply dropped. At an old
// version a field takes the value that version gives a manifest without it (maxRetry: 0 at
// v1alpha1, the v1 default where that version has the same), as the apply did on the version's
// own object; at v1 it is removed, and the defaults follow.
func removeDropped(w Write, obj map[string]any, part string) {
	for _, p := range droppedByApply(w, part) {
		if w.Version == hubVersion || !spokes[w.Version].resetToSpokeDefault(obj, p) {
			removeAt(obj, p)
		}
	}
}

// resetToSpokeDefault sets the v1 field p of obj to the default of the spoke field it is
// converted from, when that field has one; false otherwise (the v1 default, if any, follows).
func (s spoke) resetToSpokeDefault(obj map[string]any, p fieldpath.Path) bool {
	names := fieldNames(p)
	if len(names) != len(p) {
		return false
	}
	hubPath := strings.Join(names, ".")
	m, _ := FieldMaps(s.version)
	for _, f := range m.Mappings() {
		v, ok := s.rules.defaults[f.Spoke]
		if !ok || f.Same || !slices.Contains(f.Hub, hubPath) {
			continue
		}
		cut(obj, path(hubPath))
		leaf{at: path(hubPath), value: v}.applyTo(obj)
		return true
	}
	return false
}
