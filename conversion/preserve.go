package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	taskv1 "example.com/task-operator/apis/v1"
)

// PreservedAnnotation holds, on a spoke object, what the hub object had that the spoke cannot
// express. Its value is a JSON merge patch (RFC 7386) over the hub's spec and status that turns
// the spoke's plain up-conversion back into the original hub. Because it holds only the
// difference, a large script or body that the spoke does express is never copied into it.
// It exists only on spoke objects: up-conversion consumes it, so it never reaches etcd.
const PreservedAnnotation = "task.example.com/preserved-v1-fields"

// hubBody is the part of the hub that the preserved patch applies to. Metadata is copied
// verbatim between versions and needs no preservation.
type hubBody struct {
	Spec   taskv1.TaskSpec   `json:"spec"`
	Status taskv1.TaskStatus `json:"status"`
}

// convertDown maps hub to spoke with down, then records on the spoke what up, the spoke's plain
// up-conversion, would not bring back.
func convertDown[S client.Object](hub *taskv1.Task, spoke S, down func(*taskv1.Task, S), up func(S, *taskv1.Task)) error {
	down(hub, spoke)
	var plain taskv1.Task
	up(spoke, &plain)
	annotations, err := preserve(hub, &plain, spoke.GetAnnotations())
	spoke.SetAnnotations(annotations)
	return err
}

// preserve records on spokeAnnotations what hub holds beyond plain, the up-conversion of
// the spoke without any preserved fields. It leaves the annotations alone when nothing is lost.
func preserve(hub, plain *taskv1.Task, spokeAnnotations map[string]string) (map[string]string, error) {
	if equality.Semantic.DeepEqual(hub.Spec, plain.Spec) && equality.Semantic.DeepEqual(hub.Status, plain.Status) {
		return spokeAnnotations, nil
	}
	from, err := toMap(plain)
	if err != nil {
		return nil, err
	}
	to, err := toMap(hub)
	if err != nil {
		return nil, err
	}
	patch := mergeDiff(from, to)
	if len(patch) == 0 {
		return spokeAnnotations, nil
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encode preserved fields: %w", err)
	}
	if spokeAnnotations == nil {
		spokeAnnotations = map[string]string{}
	}
	spokeAnnotations[PreservedAnnotation] = string(raw)
	return spokeAnnotations, nil
}

// restore applies the preserved patch, if the spoke carried one, onto hub and removes the
// annotation from the hub's metadata.
func restore(hub *taskv1.Task) error {
	raw, ok := hub.Annotations[PreservedAnnotation]
	if !ok {
		return nil
	}
	delete(hub.Annotations, PreservedAnnotation)
	if len(hub.Annotations) == 0 {
		hub.Annotations = nil
	}
	var patch map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(raw), &patch); err != nil {
		return fmt.Errorf("metadata.annotations[%s]: not a JSON object: %w", PreservedAnnotation, err)
	}
	doc, err := toMap(hub)
	if err != nil {
		return err
	}
	mergeApply(doc, patch)
	var body hubBody
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc, &body); err != nil {
		return fmt.Errorf("metadata.annotations[%s]: does not fit the v1 Task: %w", PreservedAnnotation, err)
	}
	hub.Spec, hub.Status = body.Spec, body.Status
	return nil
}

func toMap(t *taskv1.Task) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&hubBody{Spec: t.Spec, Status: t.Status})
	if err != nil {
		return nil, fmt.Errorf("encode task %s/%s: %w", t.Namespace, t.Name, err)
	}
	return m, nil
}

// mergeDiff returns the JSON merge patch that turns from into to. Objects are diffed key by
// key; every other value (lists included, as RFC 7386 prescribes) is replaced whole.
func mergeDiff(from, to map[string]any) map[string]any {
	patch := map[string]any{}
	for key, want := range to {
		have, ok := from[key]
		if !ok {
			patch[key] = want
			continue
		}
		haveObj, haveIsObj := have.(map[string]any)
		wantObj, wantIsObj := want.(map[string]any)
		if haveIsObj && wantIsObj {
			if sub := mergeDiff(haveObj, wantObj); len(sub) > 0 {
				patch[key] = sub
			}
			continue
		}
		if !reflect.DeepEqual(have, want) {
			patch[key] = want
		}
	}
	for key := range from {
		if _, ok := to[key]; !ok {
			patch[key] = nil
		}
	}
	return patch
}

// mergeApply applies a JSON merge patch to doc in place.
func mergeApply(doc, patch map[string]any) {
	for key, value := range patch {
		if value == nil {
			delete(doc, key)
			continue
		}
		sub, isObj := value.(map[string]any)
		if !isObj {
			doc[key] = value
			continue
		}
		target, ok := doc[key].(map[string]any)
		if !ok {
			target = map[string]any{}
			doc[key] = target
		}
		mergeApply(target, sub)
	}
}
