package conversion

import (
	"fmt"

	taskv1 "example.com/task-operator/apis/v1"
)

// metadataWithout returns a copy of obj's metadata without the preserved annotation: every
// version carries the rest of the metadata unchanged.
func metadataWithout(obj map[string]any) (map[string]any, error) {
	raw, ok := obj["metadata"]
	if !ok {
		return map[string]any{}, nil
	}
	meta, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: metadata is not an object", nameOf(obj))
	}
	meta = deepCopy(meta).(map[string]any)
	if annotations, ok := meta["annotations"].(map[string]any); ok {
		delete(annotations, PreservedAnnotation)
		if len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	return meta, nil
}

// preservedOf reads the preserved annotation of obj: nil when there is none, or when it has the
// layout of an older release.
func preservedOf(obj map[string]any) (*preserved, error) {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	value, ok := annotations[PreservedAnnotation]
	if !ok {
		return nil, nil
	}
	text, ok := value.(string)
	if !ok {
		return nil, fmt.Errorf("metadata.annotations[%s]: not a string", PreservedAnnotation)
	}
	p, current, err := decodePreserved(text)
	if err != nil || !current {
		return nil, err
	}
	return p, nil
}

func setAnnotation(meta map[string]any, key, value string) {
	annotations, ok := meta["annotations"].(map[string]any)
	if !ok {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[key] = value
}

// assemble builds a Task object of version from its metadata and body.
func assemble(version string, meta map[string]any, b body) map[string]any {
	obj := map[string]any{
		"apiVersion": taskv1.Group + "/" + version,
		"kind":       taskv1.Kind,
		"metadata":   meta,
	}
	for k, v := range b {
		obj[k] = v
	}
	return obj
}

// nameOf names obj for error messages: "Task <namespace>/<name>".
func nameOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if ns == "" {
		return fmt.Sprintf("%s %s", taskv1.Kind, name)
	}
	return fmt.Sprintf("%s %s/%s", taskv1.Kind, ns, name)
}
