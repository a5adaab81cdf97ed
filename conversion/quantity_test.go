package conversion

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// TestAnOversizedQuantityIsRefusedBeforeAnyTypedDecoding: the schema's pattern takes any
// exponent and length, and resource.Quantity spins for minutes on some to parse or compare;
// every way a Task is decoded refuses a quantity past the bounds first, naming the field,
// however the request spells it. Quantities that merely look alike (the suffix Ei) and those
// at the bounds convert.
func TestAnOversizedQuantityIsRefusedBeforeAnyTypedDecoding(t *testing.T) {
	task := func(cpu string) string {
		return `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"q","namespace":"ns"},"spec":{"runner":{"type":"Shell","shell":{"script":"x"}},"resources":{"limits":{"cpu":"` + cpu + `"}}}}`
	}
	tests := []struct {
		name, cpu string
		refused   bool
	}{
		{"an exponent past 32 bits", "1e3000000000", true},
		{"a negative one", "1e-3000000000", true},
		{"a negative one within 32 bits, which the parser spins on", "1e-100000000", true},
		{"a positive one within 32 bits, which a comparison spins on", "1e2000000000", true},
		{"just past the bound", "1e65", true},
		{"spelled with escapes", `1\u00653000000000`, true},
		{"with a space after it, which the parser trims", "1e-100000000 ", true},
		{"just past the bound, with a space after it", "1e65 ", true},
		{"with a no-break space after it", "1e-100000000\u00a0", true},
		{"longer than 64 characters", "0." + strings.Repeat("0", 63) + "1", true},
		{"the suffix Ei", "1Ei", false},
		{"the suffix E", "2E", false},
		{"at the bound", "1e64", false},
		{"at the negative bound", "1e-64", false},
		{"millis", "500m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(task(tt.cpu))
			obj, err := decodeJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			if errs := CheckQuantities(obj, nil); (len(errs) > 0) != tt.refused || (tt.refused && !strings.Contains(errs.ToAggregate().Error(), "spec.resources.limits.cpu")) {
				t.Errorf("CheckQuantities: %v, want refused %v naming spec.resources.limits.cpu", errs, tt.refused)
			}
			for way, convert := range map[string]func() error{
				"Convert": func() error { _, err := Convert(obj, "v1alpha1"); return err },
				"as sent": func() error {
					d, err := DecodeForConvert(raw)
					if err != nil {
						return err
					}
					_, err = d.Convert("v1beta1")
					return err
				},
			} {
				done := make(chan error, 1)
				go func() { done <- convert() }()
				select {
				case err := <-done:
					if got := err != nil && strings.Contains(err.Error(), "spec.resources.limits.cpu"); got != tt.refused {
						t.Errorf("%s: %v, want refused %v naming the field", way, err, tt.refused)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s: still decoding after a minute", way)
				}
			}
		})
	}
}

// TestQuantitiesAreWhereTheGuardLooks: the guard looks only at spec.resources' limits and
// requests of the hub; a quantity added anywhere else to any version's types must be added to
// it (unfitQuantities) before this test passes again.
func TestQuantitiesAreWhereTheGuardLooks(t *testing.T) {
	quantity := reflect.TypeFor[resource.Quantity]()
	var found []string
	var walk func(t reflect.Type, at string, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, at string, seen map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == quantity {
			found = append(found, at)
			return
		}
		switch t.Kind() {
		case reflect.Map, reflect.Slice:
			walk(t.Elem(), at+"[*]", seen)
		case reflect.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			defer delete(seen, t)
			for f := range jsonFields(t) {
				walk(jsonFields(t)[f], joinPath(at, f), seen)
			}
		}
	}
	for _, typed := range []any{taskv1.Task{}, v1beta1.Task{}, v1alpha1.Task{}} {
		walk(reflect.TypeOf(typed), reflect.TypeOf(typed).PkgPath(), map[reflect.Type]bool{})
	}
	slices.Sort(found)
	want := []string{"example.com/task-operator/apis/v1.spec.resources.limits[*]", "example.com/task-operator/apis/v1.spec.resources.requests[*]"}
	if !slices.Equal(found, want) {
		t.Errorf("quantities at %v, want only %v", found, want)
	}
}

// TestAQuantityWrittenAsAJSONNumberIsHeldToTheSameBounds: the schema takes a quantity as a
// number too ("cpu": 1e300), which the quantity's decoder reads from its JSON text.
func TestAQuantityWrittenAsAJSONNumberIsHeldToTheSameBounds(t *testing.T) {
	for _, tt := range []struct {
		number  string
		refused bool
	}{{"1e300", true}, {"1e-300", true}, {"2", false}, {"0.5", false}, {"1e20", false}} {
		obj, err := decodeJSON([]byte(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"q"},"spec":{"resources":{"requests":{"memory":` + tt.number + `}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if errs := CheckQuantities(obj, nil); (len(errs) > 0) != tt.refused {
			t.Errorf("%s: %v, want refused %v", tt.number, errs, tt.refused)
		}
	}
}
