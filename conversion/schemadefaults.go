package conversion

import "strings"

// WithSchemaDefaults returns a copy of a Task, as decoded JSON of any served version, with the
// defaults the apiserver gives it when it is written at that version, before any conversion:
// for v1, WithDefaults; for an old version, its schema's defaults (the spoke's defaults, which
// TestSpokeDefaultsMatchTheCRD holds to the CRD), each set where the object holding it exists
// and the field is absent or null (the apiserver prunes the null of a field that is not
// nullable, then defaults it). Convert reads what a Task says, not what the cluster adds to it:
// a v1beta1 Task without maxRetries converts to retry.maxRetries 0, where the cluster, which
// defaults maxRetries to 3 at v1beta1 first, stores 3.
func WithSchemaDefaults(obj map[string]any) (map[string]any, error) {
	from, err := versionOf(obj)
	if err != nil {
		return nil, err
	}
	if from == hubVersion {
		return WithDefaults(obj)
	}
	out, _ := deepCopy(obj).(map[string]any)
	for p, value := range spokes[from].rules.defaults {
		parentPath, name := "", p
		if i := strings.LastIndexByte(p, '.'); i >= 0 {
			parentPath, name = p[:i], p[i+1:]
		}
		var parent any = out
		if parentPath != "" {
			parent, _ = lookup(out, path(parentPath))
		}
		m, ok := parent.(map[string]any)
		if !ok {
			continue
		}
		if v, set := m[name]; !set || v == nil {
			m[name] = deepCopy(value)
		}
	}
	return out, nil
}
