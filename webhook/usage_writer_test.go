package webhook

import (
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// managedEntry is an Update entry at example.com/v1 owning fields (FieldsV1 JSON).
func managedEntry(manager, subresource string, at time.Time, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1",
		Time: &metav1.Time{Time: at}, Subresource: subresource, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
	}
}

// writeRequest is an admission request of a write at v1 by the operator's ServiceAccount,
// without a fieldManager in its options, from old to new managedFields.
func writeRequest(t *testing.T, op admissionv1.Operation, subresource string, old, new []metav1.ManagedFieldsEntry) admission.Request {
	t.Helper()
	raw := func(managed []metav1.ManagedFieldsEntry) []byte {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": managed}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind:        metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Task"},
		RequestKind: &metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Task"},
		Operation:   op,
		SubResource: subresource,
		UserInfo:    authenticationv1.UserInfo{Username: "system:serviceaccount:task-operator-system:task-operator-controller-manager"},
		Object:      runtime.RawExtension{Raw: raw(new)},
		Options:     runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}`)},
	}}
	if op != admissionv1.Create {
		req.OldObject = runtime.RawExtension{Raw: raw(old)}
	}
	return req
}

// The write's field manager is the one whose managedFields entry this write changed (added,
// re-timed, or given fields it did not own), not the entry that happens to be newest: a write
// that only removes another manager's field, or one in the same second as another manager's,
// leaves someone else's entry newest. When no entry tells, the agent is unknown ("").
func TestAgentIsTheManagerWhoseEntryTheWriteChanged(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	const (
		spec       = `{"f:spec":{"f:schedule":{}}}`
		annotation = `{"f:metadata":{"f:annotations":{"f:task.example.com/run-requested":{}}}}`
		suspend    = `{"f:spec":{"f:suspend":{}}}`
		annSuspend = `{"f:metadata":{"f:annotations":{"f:task.example.com/run-requested":{}}},"f:spec":{"f:suspend":{}}}`
		finalizer  = `{"f:metadata":{"f:finalizers":{"v:\"task.example.com/jobs\"":{}}}}`
		phase      = `{"f:status":{"f:phase":{}}}`
		phaseError = `{"f:status":{"f:lastError":{},"f:phase":{}}}`
	)
	applier := managedEntry("kubectl-client-side-apply", "", t0, spec)
	plugin := managedEntry("kubectl-task", "", t1, annSuspend)
	operator := managedEntry("task-operator", "", t0, finalizer)
	operatorStatus := managedEntry("task-operator", "status", t0, phase)
	tests := []struct {
		name        string
		op          admissionv1.Operation
		subresource string
		old, new    []metav1.ManagedFieldsEntry
		want        string
	}{{
		name: "a write that only removes another manager's field is not that manager's",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, plugin, operator},
		new:  []metav1.ManagedFieldsEntry{applier, managedEntry("kubectl-task", "", t1, suspend), operator},
		want: "",
	}, {
		name: "a write that removes all of another manager's fields is not that manager's",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, managedEntry("kubectl-task", "", t1, annotation), operator},
		new:  []metav1.ManagedFieldsEntry{applier, operator},
		want: "",
	}, {
		name: "the entry the write re-timed, though another one is as new",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, operator, plugin},
		new:  []metav1.ManagedFieldsEntry{applier, managedEntry("task-operator", "", t1, finalizer), plugin},
		want: "task-operator",
	}, {
		name: "the entry that gained fields within the same second",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, plugin, managedEntry("task-operator", "", t1, finalizer)},
		new: []metav1.ManagedFieldsEntry{applier, plugin,
			managedEntry("task-operator", "", t1, `{"f:metadata":{"f:finalizers":{"v:\"task.example.com/jobs\"":{},"v:\"task.example.com/other\"":{}}}}`)},
		want: "task-operator",
	}, {
		name:        "a status write is the status entry's writer, not the newest main-resource entry",
		op:          admissionv1.Update,
		subresource: "status",
		old:         []metav1.ManagedFieldsEntry{applier, plugin, operator, operatorStatus},
		new:         []metav1.ManagedFieldsEntry{applier, plugin, operator, managedEntry("task-operator", "status", t0, phaseError)},
		want:        "task-operator",
	}, {
		name: "a manager's first entry",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, operator},
		new:  []metav1.ManagedFieldsEntry{applier, operator, managedEntry("kubectl-edit", "", t0, annotation)},
		want: "kubectl-edit",
	}, {
		name: "a write that changed no entry (the same fields in the same second) is unknown",
		op:   admissionv1.Update,
		old:  []metav1.ManagedFieldsEntry{applier, plugin, operator},
		new:  []metav1.ManagedFieldsEntry{applier, plugin, operator},
		want: "",
	}, {
		name: "the creator",
		op:   admissionv1.Create,
		new:  []metav1.ManagedFieldsEntry{managedEntry("kubectl-client-side-apply", "", t2, spec)},
		want: "kubectl-client-side-apply",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentOf(writeRequest(t, tt.op, tt.subresource, tt.old, tt.new), "v1"); got != tt.want {
				t.Errorf("agent = %q, want %q", got, tt.want)
			}
		})
	}
}
