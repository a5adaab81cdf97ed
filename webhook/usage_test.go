package webhook

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"example.com/task-operator/versions"
)

func usageRequest(t *testing.T, version, user, options string, managed []metav1.ManagedFieldsEntry, dryRun bool) admission.Request {
	t.Helper()
	obj, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": managed}})
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind:        metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Task"},
		RequestKind: &metav1.GroupVersionKind{Group: "example.com", Version: version, Kind: "Task"},
		Operation:   admissionv1.Update,
		UserInfo:    authenticationv1.UserInfo{Username: user},
		Object:      runtime.RawExtension{Raw: obj},
		Options:     runtime.RawExtension{Raw: []byte(options)},
		DryRun:      ptr.To(dryRun),
	}}
}

// The request's fieldManager names the agent; without it and without the object before the
// write, the newest managedFields entry is no evidence of who wrote (see
// TestAgentIsTheManagerWhoseEntryTheWriteChanged), and the agent is unknown.
func TestAgentIsTheRequestsFieldManagerAndNeverTheNewestEntry(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "old-kubectl", APIVersion: "example.com/v1alpha1", Time: &t0},
		{Manager: "kubectl-edit", APIVersion: "example.com/v1alpha1", Time: &t1},
		{Manager: "task-operator", APIVersion: "example.com/v1", Time: &t1, Subresource: "status"},
	}
	tests := []struct {
		name, options string
		managed       []metav1.ManagedFieldsEntry
		want          string
	}{
		{name: "the field manager of the request", options: `{"fieldManager":"legacy-applier"}`, managed: managed, want: "legacy-applier"},
		{name: "not the newest entry at the version written", options: `{}`, managed: managed, want: ""},
		{name: "nothing to tell", options: ``, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentOf(usageRequest(t, "v1alpha1", "alice", tt.options, tt.managed, false), "v1alpha1"); got != tt.want {
				t.Errorf("agent = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUsageRecordIsBoundedAndSkipsDryRuns(t *testing.T) {
	r := NewUsageRecorder(nil, nil, "ns", time.Minute)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	r.observe(usageRequest(t, "v1alpha1", "dry", `{}`, nil, true))
	for i := range versions.MaxUsageEntries + 5 {
		now = now.Add(time.Second)
		r.observe(usageRequest(t, "v1alpha1", fmt.Sprintf("user-%d", i), `{"fieldManager":"m"}`, nil, false))
	}
	now = now.Add(time.Second)
	r.observe(usageRequest(t, "v1alpha1", "user-68", `{"fieldManager":"m"}`, nil, false))
	rec, dirty := r.snapshot()
	if !dirty || len(rec.Entries) != versions.MaxUsageEntries || rec.Evicted != 5 {
		t.Fatalf("dirty %t, %d entries, %d evicted; want %d entries, 5 evicted", dirty, len(rec.Entries), rec.Evicted, versions.MaxUsageEntries)
	}
	for _, e := range rec.Entries {
		if e.User == "dry" || e.User == "user-0" {
			t.Errorf("entry %v should not be in the record", e)
		}
	}
	if first := rec.Entries[0]; first.User != "user-68" || first.Count != 2 {
		t.Errorf("first entry %v, want the most recent", first)
	}
	if _, dirty := r.snapshot(); dirty {
		t.Error("a second snapshot without writes is dirty")
	}
}

// The record exists to name who still writes at an old version; writes at the storage version
// (every controller's, every up-to-date client's) must not push such a writer out of it, or
// retire's writers check passes a client that wrote at v1alpha1 a minute ago.
func TestUsageRecordKeepsAnOldVersionWriterWhenStorageVersionWritersFillIt(t *testing.T) {
	r := NewUsageRecorder(nil, nil, "ns", time.Minute)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	r.observe(usageRequest(t, "v1alpha1", "legacy", `{"fieldManager":"old-tool"}`, nil, false))
	for i := range versions.MaxUsageEntries {
		now = now.Add(time.Second)
		r.observe(usageRequest(t, "v1", fmt.Sprintf("system:serviceaccount:team-%d:ci", i), `{"fieldManager":"ci"}`, nil, false))
	}
	rec, _ := r.snapshot()
	for _, e := range rec.Entries {
		if e.Version == "v1alpha1" && e.User == "legacy" {
			return
		}
	}
	t.Errorf("the v1alpha1 writer legacy was evicted by %d writers at v1 (evicted %d)", versions.MaxUsageEntries, rec.Evicted)
}
