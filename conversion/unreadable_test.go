package conversion

import (
	"strings"
	"testing"
)

// TestAValueItsTypeCannotReadIsRefusedNamingTheField: a value a field's own decoder refuses (a
// time that does not parse) gives an error naming the field, as a value of the wrong JSON
// type does, at every version and inside lists too.
func TestAValueItsTypeCannotReadIsRefusedNamingTheField(t *testing.T) {
	const spec = `"spec":{"runner":{"type":"Shell","shell":{"script":"x"}}}`
	tests := []struct {
		version, doc, field string
	}{
		{"v1alpha1", `"spec":{"type":"shell","shell":"x"},"status":{"lastUpdateTime":"yesterday"}`, "status.lastUpdateTime"},
		{"v1beta1", spec + `,"status":{"startTime":"yesterday"}`, "status.startTime"},
		{"v1beta1", spec + `,"status":{"completionTime":"2026-13-45T00:00:00Z"}`, "status.completionTime"},
		{"v1beta1", spec + `,"status":{"conditions":[{"type":"A","status":"True","reason":"R","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"B","status":"True","reason":"R","message":"","lastTransitionTime":"soon"}]}`, "status.conditions[1].lastTransitionTime"},
		{"v1beta1", spec + `,"status":{"startTime":7}`, "status.startTime"},
		{"v1beta1", spec + `,"status":{"startTime":"bad-start","completionTime":"bad-completion"}`, `status.completionTime: parsing time "bad-completion"`},
		{"v1beta1", spec + `,"status":{"StartTime":"bad-start"}`, "status.StartTime"},
		{"v1", `"spec":{"runner":{"type":"Shell","shell":{"script":"x"}},"resources":{"limits":{"cpu":"1e.5"}}}`, "spec.resources.limits.cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.version+" "+tt.field, func(t *testing.T) {
			obj, err := decodeJSON([]byte(`{"apiVersion":"example.com/` + tt.version + `","kind":"Task","metadata":{"name":"t","namespace":"ns"},` + tt.doc + `}`))
			if err != nil {
				t.Fatal(err)
			}
			to := hubVersion
			if tt.version == hubVersion {
				to = "v1alpha1"
			}
			_, err = Convert(obj, to)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
}
