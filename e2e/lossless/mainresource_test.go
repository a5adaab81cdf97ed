package lossless_test

import (
	"crypto/sha256"
	"encoding/hex"
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
// and a preserved annotation crafted for it stores, at every revision, the status it had. The
// crafted annotations: the one read with a wrong owner of status.lastJob.name (the status kept,
// or edited after the read), and one made for a body whose status differs from the stored one
// (its fingerprints those of the body, its patch giving back the stored v1 status exactly, its
// owner of status.lastJob.name wrong), so that admission sees the stored status and nothing to
// decide, while the status the apiserver puts back (the stored one) no longer matches the
// fingerprint and the wrong owner drops lastJob.uid on the way to storage (#27 item 3).
func TestMainResourceNeverChangesStoredStatus(t *testing.T) {
	ns := setUp(t)
	wrongOwner := obj{"status.lastJob.name": "0000000000000000"}
	for i, c := range []struct {
		name string
		// status edits the v1alpha1 status of the body; hub edits the annotation's status patch
		// so that it gives back the stored v1 status from the edited one.
		status, hub func(status obj)
		// matchBody: the annotation's status fingerprint is the edited body's, not the read one's.
		matchBody bool
	}{
		{name: "status as read, wrong owner", status: func(obj) {}, hub: func(obj) {}},
		{name: "status edited after the read, wrong owner", status: set("lastJobName", "uid-0-2"), hub: func(obj) {}},
		{name: "another last Job, annotation made for it", status: set("lastJobName", "uid-0-2"), hub: set("lastJob.name", "uid-0-1"), matchBody: true},
		{name: "another state, annotation made for it", status: set("state", "Failed"), hub: set("phase", "Running"), matchBody: true},
	} {
		name := fmt.Sprintf("kept-%d", i)
		createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: "+name+"}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
		kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/"+name, "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Running","attempts":1,"lastJob":{"name":"uid-0-1","uid":"uid-1"},"observedGeneration":1}}`)
		want := storedSince(t, ns, name, 0)
		wantStatus := fmt.Sprint(want[len(want)-1]["status"])

		read, err := tasks(alpha, ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var p obj
		if err := json.Unmarshal([]byte(read.GetAnnotations()[conversion.PreservedAnnotation]), &p); err != nil {
			t.Fatalf("the annotation read at v1alpha1 is not plain JSON: %v", err)
		}
		u := read.DeepCopy()
		u.SetResourceVersion("")
		status := u.Object["status"].(obj)
		c.status(status)
		p["owners"] = wrongOwner
		patch := p["patch"].(obj)
		if patch["status"] == nil {
			patch["status"] = obj{}
		}
		c.hub(patch["status"].(obj))
		if c.matchBody {
			p["status"] = fingerprintOf(status)
		}
		setAnnotation(u, string(mustJSON(p)))
		since := etcdRevision(t)
		kubectl(t, string(mustJSON(u.Object)), "replace", "-f", "-")
		for _, rev := range storedSince(t, ns, name, since) {
			if got := fmt.Sprint(rev["status"]); got != wantStatus {
				t.Errorf("%s: revision %v stores status %v, want %v", c.name, rev["revision"], got, wantStatus)
			}
		}
	}
}

// fingerprintOf is the preserved annotation's fingerprint of a decoded JSON value (conversion's
// fingerprint: the first 16 hex digits of the SHA-256 of its JSON with sorted keys), computed
// here so that a test can craft an annotation that matches a body.
func fingerprintOf(v any) string {
	sum := sha256.Sum256(mustJSON(v))
	return hex.EncodeToString(sum[:8])
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
