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

// CheckQuantities refuses, naming the field, a quantity of a v1 Task (spec.resources) longer
// than maxQuantityLength or with a decimal exponent beyond ±maxQuantityExponent. The schema's
// pattern takes any, and resource.Quantity spins for minutes and takes gigabytes on some
// ("1e3000000000", "1e-100000000" to parse; "1e2000000000" to compare with 1; it panics
// comparing 1e2147483647 with 1e-9), in every typed decoding of the Task and in the
// Validator's request and limit checks. Within these bounds every operation is immediate.
// Nothing decodes a Task typed before this check has passed.
func CheckQuantities(obj map[string]any) field.ErrorList {
	if at, value := unparsableQuantity(bodyOf(obj)); at != "" {
		return field.ErrorList{field.Invalid(fieldPath(path(at)), value, quantityBoundsMessage)}
	}
	return nil
}

const (
	maxQuantityLength   = 64
	maxQuantityExponent = 64
)

var quantityBoundsMessage = fmt.Sprintf("a quantity must be at most %d characters long, with an exponent between -%d and %d",
	maxQuantityLength, maxQuantityExponent, maxQuantityExponent)

// checkQuantities is CheckQuantities for the typed decodings of a body into typed. Only the
// hub has quantities.
func checkQuantities(b body, typed any) error {
	if _, hub := typed.(*taskv1.Task); !hub {
		return nil
	}
	if at, value := unparsableQuantity(b); at != "" {
		return fmt.Errorf("%s: Invalid value: %q: %s", at, value, quantityBoundsMessage)
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
						if value := m[name]; !quantityFits(value) {
							return "spec.resources." + list + "." + name, fmt.Sprint(value)
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

// quantityFits says a quantity (a string, or a number as JSON decodes it) is within the bounds
// CheckQuantities keeps: its length, and its decimal exponent ("1e3", "2E-5") if it has one.
// What is not a number after the e (the suffix Ei, a malformed "1e.5") is the quantity
// parser's to refuse, quickly.
func quantityFits(v any) bool {
	var s string
	switch v := v.(type) {
	case string:
		if len(v) > maxQuantityLength {
			return false
		}
		s = strings.TrimSpace(v) // as Quantity's UnmarshalJSON reads it
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return true // an integer, or no quantity at all: the decoder's to judge
	}
	if len(s) > maxQuantityLength {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.ParseInt(s[i+1:], 10, 64)
	return err != nil && !errors.Is(err, strconv.ErrRange) || err == nil && exp >= -maxQuantityExponent && exp <= maxQuantityExponent
}
