package conversion

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

// CheckQuantities refuses, naming the field, a quantity of a v1 Task (spec.resources) whose
// decimal exponent does not fit in 32 bits: the schema's pattern takes "1e3000000000", and
// resource.ParseQuantity, which every typed decoding of the Task runs, then spins for minutes
// and takes gigabytes. Nothing decodes a Task typed before this check has passed.
func CheckQuantities(obj map[string]any) field.ErrorList {
	if at, value := unparsableQuantity(bodyOf(obj), reflect.TypeFor[taskv1.Task]()); at != "" {
		return field.ErrorList{field.Invalid(fieldPath(path(at)), value, quantityExponentMessage)}
	}
	return nil
}

const quantityExponentMessage = "the exponent of a quantity must be between -2147483648 and 2147483647"

// checkQuantities is CheckQuantities for the typed decodings of a body into typed.
func checkQuantities(b body, typed any) error {
	if at, value := unparsableQuantity(b, reflect.TypeOf(typed)); at != "" {
		return fmt.Errorf("%s: Invalid value: %q: %s", at, value, quantityExponentMessage)
	}
	return nil
}

// unparsableQuantity is the path and value of the first quantity in b whose exponent is out
// of range; "" when there is none.
func unparsableQuantity(b body, t reflect.Type) (string, string) {
	quantity := reflect.TypeFor[resource.Quantity]()
	var at, value string
	walkTyped(map[string]any(b), t, "", func(v any, t reflect.Type, p string) bool {
		if at != "" {
			return true
		}
		if t != quantity {
			return false
		}
		if s, ok := v.(string); ok && !exponentFits(s) {
			at, value = p, s
		}
		return true
	})
	return at, value
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
