package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	taskv1 "example.com/task-operator/apis/v1"
)

// restore rebuilds the hub body from what the spoke says (pure, canonical) and the preserved
// record p. A part (spec, status) the spoke left as it was comes back exactly as the hub had it.
// A part that was edited keeps the edit and regains only the hidden fields the edit could not
// have meant to change (restoreHidden); the rest takes defaults.
func (s spoke) restore(pure *taskv1.Task, canonical body, p *preserved) (body, error) {
	// The baseline is encoded afresh and used for nothing else: the patch applies to it in place.
	exact, err := defaultedBody(pure, taskv1.SetFieldDefaults)
	if err != nil {
		return nil, err
	}
	apply(exact, p.Patch)

	// Most spoke objects come straight from a down-conversion, unedited: the edited body is
	// built only for a part that changed, as it costs several typed round trips.
	var edited body
	result := body{}
	for _, part := range []string{"spec", "status"} {
		was := p.SpecFingerprint
		if part == "status" {
			was = p.StatusFingerprint
		}
		source := exact
		if fingerprint(canonical[part]) != was {
			if edited == nil {
				if edited, err = s.editedBody(pure, canonical, p); err != nil {
					return nil, err
				}
			}
			source = edited
		}
		if v, ok := source[part]; ok {
			result[part] = v
		}
	}
	// The restored fields come from an annotation: check they fit the hub before they are stored.
	if err := fromBody(result, &taskv1.Task{}); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%s]: %w", PreservedAnnotation, err)
	}
	return result, nil
}

// editedBody is the hub body of a spoke edited since p was made: what the spoke says, the
// hidden fields the edit leaves standing, and defaults.
func (s spoke) editedBody(pure *taskv1.Task, canonical body, p *preserved) (body, error) {
	pureBody, err := toBody(pure)
	if err != nil {
		return nil, err
	}
	edited, err := s.restoreHidden(pureBody, canonical, p)
	if err != nil {
		return nil, err
	}
	return withDefaults(edited)
}

// restoreHidden adds to the pure body of an edited spoke the hidden fields of p that the edit
// leaves standing, and gives the visible fields the edit did not touch back their hub spelling:
// never a value that changes what the spoke says (the edit wins), nothing inside a container
// the spoke removed, nothing below an owner whose value changed.
func (s spoke) restoreHidden(pureBody, canonical body, p *preserved) (body, error) {
	var leaves []leaf
	s.rules.hiddenLeaves(pureBody, p.Patch, "", s.rules.changedOwners(p, pureBody), &leaves)
	if len(leaves) == 0 {
		return deepCopy(pureBody).(body), nil
	}
	says := fingerprint(canonical)
	all := deepCopy(pureBody).(body)
	for _, l := range leaves {
		l.applyTo(all)
	}
	if s.visiblePrint(all) == says {
		return all, nil
	}
	// Some value would change what the spoke says: keep the others, one by one. Hidden fields
	// go first, so that a respelling is judged against the body they make.
	slices.SortStableFunc(leaves, func(a, b leaf) int {
		switch {
		case a.respelled == b.respelled:
			return 0
		case a.respelled:
			return 1
		}
		return -1
	})
	kept := deepCopy(pureBody).(body)
	for _, l := range leaves {
		candidate := deepCopy(kept).(body)
		l.applyTo(candidate)
		if s.visiblePrint(candidate) == says {
			kept = candidate
		}
	}
	return kept, nil
}

// visiblePrint fingerprints what the spoke says of a hub body; "" when the body does not decode.
func (s spoke) visiblePrint(b body) string {
	hub := &taskv1.Task{}
	if err := fromBody(b, hub); err != nil {
		return ""
	}
	spokeBody, _, err := s.down(hub)
	if err != nil {
		return ""
	}
	return fingerprint(spokeBody)
}

// A leaf is one value of a merge patch, at its path.
type leaf struct {
	at    path
	value any
	// respelled: the spoke shows this field, and the value is how the hub had it spelled.
	respelled bool
}

