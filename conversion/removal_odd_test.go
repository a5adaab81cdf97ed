package conversion

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOddManagedFieldsRemoveNothing: a write whose managedFields cannot be read (not a list, an
// unknown version or group, another fieldsType, fieldsV1 that is not a field set, many entries)
// is decided without a panic or an error and removes nothing: ownership unknown.
func TestOddManagedFieldsRemoveNothing(t *testing.T) {
	spec := map[string]any{
		"runner":      map[string]any{"type": "Shell", "shell": map[string]any{"script": "x"}},
		"timeout":     "9m",
		"parallelism": int64(2),
	}
	dan := entry("dan", "Apply", "v1", `{"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}},"f:timeout":{},"f:parallelism":{}}}`)
	odd := func(mutate func(e map[string]any)) map[string]any {
		e := deepCopy(dan).(map[string]any)
		mutate(e)
		return e
	}
	many := make([]any, 5000)
	for i := range many {
		many[i] = entry(fmt.Sprintf("m%d", i), "Update", "v1beta1", `{"f:spec":{"f:parallelism":{}}}`)
	}
	tests := []struct {
		name string
		// before and after are the managedFields of the stored object and of the written one.
		before, after any
	}{
		{"not a list", []any{dan}, "garbage"},
		{"an entry not an object", []any{dan}, []any{"x"}},
		{"stored not a list", "garbage", []any{}},
		{"unknown version", []any{odd(func(e map[string]any) { e["apiVersion"] = "example.com/v9" })}, []any{}},
		{"another group", []any{odd(func(e map[string]any) { e["apiVersion"] = "other.example/v1alpha1" })}, []any{}},
		{"no apiVersion", []any{odd(func(e map[string]any) { delete(e, "apiVersion") })}, []any{}},
		{"another fieldsType", []any{odd(func(e map[string]any) { e["fieldsType"] = "FieldsV2" })}, []any{}},
		{"fieldsV1 not a set", []any{odd(func(e map[string]any) { e["fieldsV1"] = map[string]any{"f:spec": "x"} })}, []any{}},
		{"fieldsV1 a bad key", []any{odd(func(e map[string]any) { e["fieldsV1"] = map[string]any{"zz:spec": map[string]any{}} })}, []any{}},
		{"fieldsV1 a string", []any{odd(func(e map[string]any) { e["fieldsV1"] = "f:spec" })}, []any{}},
		{"bad item key", []any{odd(func(e map[string]any) {
			e["fieldsV1"] = map[string]any{"f:spec": map[string]any{"f:runner": map[string]any{"f:shell": map[string]any{"f:env": map[string]any{`k:{"name":`: map[string]any{}}}}}}
		})}, []any{}},
		{"many entries", append([]any{dan}, many...), append([]any{dan}, many...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := taskWith(deepCopy(spec).(map[string]any))
			old["metadata"].(map[string]any)["managedFields"] = tt.before
			obj := taskWith(deepCopy(spec).(map[string]any))
			obj["metadata"].(map[string]any)["managedFields"] = tt.after
			var got map[string]any
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Decide panicked: %v", r)
					}
				}()
				got, err = Decide(Write{Version: "v1", FieldManager: "dan", OldObject: old, Object: obj})
			}()
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			for _, key := range []string{"timeout", "parallelism"} {
				if diff := cmp.Diff(spec[key], got["spec"].(map[string]any)[key]); diff != "" {
					t.Errorf("spec.%s (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}
