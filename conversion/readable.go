package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

// CheckReadable refuses a v1 Task that could not be read at an old version: the apiserver
// limits an object's annotations to 256 KiB in all, the preserved annotation included, and
// refuses a conversion whose result exceeds it, which would break every old-version read and
// LIST of the Task's namespace. The error names the field that takes the most room. It is
// checked on every write (the validating webhook), so a stored Task always stays readable.
func CheckReadable(obj map[string]any) field.ErrorList {
	others := annotationsSize(obj)
	var errs field.ErrorList
	for _, version := range []string{v1alpha1Spoke.version, v1beta1Spoke.version} {
		s := spokes[version]
		_, p, err := s.read(obj, nil)
		if err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
		}
		if len(p.Patch) == 0 {
			continue
		}
		value, err := p.encode()
		if err != nil {
			return field.ErrorList{field.InternalError(field.NewPath("metadata", "annotations"), err)}
		}
		total := others + int64(len(PreservedAnnotation)+len(value))
		if total <= int64(apivalidation.TotalAnnotationSizeLimitB) {
			continue
		}
		errs = append(errs, tooLargeFor(version, p.Patch, others, int64(len(value)), total))
	}
	return errs
}

// tooLargeFor explains which field to shorten so that the Task can be read at version.
func tooLargeFor(version string, patch body, others, preservedSize, total int64) *field.Error {
	const kib = 1 << 10
	limit := int64(apivalidation.TotalAnnotationSizeLimitB)
	if others >= preservedSize {
		return field.TooLong(field.NewPath("metadata", "annotations"), "",
			int(limit-preservedSize-int64(len(PreservedAnnotation))))
	}
	largest, size := largestLeaf(patch)
	return field.Invalid(fieldPath(largest), fmt.Sprintf("<%d KiB>", size/kib), fmt.Sprintf(
		"this Task could not be read at %s: the v1 fields %s cannot express take %d KiB of its annotations, "+
			"which with the other annotations (%d KiB) exceeds the apiserver's limit of %d KiB; this field is the largest of them: shorten it",
		version, version, preservedSize/kib, others/kib, limit/kib))
}

// annotationsSize is the size of obj's annotations as the apiserver counts it, without the
// preserved annotation.
func annotationsSize(obj map[string]any) int64 {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	var n int64
	for k, v := range annotations {
		if k == PreservedAnnotation {
			continue
		}
		s, _ := v.(string)
		n += int64(len(k) + len(s))
	}
	return n
}

// largestLeaf returns the path of the largest value in a merge patch and its encoded size.
func largestLeaf(patch map[string]any) (path, int64) {
	type sized struct {
		at   path
		size int64
	}
	var leaves []sized
	var walk func(m map[string]any, at path)
	walk = func(m map[string]any, at path) {
		for k, v := range m {
			p := join(at, k)
			if sub, ok := v.(map[string]any); ok {
				walk(sub, p)
				continue
			}
			raw, _ := json.Marshal(v)
			leaves = append(leaves, sized{p, int64(len(raw))})
		}
	}
	walk(patch, "")
	sort.Slice(leaves, func(i, j int) bool { return leaves[i].size > leaves[j].size })
	if len(leaves) == 0 {
		return "spec", 0
	}
	return leaves[0].at, leaves[0].size
}

func fieldPath(p path) *field.Path {
	keys := p.keys()
	return field.NewPath(keys[0], keys[1:]...)
}

// CheckTimes refuses, naming the field, a time of a v1 Task that Go writes as one it reads back
// as unset (the zero instant 0001-01-01T00:00:00Z, or within its first second): a Go client,
// the operator included, would drop it, and v1beta1 shows a condition's lastTransitionTime,
// which it requires, as null, so that every status write there would fail. A time the stored
// Task (oldRaw, nil on create) holds at the same place is let through, so that a Task stored
// with one stays writable. raw is obj as sent: most writes are told apart by it at once.
func CheckTimes(raw []byte, obj map[string]any, oldRaw []byte) field.ErrorList {
	if !mayHoldAnUnsetTime(raw) {
		return nil
	}
	found := unsetReadingTimes(obj)
	if len(found) == 0 {
		return nil // the stored Task is decoded only when there is something to compare
	}
	had := map[string]time.Time{}
	if len(oldRaw) > 0 {
		old, err := DecodeObject(oldRaw)
		if err != nil {
			return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("decode the stored Task: %w", err))}
		}
		for _, t := range unsetReadingTimes(old) {
			had[t.key] = t.at
		}
	}
	var errs field.ErrorList
	for at, t := range found {
		if stored, ok := had[t.key]; !ok || !stored.Equal(t.at) {
			errs = append(errs, field.Invalid(field.NewPath(at), t.value,
				"a time in the first second of year 1 reads as unset in Go clients and at v1alpha1 and v1beta1: write a later time, or leave the field out"))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// An unsetTime is a time that reads as unset: its value, and the key it is compared with the
// stored Task's by: its path, a condition's index replaced by its type (conditions are a list
// keyed by type, which a write may reorder).
type unsetTime struct {
	key, value string
	at         time.Time
}

// unsetReadingTimes are obj's times that read as unset (readsAsUnset), by path.
func unsetReadingTimes(obj map[string]any) map[string]unsetTime {
	if obj == nil {
		return nil
	}
	timeType := reflect.TypeFor[metav1.Time]()
	found := map[string]unsetTime{}
	walkTyped(map[string]any(bodyOf(obj)), reflect.TypeFor[taskv1.Task](), "", func(v any, t reflect.Type, at string) bool {
		if t != timeType {
			return false
		}
		if s, ok := v.(string); ok {
			if parsed, err := time.Parse(time.RFC3339, s); err == nil && readsAsUnset(parsed) {
				found[at] = unsetTime{key: keyedByType(obj, at), value: s, at: parsed}
			}
		}
		return true
	})
	return found
}

// keyedByType is at with the index of a status condition replaced by the condition's type.
func keyedByType(obj map[string]any, at string) string {
	const prefix = "status.conditions["
	rest, ok := strings.CutPrefix(at, prefix)
	if !ok {
		return at
	}
	index, tail, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(index)
	status, _ := obj["status"].(map[string]any)
	conditions, _ := status["conditions"].([]any)
	if !ok || err != nil || i >= len(conditions) {
		return at
	}
	condition, _ := conditions[i].(map[string]any)
	conditionType, _ := condition["type"].(string)
	return prefix + "type=" + conditionType + "]" + tail
}

// mayHoldAnUnsetTime says raw may hold a time that reads as unset: one in the first second of
// year 1 is spelled with a date of 0001-01-01 or, in a zone west of UTC, 0000-12-31; a \u
// escape could spell either.
func mayHoldAnUnsetTime(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"0001-01-01T`)) || bytes.Contains(raw, []byte(`"0000-12-31T`)) ||
		bytes.Contains(raw, []byte(`\u`))
}
