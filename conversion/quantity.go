package conversion

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

// CheckQuantities refuses, naming the field, a quantity of a v1 Task (spec.resources) whose
// decimal exponent does not fit in 32 bits: the schema's pattern takes "1e3000000000", and
// resource.ParseQuantity, which every typed decoding of the Task runs, then spins for minutes
// and takes gigabytes. Nothing decodes a Task typed before this check has passed.
func CheckQuantities(obj map[string]any) field.ErrorList {
	if at, value := unparsableQuantity(bodyOf(obj)); at != "" {
		return field.ErrorList{field.Invalid(fieldPath(path(at)), value, quantityExponentMessage)}
	}
	return nil
}

const quantityExponentMessage = "the exponent of a quantity must be between -2147483648 and 2147483647"

// checkQuantities is CheckQuantities for the typed decodings of a body into typed. Only the
// hub has quantities.
func checkQuantities(b body, typed any) error {
	if _, hub := typed.(*taskv1.Task); !hub {
		return nil
	}
	if at, value := unparsableQuantity(b); at != "" {
		return fmt.Errorf("%s: Invalid value: %q: %s", at, value, quantityExponentMessage)
	}
	return nil
}

// unparsableQuantity is the path and value of the first quantity in a hub body whose exponent
// is out of range; "" when there is none. The hub's quantities are those of spec.resources'
// limits and requests; keys are matched as encoding/json matches them, without regard to case.
func unparsableQuantity(b body) (string, string) {
	for _, spec := range valuesFold(b, "spec") {
		for _, resources := range valuesFold(spec, "resources") {
			for _, list := range []string{"limits", "requests"} {
				for _, quantities := range valuesFold(resources, list) {
					m, _ := quantities.(map[string]any)
					for _, name := range slices.Sorted(maps.Keys(m)) {
						if s, ok := m[name].(string); ok && !exponentFits(s) {
							return "spec.resources." + list + "." + name, s
						}
					}
				}
			}
		}
	}
	return "", ""
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

// exponentFits says a quantity's decimal exponent ("1e3", "2E-5"), if it has one, fits in
// 32 bits. What is not a number after the e (the suffix Ei, a malformed "1e.5") is the
// quantity parser's to refuse, quickly.
func exponentFits(s string) bool {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	_, err := strconv.ParseInt(s[i+1:], 10, 32)
	return !errors.Is(err, strconv.ErrRange)
}
