package versions

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A dependent may name the same owner twice, once at the old version (as its controller) and
// once at the storage version (added by a newer client). Moving the first to the storage
// version must leave one reference to that owner, still its controller, not two references
// to the same uid that differ only in their flags (which the apiserver keeps, with a
// duplicate-entries warning on every later write).
func TestRewrittenRefsLeaveOneReferencePerOwner(t *testing.T) {
	refs := []metav1.OwnerReference{
		{APIVersion: "example.com/v1alpha1", Kind: "Task", Name: "a", UID: "u1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		{APIVersion: "example.com/v1", Kind: "Task", Name: "a", UID: "u1"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "u2"},
	}
	got, changed := rewrittenRefs(refs, "example.com", "Task", "example.com/v1")
	if !changed {
		t.Fatal("nothing rewritten")
	}
	byUID := map[string]int{}
	for _, r := range got {
		byUID[string(r.UID)]++
	}
	if byUID["u1"] != 1 {
		t.Errorf("got %d references to owner u1, want 1: %+v", byUID["u1"], got)
	}
	for _, r := range got {
		if r.UID == "u1" && !ptr.Deref(r.Controller, false) {
			t.Errorf("the remaining reference to u1 lost controller: true: %+v", r)
		}
	}
}
