package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	jsonpatch5 "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	taskv1 "example.com/task-operator/apis/v1"
)

// rawCreate is a CREATE at v1 of the JSON given, as the apiserver would send it (or as a
// hostile or buggy caller of the webhook's endpoint might).
func rawCreate(raw string, dryRun bool) admission.Request {
	gvk := metav1.GroupVersionKind{Group: taskv1.Group, Version: "v1", Kind: taskv1.Kind}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Kind: gvk, RequestKind: &gvk, Name: "t", DryRun: &dryRun,
		Object: runtime.RawExtension{Raw: []byte(raw)},
	}}
}

// patchedMeta applies the Mutator's answer and returns the resulting metadata (nil if denied).
func patchedMeta(t *testing.T, req admission.Request) (map[string]any, admission.Response) {
	t.Helper()
	var resp admission.Response
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Mutator panicked on %s: %v", req.Object.Raw, p)
			}
		}()
		resp = Mutator{}.Handle(context.Background(), req)
	}()
	if !resp.Allowed {
		return nil, resp
	}
	ops, _ := json.Marshal(resp.Patches)
	patch, err := jsonpatch5.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", ops, req.Object.Raw, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	return meta, resp
}

const attackSpec = `"spec":{"runner":{"type":"Shell","shell":{"script":"true"}}}`

func TestAttackWFinalizerListShapes(t *testing.T) {
	head := `{"apiVersion":"example.com/v1","kind":"Task",`
	for _, tt := range []struct {
		name, meta string
		want       []any // nil: denied or not checked
	}{
		{"null list", `"metadata":{"name":"t","namespace":"ns","finalizers":null}`, []any{taskv1.FinalizerJobs}},
		{"empty list", `"metadata":{"name":"t","namespace":"ns","finalizers":[]}`, []any{taskv1.FinalizerJobs}},
		{"duplicates of another kept", `"metadata":{"name":"t","namespace":"ns","finalizers":["a/b","a/b"]}`, []any{"a/b", "a/b", taskv1.FinalizerJobs}},
		{"ours twice left alone", `"metadata":{"name":"t","namespace":"ns","finalizers":["` + taskv1.FinalizerJobs + `","` + taskv1.FinalizerJobs + `"]}`, []any{taskv1.FinalizerJobs, taskv1.FinalizerJobs}},
		{"non-string elements", `"metadata":{"name":"t","namespace":"ns","finalizers":[1,{"x":1},null]}`, nil},
		{"a string, not a list", `"metadata":{"name":"t","namespace":"ns","finalizers":"a/b"}`, nil},
		{"an object, not a list", `"metadata":{"name":"t","namespace":"ns","finalizers":{"a":"b"}}`, nil},
		{"metadata a string", `"metadata":"x"`, nil},
		{"metadata null", `"metadata":null`, nil},
		{"no metadata", `"x":1`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			meta, resp := patchedMeta(t, rawCreate(head+tt.meta+","+attackSpec+"}", false))
			t.Logf("allowed=%v result=%v finalizers=%#v", resp.Allowed, resp.Result, meta["finalizers"])
			if _, isList := meta["finalizers"].([]any); isList && (tt.name == "a string, not a list" || tt.name == "an object, not a list") {
				t.Errorf("a malformed finalizers value was replaced by %#v, not left to be refused", meta["finalizers"])
			}
			if tt.want != nil {
				if got, _ := meta["finalizers"].([]any); !slices.Equal(got, tt.want) {
					t.Errorf("finalizers %#v, want %#v", meta["finalizers"], tt.want)
				}
			}
		})
	}
}

// TestAttackWDryRun: a dry-run create is answered like any other (sideEffects=None), no state.
func TestAttackWDryRun(t *testing.T) {
	meta, resp := patchedMeta(t, rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},`+attackSpec+`}`, true))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	if got, _ := meta["finalizers"].([]any); !slices.Equal(got, []any{taskv1.FinalizerJobs}) {
		t.Errorf("finalizers %#v", meta["finalizers"])
	}
}

// TestAttackWSpecShapes: what counts as "runs at once" for odd but possible specs.
func TestAttackWSpecShapes(t *testing.T) {
	for _, tt := range []struct{ name, spec string }{
		{"schedule null", `"spec":{"schedule":null,"runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"suspend null", `"spec":{"suspend":null,"runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"suspend string", `"spec":{"suspend":"true","runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"spec null", `"spec":null`},
		{"spec a string", `"spec":"x"`},
		{"queueName", `"spec":{"queueName":"q","runner":{"type":"Shell","shell":{"script":"true"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			meta, resp := patchedMeta(t, rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},`+tt.spec+`}`, false))
			t.Logf("allowed=%v result=%v finalizers=%#v", resp.Allowed, resp.Result, meta["finalizers"])
		})
	}
}
