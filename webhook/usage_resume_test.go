package webhook

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"example.com/task-operator/versions"
)

// TestARestartedReplicaKeepsTheWritersItsKeyRecorded: a container restarted in its pod keeps
// its host name, so its record goes under the same key. The writers the earlier process
// recorded there stay in the record with their counts and times, and its start stays the
// record's, where the first write of the new process used to replace them all: a client that
// wrote at v1alpha1 a minute earlier dropped out of `versions status` and retire's check.
func TestARestartedReplicaKeepsTheWritersItsKeyRecorded(t *testing.T) {
	began := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := versions.UsageRecord{Replica: "pod-a", Since: began, Updated: began.Add(time.Minute), Entries: []versions.UsageEntry{
		{Version: "v1alpha1", User: "alice", Agent: "legacy-client", Count: 3, First: began, Last: began.Add(time.Minute)},
		{Version: "v1", User: "bob", Agent: "kubectl", Count: 1, First: began, Last: began},
	}}
	raw, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: versions.UsageConfigMap},
		Data:       map[string]string{"pod-a": string(raw), "pod-b": `{"replica":"pod-b"}`},
	}).Build()

	r := NewUsageRecorder(c, c, "ns", time.Minute)
	r.replica = "pod-a"
	now := began.Add(10 * time.Minute)
	r.now = func() time.Time { return now }
	r.since = now
	r.observe(usageRequest(t, "v1", "bob", `{"fieldManager":"kubectl"}`, nil, false))
	if err := r.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: versions.UsageConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	var got versions.UsageRecord
	if err := json.Unmarshal([]byte(cm.Data["pod-a"]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]versions.UsageEntry{
		"v1alpha1 alice": {Version: "v1alpha1", User: "alice", Agent: "legacy-client", Count: 3, First: began, Last: began.Add(time.Minute)},
		"v1 bob":         {Version: "v1", User: "bob", Agent: "kubectl", Count: 2, First: began, Last: now},
	}
	if len(got.Entries) != len(want) {
		t.Fatalf("record after the restart %+v, want the earlier entries and the new write", got.Entries)
	}
	for _, e := range got.Entries {
		if w := want[e.Version+" "+e.User]; e != w {
			t.Errorf("entry %+v, want %+v", e, w)
		}
	}
	if !got.Since.Equal(began) {
		t.Errorf("since %v, want the earlier process's %v", got.Since, began)
	}
	if cm.Data["pod-b"] != `{"replica":"pod-b"}` {
		t.Errorf("another replica's key changed: %q", cm.Data["pod-b"])
	}
}
