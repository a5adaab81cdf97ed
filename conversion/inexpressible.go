package conversion

import (
	"fmt"
	"slices"
	"strings"

	taskv1 "example.com/task-operator/apis/v1"
)

// Inexpressible lists the fields of a Task's spec, as decoded JSON at v1, that version cannot
// express and the cluster would not give back: what a conversion to it carries in
// PreservedAnnotation rather than in its own fields, less what the cluster stores anyway when
// the converted Task is written at that version (a default, such as the history limits of a
// Task with a schedule, whether the Task spelled it out or not). An offline conversion (kubectl
// task convert) refuses them, naming each, since the admission webhook removes that annotation
// from what a client writes. The paths are dotted (spec.runner.shell.env), sorted; none for v1
// itself.
func Inexpressible(hub map[string]any, version string) ([]string, error) {
	if version == hubVersion {
		return nil, nil
	}
	s, ok := spokes[version]
	if !ok {
		return nil, fmt.Errorf("cannot convert to %s: the served versions are %v", version, ServedVersions())
	}
	if from, err := versionOf(hub); err != nil {
		return nil, err
	} else if from != hubVersion {
		return nil, fmt.Errorf("%s: Inexpressible reads a v1 object, not %s", nameOf(hub), from)
	}
	// What the cluster stores: hub with its defaults, and the spoke's object as the cluster
	// stores it when a client writes it, with its defaults. A field the target version does not
	// say but whose value the cluster gives back anyway (a schedule's history limits, defaulted
	// for having a schedule) is not lost.
	hub, err := WithDefaults(hub)
	if err != nil {
		return nil, err
	}
	_, pure, err := s.toSpoke(hub, nil, bodyDecoded)
	if err != nil {
		return nil, err
	}
	stored, err := defaultedBody(pure, taskv1.SetDefaults)
	if err != nil {
		return nil, err
	}
	patch := diff(stored, bodyOf(hub))
	var paths []string
	var walk func(m map[string]any, at path)
	walk = func(m map[string]any, at path) {
		for k, v := range m {
			p := join(at, k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(sub, p)
				continue
			}
			paths = append(paths, string(p))
		}
	}
	if spec, ok := patch["spec"].(map[string]any); ok {
		walk(spec, "spec")
	}
	slices.SortFunc(paths, strings.Compare)
	return paths, nil
}

// WithDefaults returns a copy of a v1 Task, as decoded JSON, with the v1 defaults of the spec
// fields it lacks, as the apiserver would store it; every field it has keeps its spelling, and
// the status is left as it is (the apiserver takes none from a create or apply: a status saved
// from a newer release may hold fields this one does not know). Inexpressible needs it for a
// manifest written at v1, which carries no defaults: a default the old version does not express
// is no reason to refuse.
func WithDefaults(hub map[string]any) (map[string]any, error) {
	obj, _ := deepCopy(hub).(map[string]any)
	spec, ok := obj["spec"]
	if !ok {
		return obj, nil
	}
	b, err := withDefaults(body{"spec": spec})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(hub), err)
	}
	obj["spec"] = b["spec"]
	return obj, nil
}

// OnlyWritten keeps the paths (as Inexpressible returns them, at v1) that manifest, a Task at
// any served version as written, sets: a default it lacks (a schedule's history limits and
// concurrencyPolicy) is lost only with what it was defaulted for, which is named, and is nothing
// the writer could remove. An old version's fields are read at v1 through its field table. All
// of the paths when none is written.
func OnlyWritten(paths []string, manifest map[string]any) []string {
	written := writtenHubPaths(manifest)
	var named []string
	for _, p := range paths {
		if slices.ContainsFunc(written, func(w string) bool { return w == p || strings.HasPrefix(p, w+".") }) {
			named = append(named, p)
		}
	}
	if len(named) == 0 {
		return paths
	}
	return named
}

// writtenHubPaths are the v1 paths of every field manifest's spec sets (its leaves; a list is a
// leaf), at v1 through the field table of manifest's version.
func writtenHubPaths(manifest map[string]any) []string {
	version, err := versionOf(manifest)
	if err != nil {
		return nil
	}
	fields, old := FieldMaps(version)
	var out []string
	var walk func(v any, keys []string)
	walk = func(v any, keys []string) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, sub := range m {
				walk(sub, append(slices.Clone(keys), k))
			}
			return
		}
		if !old {
			out = append(out, strings.Join(keys, "."))
			return
		}
		hub, ok := fields.Map(keys)
		if !ok {
			return
		}
		for _, h := range hub {
			out = append(out, strings.Join(h, "."))
		}
	}
	walk(manifest["spec"], []string{"spec"})
	return out
}
