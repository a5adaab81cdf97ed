package conversion

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

// CheckQuantities refuses, naming the field, a quantity of a v1 Task (spec.resources) out of
// taskv1.QuantityFits' bounds, which the schema's pattern does not keep: out of them
// resource.Quantity spins (taskv1.MaxQuantityLength), and it panics comparing 1e2147483647
// with 1e-9, in every typed decoding of the Task and in the Validator's request and limit
// checks. Nothing decodes a Task typed before this check has passed.
//
// One the stored Task (old; nil on a create) holds at the same place, the same value, passes,
// as the apiserver ratchets its own validation of unchanged fields: a Task stored before these
// bounds (or with the webhooks removed) must still take the writes that leave it alone, the
// operator's status and the finalizer taken off at its deletion among them. DropUnfitQuantities
// then takes it out of what the other checks decode.
func CheckQuantities(obj, old map[string]any) field.ErrorList {
	stored := map[string]any{}
	if old != nil {
		for _, q := range unfitQuantities(bodyOf(old)) {
			stored[q.at] = q.value
		}
	}
	for _, q := range unfitQuantities(bodyOf(obj)) {
		if value, ok := stored[q.at]; ok && value == q.value {
			continue
		}
		return field.ErrorList{field.Invalid(fieldPath(path(q.at)), fmt.Sprint(q.value), taskv1.QuantityBoundsMessage)}
	}
	return nil
}

// DropUnfitQuantities takes every quantity out of taskv1.QuantityFits' bounds out of obj (those
// CheckQuantities let through as stored), so that a typed decoding of what is left is immediate.
func DropUnfitQuantities(obj map[string]any) { dropUnfitQuantities(bodyOf(obj)) }

func dropUnfitQuantities(b body) {
	for _, q := range unfitQuantities(b) {
		delete(q.in, q.name)
	}
}

// checkQuantities is CheckQuantities for the typed decodings of a body into typed. Only the
// hub has quantities.
func checkQuantities(b body, typed any) error {
	if _, hub := typed.(*taskv1.Task); !hub {
		return nil
	}
	if unfit := unfitQuantities(b); len(unfit) > 0 {
		return fmt.Errorf("%s: Invalid value: %q: %s", unfit[0].at, fmt.Sprint(unfit[0].value), taskv1.QuantityBoundsMessage)
	}
	return nil
}

// An unfitQuantity is a quantity out of taskv1.QuantityFits' bounds: its path, its value (as
// JSON decodes it: comparable), and the list holding it under name.
type unfitQuantity struct {
	at    string
	value any
	in    map[string]any
	name  string
}

// unfitQuantities are the quantities of a hub body out of taskv1.QuantityFits' bounds, in the
// order of their paths. The hub's quantities are those of spec.resources' limits and requests;
// keys are matched as encoding/json matches them, without regard to case.
func unfitQuantities(b body) []unfitQuantity {
	var out []unfitQuantity
	for _, spec := range valuesFold(b, "spec") {
		for _, resources := range valuesFold(spec, "resources") {
			for _, list := range []string{"limits", "requests"} {
				for _, quantities := range valuesFold(resources, list) {
					m, _ := quantities.(map[string]any)
					for _, name := range slices.Sorted(maps.Keys(m)) {
						if value := m[name]; !taskv1.QuantityFits(value) {
							out = append(out, unfitQuantity{at: "spec.resources." + list + "." + name, value: value, in: m, name: name})
						}
					}
				}
			}
		}
	}
	return out
}

// valuesFold are the values of v's keys equal to key without regard to case (v an object).
func valuesFold(v any, key string) []any {
	m, _ := v.(map[string]any)
	var out []any
	for k, value := range m {
		if strings.EqualFold(k, key) {
			out = append(out, value)
		}
	}
	return out
}
