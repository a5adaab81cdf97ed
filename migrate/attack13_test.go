package migrate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAttack13DottedFieldNamesAreNotPaths: a field name that contains a dot is one key, not a
// path: "runner.type" under spec is no field of v1beta1 (a client can write any managedFields on
// an update), and must not be read as spec.runner.type, which would grant its manager ownership
// of a field it never set. The same for an object's "." member and for a name below a Same
// field's list item, which carries over as it is (the same key at v1).
func TestAttack13DottedFieldNamesAreNotPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    metav1.ManagedFieldsEntry
	}{
		{"leaf", entry("m", apply, beta, "", t0, `{"f:spec":{"f:runner.type":{}}}`)},
		{"v1alpha1 leaf", entry("m", update, alpha, "", t0, `{"f:status.state":{}}`)},
		{"object member", entry("m", update, beta, "", t0, `{"f:spec":{"f:runner.http":{".":{}}}}`)},
		{"same-shape prefix", entry("m", update, beta, "", t0, `{"f:spec":{"f:runner":{"f:http.headers":{"k:{\"name\":\"a\"}":{}}}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, moved, err := movedManagedFields([]metav1.ManagedFieldsEntry{tc.e})
			if err == nil || moved {
				t.Fatalf("moved %v, err %v; want an error:\n%s", moved, err, entriesText(out))
			}
			if !strings.Contains(err.Error(), "no counterpart") {
				t.Errorf("error %q", err)
			}
		})
	}
	// A dot in a key of metadata (labels, annotations) or below a list item is no field path
	// of the table: those carry over.
	ok := entry("m", apply, beta, "", t0, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/name":{}}},`+
		`"f:spec":{"f:runner":{"f:http":{"f:headers":{"k:{\"name\":\"x.y\"}":{".":{},"f:name":{}}}}}}}`)
	out, moved, err := movedManagedFields([]metav1.ManagedFieldsEntry{ok})
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{entry("m", apply, hub, "", t0, string(ok.FieldsV1.Raw))})
}