func (l leaf) applyTo(doc map[string]any) {
	keys := l.at.keys()
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	last := keys[len(keys)-1]
	if l.value == nil {
		delete(cur, last)
		return
	}
	cur[last] = deepCopy(l.value)
}

// hiddenLeaves collects the leaves of patch outside removed containers and changed owners:
// those doc lacks (hidden fields), and those doc has in another form or should not have at all
// (respelled: a visible field the spoke renders in its own way, such as a duration's spelling,
// a sub-second time or an empty string the spoke omits).
func (r spokeRules) hiddenLeaves(doc, patch map[string]any, at path, dropped []path, out *[]leaf) {
	for key, value := range patch {
		p := join(at, key)
		if isBelowAny(p, dropped) || !hubPaths[p] {
			// Not below a changed owner, and a field of the hub: a key no Task has would fail
			// to decode, and trying each of thousands of invented keys costs a re-encoding of
			// the whole body apiece.
			continue
		}
		have, present := doc[key]
		sub, patchIsObj := value.(map[string]any)
		haveObj, haveIsObj := have.(map[string]any)
		switch {
		case patchIsObj && haveIsObj:
			r.hiddenLeaves(haveObj, sub, p, dropped, out)
		case r.isContainer(p), value == nil && !present:
		case patchIsObj && !present && hubStructs[p]:
			// An object the edit left out whole (a status cleared at the old version): its
			// fields are judged one by one, as when it is there, so that one visible field
			// respelled does not take the hidden ones with it, and the owners' rules reach
			// inside it.
			r.hiddenLeaves(map[string]any{}, sub, p, dropped, out)
		case present:
			*out = append(*out, leaf{at: p, value: value, respelled: true})
		default:
			*out = append(*out, leaf{at: p, value: value})
		}
	}
}

func (r spokeRules) isContainer(p path) bool {
	for _, c := range r.containers {
		if p == c {
			return true
		}
	}
	return false
}

func isBelowAny(p path, roots []path) bool {
	for _, root := range roots {
		if within(p, root) {
			return true
		}
	}
	return false
}

// ownerPrints fingerprints the owners' visible values in a pure body.
func (r spokeRules) ownerPrints(pureBody body) map[path]string {
	if len(r.owners) == 0 {
		return nil
	}
	prints := make(map[path]string, len(r.owners))
	for _, o := range r.owners {
		v, _ := lookup(pureBody, o.value)
		prints[o.value] = fingerprint(v)
	}
	return prints
}

// changedOwners returns what the owners whose value differs from when p was made own.
func (r spokeRules) changedOwners(p *preserved, pureBody body) []path {
	var dropped []path
	now := r.ownerPrints(pureBody)
	for _, o := range r.owners {
		if p.Owners[o.value] != now[o.value] {
			dropped = append(dropped, o.owns)
		}
	}
	return dropped
}

// hubPaths are the paths of the hub's fields, objects and leaves alike: the only places a
// hidden field can be. A value with its own JSON form (a time, a duration), a map and the
// elements of a list are leaves. hubStructs are the paths among them of objects with fields of
// their own: those alone are gone through field by field.
var hubPaths, hubStructs = func() (map[path]bool, map[path]bool) {
	marshaler := reflect.TypeFor[json.Marshaler]()
	paths, structs := map[path]bool{}, map[path]bool{}
	var walk func(t reflect.Type, at path)
	walk = func(t reflect.Type, at path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
			return
		}
		structs[at] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && name == "":
				walk(f.Type, at)
			case name != "" && name != "-" && f.IsExported():
				p := join(at, name)
				paths[p] = true
				walk(f.Type, p)
			}
		}
	}
	hub := reflect.TypeFor[taskv1.Task]()
	for _, part := range []string{"Spec", "Status"} {
		f, _ := hub.FieldByName(part)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		paths[path(name)] = true
		walk(f.Type, path(name))
	}
	return paths, structs
}()
