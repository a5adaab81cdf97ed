package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

// Convert converts a Task, as decoded JSON of any served version, to version. It never fails for
// a Task the v1 schema admits; a spoke object whose preserved annotation is damaged, or whose
// fields have the wrong types, is an error that names the field.
//
// Hub to spoke: the spoke's fields, and the preserved annotation holding the difference between
// the hub and what the spoke says (raw JSON values, so durations keep their spelling and explicit
// zero values stay). Spoke to hub: the spoke's fields, defaults, and the hidden fields from the
// annotation (see restore).
func Convert(obj map[string]any, version string) (map[string]any, error) {
	from, err := versionOf(obj)
	if err != nil {
		return nil, err
	}
	if from == version {
		return obj, nil
	}
	if from != hubVersion {
		if obj, err = spokes[from].toHub(obj); err != nil {
			return nil, err
		}
	}
	if version == hubVersion {
		return obj, nil
	}
	to, ok := spokes[version]
	if !ok {
		return nil, fmt.Errorf("cannot convert to %s: the served versions are %v", version, ServedVersions())
	}
	return to.fromHub(obj)
}

// fromHub converts a hub object to the spoke.
func (s spoke) fromHub(obj map[string]any) (map[string]any, error) {
	spokeBody, p, err := s.read(obj)
	if err != nil {
		return nil, err
	}
	meta, err := metadataWithout(obj)
	if err != nil {
		return nil, err
	}
	if len(p.Patch) > 0 {
		value, err := p.encode()
		if err != nil {
			return nil, err
		}
		setAnnotation(meta, PreservedAnnotation, value)
	}
	return assemble(s.version, meta, spokeBody), nil
}

// read maps a hub object to the spoke's body and what that body does not express.
func (s spoke) read(obj map[string]any) (body, *preserved, error) {
	raw := bodyOf(obj)
	hub := &taskv1.Task{}
	if err := fromBody(raw, hub); err != nil {
		return nil, nil, fmt.Errorf("decode v1 %s: %w", nameOf(obj), err)
	}
	spokeBody, pure, err := s.down(hub)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.preserve(raw, spokeBody, pure)
	return spokeBody, p, err
}

// preserve returns what the spoke loses of the hub body raw: the merge patch from the spoke's
// defaulted up-conversion to raw (empty when nothing is lost), with the fingerprints that tell
// later whether the spoke was edited.
func (s spoke) preserve(raw, spokeBody body, pure *taskv1.Task) (*preserved, error) {
	pureBody, err := toBody(pure)
	if err != nil {
		return nil, err
	}
	baseline, err := defaultedBody(pure, taskv1.SetFieldDefaults)
	if err != nil {
		return nil, err
	}
	return &preserved{
		Format:            preservedFormat,
		SpecFingerprint:   fingerprint(spokeBody["spec"]),
		StatusFingerprint: fingerprint(spokeBody["status"]),
		Owners:            s.rules.ownerPrints(pureBody),
		Patch:             diff(baseline, raw),
	}, nil
}

// toHub converts a spoke object to the hub.
func (s spoke) toHub(obj map[string]any) (map[string]any, error) {
	pure, canonical, err := s.up(bodyOf(obj))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(obj), err)
	}
	if err := s.checkExplicitZeros(bodyOf(obj), canonical); err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(obj), err)
	}
	meta, err := metadataWithout(obj)
	if err != nil {
		return nil, err
	}
	p, err := preservedOf(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(obj), err)
	}
	var result body
	if p == nil {
		result, err = defaultedBody(pure, taskv1.SetDefaults)
	} else {
		result, err = s.restore(pure, canonical, p)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(obj), err)
	}
	return assemble(hubVersion, meta, result), nil
}

// restore rebuilds the hub body from what the spoke says (pure, canonical) and the preserved
// record p. A part (spec, status) the spoke left as it was comes back exactly as the hub had it.
// A part that was edited keeps the edit and regains only the hidden fields the edit could not
// have meant to change (restoreHidden); the rest takes defaults.
func (s spoke) restore(pure *taskv1.Task, canonical body, p *preserved) (body, error) {
	baseline, err := defaultedBody(pure, taskv1.SetFieldDefaults)
	if err != nil {
		return nil, err
	}
	exact := deepCopy(baseline).(body)
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
	if s.says(all) == says {
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
		if s.says(candidate) == says {
			kept = candidate
		}
	}
	return kept, nil
}

