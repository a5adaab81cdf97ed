package lossless_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// storedSince returns what etcd held of a Task at each revision after since: generation, spec
// and status.
func storedSince(t *testing.T, ns, name string, since int64) []obj {
	t.Helper()
	history, err := cluster.EtcdHistory(t.Context(), testenv.TaskEtcdPrefix+ns+"/"+name, since)
	if err != nil {
		t.Fatal(err)
	}
	var out []obj
	for _, h := range history {
		var o obj
		if err := json.Unmarshal(h.Value, &o); err != nil {
			t.Fatalf("revision %d is not JSON: %v", h.ModRevision, err)
		}
		out = append(out, obj{"revision": h.ModRevision, "generation": field(o, "metadata.generation"), "spec": o["spec"], "status": o["status"]})
	}
	return out
}

func etcdRevision(t *testing.T) int64 {
	t.Helper()
	rev, err := cluster.EtcdRevision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// TestMainResourceNeverChangesStoredStatus: a replace at v1alpha1 whose body carries a status
// and a preserved annotation crafted to match it (its fingerprints those of the body, its owner
// of status.lastJob.name a wrong value) stores, at every revision, the status it had.
func TestMainResourceNeverChangesStoredStatus(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: kept}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
	kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/kept", "--subresource=status", "--type=merge", "-p",
		`{"status":{"phase":"Running","attempts":1,"lastJob":{"name":"uid-0-1","uid":"uid-1"},"observedGeneration":1}}`)
	want := storedSince(t, ns, "kept", 0)
	since := etcdRevision(t)

	read, err := tasks(alpha, ns).Get(t.Context(), "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(read.GetAnnotations()[conversion.PreservedAnnotation]), &p); err != nil {
		t.Fatalf("the annotation read at v1alpha1 is not plain JSON: %v", err)
	}
	p["owners"] = obj{"status.lastJob.name": "0000000000000000"}
	setAnnotation(read, string(mustJSON(p)))
	for i, variant := range []func(){
		func() {},
		func() { read.Object["status"].(obj)["lastJobName"] = "uid-0-2" },
		func() { read.Object["spec"].(obj)["replicas"] = int64(2) },
	} {
		variant()
		u := read.DeepCopy()
		u.SetResourceVersion("")
		kubectl(t, string(mustJSON(u.Object)), "replace", "-f", "-")
		for _, rev := range storedSince(t, ns, "kept", since) {
			if diff := fmt.Sprint(rev["status"]); diff != fmt.Sprint(want[len(want)-1]["status"]) {
				t.Errorf("variant %d: revision %v stores status %v, want %v", i, rev["revision"], rev["status"], want[len(want)-1]["status"])
			}
		}
	}
}

// TestNoOpWriteAtAnOldVersionKeepsGeneration: a patch at v1beta1 that sets suspend: false on a
// Task without suspend (the same thing for both versions) stores nothing new: no revision
// changes spec, and metadata.generation stays.
func TestNoOpWriteAtAnOldVersionKeepsGeneration(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: same}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
	before := storedSince(t, ns, "same", 0)
	last := before[len(before)-1]
	since := etcdRevision(t)
	for _, patch := range []string{`{"spec":{"suspend":false}}`, `{"spec":{"parallelism":1}}`} {
		kubectl(t, "", "patch", "-n", ns, "tasks.v1beta1.example.com/same", "--type=merge", "-p", patch)
		for _, rev := range storedSince(t, ns, "same", since) {
			if rev["generation"] != last["generation"] || string(mustJSON(rev["spec"])) != string(mustJSON(last["spec"])) {
				t.Errorf("%s at v1beta1: revision %v stores generation %v and spec %s, want generation %v and spec %s",
					patch, rev["revision"], rev["generation"], mustJSON(rev["spec"]), last["generation"], mustJSON(last["spec"]))
			}
		}
	}
}

// TestOldVersionMinimumHoldsWhenAdmissionPatches: replicas: 0, which the v1alpha1 schema
// refuses, is refused naming the field also when the same write changes something admission
// rewrites (the preserved annotation deleted, a status in the body), where the apiserver
// validates the object converted back from the webhook's patch.
func TestOldVersionMinimumHoldsWhenAdmissionPatches(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: minimum}\nspec: {runner: {type: Shell, shell: {script: echo}}, timeout: 5m}\n")
	for _, patch := range []string{
		`{"spec":{"replicas":0}}`,
		fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":0}}`, conversion.PreservedAnnotation),
		`{"spec":{"replicas":0},"status":{"state":"Failed"}}`,
	} {
		_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks.v1alpha1.example.com/minimum", "--type=merge", "-p", patch)
		if err == nil || !strings.Contains(stderr, "spec.replicas") {
			t.Errorf("patch %s at v1alpha1: err %v, stderr %q; want a refusal naming spec.replicas", patch, err, stderr)
		}
	}
	stored, err := tasks(hubVersion, ns).Get(t.Context(), "minimum", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := field(stored.Object, "spec.parallelism"); p != int64(1) {
		t.Errorf("parallelism %v after refused writes, want 1", p)
	}
}
