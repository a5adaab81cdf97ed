package conversion

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

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
	defaultAbsentMaxRetries(b)
	readable := b
	if len(unfitQuantities(b)) > 0 {
		// Stored so (CheckQuantities ratchets them): no default depends on a quantity, and no
		// typed decoding could read one.
		readable = deepCopy(b).(body)
		dropUnfitQuantities(readable)
	}
	hub := &taskv1.Task{}
	if err := fromBody(readable, hub); err != nil {
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

// defaultAbsentMaxRetries gives a retry policy without maxRetries the CRD's default, as the
// apiserver does: the typed form cannot, since its maxRetries has no omitempty (0 means never
// retry) and so reads retry: {} as maxRetries: 0.
func defaultAbsentMaxRetries(b body) {
	v, _ := lookup(b, "spec.retry")
	if retry, ok := v.(map[string]any); ok {
		if _, set := retry["maxRetries"]; !set {
			retry["maxRetries"] = int64(taskv1.DefaultMaxRetries)
		}
	}
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
	for _, f := range m.mappings() {
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