// says fingerprints what the spoke says of a hub body; "" when the body does not decode.
func (s spoke) says(b body) string {
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

// defaultedBody is the body of hub with the defaults that set applies: taskv1.SetDefaults, or
// taskv1.SetFieldDefaults for the baseline the preserved patch is taken against, so that a
// hidden field defaulted for a reason that may go away (history limits, for the schedule) is
// kept as set.
func defaultedBody(hub *taskv1.Task, set func(*taskv1.Task)) (body, error) {
	defaulted := hub.DeepCopy()
	set(defaulted)
	return toBody(defaulted)
}

// withDefaults adds to b the defaults of the fields it lacks, leaving the spelling of every
// field it has alone.
func withDefaults(b body) (body, error) {
	hub := &taskv1.Task{}
	if err := fromBody(b, hub); err != nil {
		return nil, err
	}
	before, err := toBody(hub)
	if err != nil {
		return nil, err
	}
	after, err := defaultedBody(hub, taskv1.SetDefaults)
	if err != nil {
		return nil, err
	}
	fill(b, diff(before, after))
	return b, nil
}

// fill sets the values of patch that doc lacks. A value doc has stays, even one the typed
// form cannot tell from unset (parallelism: 0): validation, not defaulting, must answer it.
func fill(doc, patch map[string]any) {
	for key, value := range patch {
		have, present := doc[key]
		sub, patchIsObj := value.(map[string]any)
		haveObj, haveIsObj := have.(map[string]any)
		switch {
		case patchIsObj && haveIsObj:
			fill(haveObj, sub)
		case !present && value != nil:
			doc[key] = deepCopy(value)
		}
	}
}

// hubPaths are the paths of the hub's fields, objects and leaves alike: the only places a
// hidden field can be. A value with its own JSON form (a time, a duration) and the elements of a
// list are leaves.
var hubPaths = func() map[path]bool {
	marshaler := reflect.TypeFor[json.Marshaler]()
	paths := map[path]bool{}
	var walk func(t reflect.Type, at path)
	walk = func(t reflect.Type, at path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
			return
		}
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
	return paths
}()

// checkExplicitZeros refuses a field the client set to a zero value that the spoke's Go type
// cannot tell from unset (an omitempty replicas: 0, method: "") when the hub field it maps to has
// a default: the conversion would store the default in its place, a value the client never
// wrote, and the apiserver would validate that value, not the client's, whenever it converts
// the object back to the spoke (after an admission patch): replicas: 0, which v1alpha1 refuses,
// was stored as 1. A zero with no default behind it (suspend: false) means what leaving the
// field out means, and passes.
func (s spoke) checkExplicitZeros(raw, canonical body) error {
	m, ok := FieldMaps(s.version)
	if !ok {
		return nil
	}
	for _, f := range m.Mappings() {
		at := path(f.Spoke)
		v, sent := lookup(raw, at)
		if !sent || v == nil {
			continue
		}
		if _, kept := lookup(canonical, at); kept {
			continue
		}
		for _, h := range f.Hub {
			if defaultedHubPaths[path(h)] {
				return field.Invalid(field.NewPath(at.keys()[0], at.keys()[1:]...), v,
					"a zero value "+s.version+" cannot tell from unset: it would be stored as the v1 default; leave the field out for the default")
			}
		}
	}
	return nil
}

// defaultedHubPaths are the hub leaves taskv1.SetDefaults fills in.
var defaultedHubPaths = func() map[path]bool {
	hub := &taskv1.Task{Spec: taskv1.TaskSpec{Runner: taskv1.Runner{HTTP: &taskv1.HTTPRunner{}}, Schedule: &taskv1.Schedule{}}}
	taskv1.SetDefaults(hub)
	b, err := toBody(hub)
	if err != nil {
		panic("conversion: the defaults do not encode: " + err.Error())
	}
	paths := map[path]bool{}
	var walk func(v any, at path)
	walk = func(v any, at path) {
		m, ok := v.(map[string]any)
		if !ok {
			paths[at] = true
			return
		}
		for k, e := range m {
			walk(e, join(at, k))
		}
	}
	walk(map[string]any(b), "")
	return paths
}()
