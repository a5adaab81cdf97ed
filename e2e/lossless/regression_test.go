package lossless_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/task-operator/conversion/fuzzer"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// The defects issue #12 reported, each reproduced as it was found, through the apiserver.

// storedBody reads what etcd holds of a Task: its spec and status, re-encoded with sorted keys
// as the apiserver writes them, so equal bytes mean an identical stored object.
func storedBody(t *testing.T, ns, name string) string {
	t.Helper()
	raw, err := cluster.EtcdGet(t.Context(), testenv.TaskEtcdPrefix+ns+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("stored Task is not JSON: %v", err)
	}
	if o["apiVersion"] != "example.com/v1" {
		t.Fatalf("stored at %v, want example.com/v1", o["apiVersion"])
	}
	return string(mustJSON(obj{"spec": o["spec"], "status": o["status"]}))
}

func createFrom(t *testing.T, ns string, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	version := strings.TrimPrefix(u.GetAPIVersion(), "example.com/")
	created, err := tasks(version, ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", u.GetName(), err)
	}
	return created
}

func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, _, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(stdin), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const spelledTask = `
apiVersion: example.com/v1
kind: Task
metadata: {name: spelled}
spec:
  runner:
    type: HTTP
    http:
      url: https://hooks.internal/rebuild
      method: POST
      headers: [{name: Authorization, value: "Bearer <secret>&"}]
      body: '{"full": true}'
      timeout: 90s
  retry: {maxRetries: 2, backoff: {initial: 10s, factor: 3, max: 5m}}
  schedule: {cron: "0 2 * * *", timeZone: Europe/Paris, concurrencyPolicy: Forbid}
  timeout: 5m
  suspend: false
`

// TestNoDriftOnGetAndPutBack: a GET at an old version and a PUT back unchanged leaves etcd's
// copy byte for byte as it was: durations keep their spelling, explicit false stays, for a Task
// in unusual spellings and for every sample.
func TestNoDriftOnGetAndPutBack(t *testing.T) {
	ns := setUp(t)
	manifests := []string{spelledTask}
	samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "v*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("samples: %v %v", samples, err)
	}
	for _, s := range samples {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(data))
	}
	for _, m := range manifests {
		created := createFrom(t, ns, m)
		name := created.GetName()
		before := storedBody(t, ns, name)
		for _, version := range []string{alpha, beta, hubVersion} {
			read, err := tasks(version, ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tasks(version, ns).Update(t.Context(), read, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("%s: put back at %s: %v", name, version, err)
			}
			if after := storedBody(t, ns, name); after != before {
				t.Errorf("%s: a GET and PUT at %s changed what etcd holds:\nbefore %s\nafter  %s", name, version, before, after)
			}
		}
	}
}

// exportedManifest is what `kubectl get -o yaml > file` keeps once the fields the server sets
// are cut, as users do before they apply it elsewhere or later: the preserved annotation stays.
func exportedManifest(t *testing.T, yamlText string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(yamlText), &u.Object); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	delete(u.Object, "status")
	return string(mustJSON(u))
}

// TestOldVersionWritesCannotSetHiddenFieldsOrStatus: a client that writes the preserved
// annotation itself sets nothing with it: not on create (the defaults), not on update (the
// stored values), and never a status.
func TestOldVersionWritesCannotSetHiddenFieldsOrStatus(t *testing.T) {
	ns := setUp(t)
	forged := forgery(rand.New(rand.NewPCG(1, 2)))
	for _, version := range []string{alpha, beta} {
		name := "forged-" + version
		spec := `{"type":"shell","shell":"echo ok"}`
		status := `{"state":"Succeeded","retryCount":0}`
		if version == beta {
			spec = `{"runner":{"type":"Shell","shell":{"script":"echo ok"}}}`
			status = `{"phase":"Succeeded","conditions":[{"type":"Succeeded","status":"True","reason":"Forged","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`
		}
		manifest := fmt.Sprintf(`{"apiVersion":"example.com/%s","kind":"Task","metadata":{"name":%q,"namespace":%q,"annotations":{%q:%s}},"spec":%s,"status":%s}`,
			version, name, ns, conversion.PreservedAnnotation, mustJSON(forged), spec, status)
		kubectl(t, manifest, "create", "-f", "-")
		stored, err := tasks(hubVersion, ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := obj{
			"runner": obj{"type": "Shell", "shell": obj{"script": "echo ok"}}, "parallelism": int64(1),
			"retry": obj{"maxRetries": int64(map[string]int{alpha: 0, beta: 3}[version]), "backoff": obj{"initial": "10s", "factor": int64(2), "max": "5m0s"}},
		}
		if diff := cmp.Diff(want, stored.Object["spec"]); diff != "" {
			t.Errorf("create at %s with a forged annotation (-want +got):\n%s", version, diff)
		}
		if st, ok := stored.Object["status"]; ok {
			t.Errorf("create at %s set status %v", version, st)
		}
	}
}

// TestDeletedOrStaleAnnotationRevertsNothing: `kubectl annotate ...-`, a merge patch with
// annotations: null, and kubectl apply of an exported manifest (whose annotation went stale when
// the Task changed at v1) keep every v1 field, and leave metadata.generation alone when nothing
// the old version shows changed.
func TestDeletedOrStaleAnnotationRevertsNothing(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, spelledTask)
	exported := exportedManifest(t, kubectl(t, "", "get", "-n", ns, "tasks.v1beta1.example.com/spelled", "-o", "yaml"))
	// The Task changes at v1 after the export: the exported annotation is stale now.
	kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/spelled", "--type=merge", "-p", `{"spec":{"timeout":"7m","schedule":{"timeZone":"Asia/Tokyo"}}}`)
	before := storedBody(t, ns, "spelled")
	generation := func() int64 {
		u, err := tasks(hubVersion, ns).Get(t.Context(), "spelled", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetGeneration()
	}
	gen := generation()
	steps := []struct {
		name string
		do   func()
	}{
		{"kubectl annotate ...-", func() {
			kubectl(t, "", "annotate", "-n", ns, "tasks.v1alpha1.example.com/spelled", conversion.PreservedAnnotation+"-")
		}},
		{"merge patch annotations: null", func() {
			kubectl(t, "", "patch", "-n", ns, "tasks.v1beta1.example.com/spelled", "--type=merge", "-p", `{"metadata":{"annotations":null}}`)
		}},
		{"kubectl apply of the exported manifest", func() {
			kubectl(t, exported, "apply", "-f", "-")
		}},
		{"kubectl replace of the exported manifest", func() {
			kubectl(t, exported, "replace", "-f", "-")
		}},
	}
	for _, s := range steps {
		s.do()
		if after := storedBody(t, ns, "spelled"); after != before {
			t.Errorf("%s changed the stored Task:\nbefore %s\nafter  %s", s.name, before, after)
		}
		if g := generation(); g != gen {
			t.Errorf("%s: generation %d, want %d", s.name, g, gen)
		}
	}
}

// TestAnnotationWrittenAtV1IsNeverApplied: an annotation set at v1 (here naming a destructive
// script) is dropped on the write, so the next old-version write cannot apply it.
func TestAnnotationWrittenAtV1IsNeverApplied(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: foreign}\nspec: {runner: {type: Shell, shell: {script: echo ok}}}\n")
	evil := fmt.Sprintf(`{"v":2,"spec":"x","status":"y","patch":{"spec":{"runner":{"shell":{"script":"rm -rf /data"}}}}}`)
	kubectl(t, "", "annotate", "-n", ns, "tasks.v1.example.com/foreign", conversion.PreservedAnnotation+"="+evil)
	kubectl(t, "", "patch", "-n", ns, "tasks.v1alpha1.example.com/foreign", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	stored, err := tasks(hubVersion, ns).Get(t.Context(), "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := field(stored.Object, "spec.runner.shell.script"); got != "echo ok" {
		t.Fatalf("script is %q", got)
	}
	if _, ok := stored.GetAnnotations()[conversion.PreservedAnnotation]; ok {
		t.Fatal("the annotation written at v1 was stored")
	}
}

// TestHiddenFieldsFollowTheirOwner: a new URL at v1alpha1 does not carry the POST, the
// Authorization header and the body to a host the user never chose; a status write naming
// another Job does not keep the old Job's UID.
func TestHiddenFieldsFollowTheirOwner(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, spelledTask)
	kubectl(t, "", "patch", "-n", ns, "tasks.v1alpha1.example.com/spelled", "--type=merge", "-p", `{"spec":{"url":"https://elsewhere.example/"}}`)
	stored, err := tasks(hubVersion, ns).Get(t.Context(), "spelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := obj{"url": "https://elsewhere.example/", "method": "GET", "timeout": "30s"}
	if diff := cmp.Diff(want, field(stored.Object, "spec.runner.http")); diff != "" {
		t.Errorf("http runner after a new URL at v1alpha1 (-want +got):\n%s", diff)
	}
	if got := field(stored.Object, "spec.schedule.timeZone"); got != "Europe/Paris" {
		t.Errorf("time zone %v: a new URL changed an unrelated field", got)
	}

	kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/spelled", "--subresource=status", "--type=merge", "-p",
		`{"status":{"lastJob":{"name":"spelled-1","uid":"uid-1"},"attempts":1,"missedRuns":2}}`)
	kubectl(t, "", "patch", "-n", ns, "tasks.v1alpha1.example.com/spelled", "--subresource=status", "--type=merge", "-p",
		`{"status":{"lastJobName":"spelled-2"}}`)
	stored, err = tasks(hubVersion, ns).Get(t.Context(), "spelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(obj{"name": "spelled-2"}, field(stored.Object, "status.lastJob")); diff != "" {
		t.Errorf("lastJob after a status write at v1alpha1 (-want +got):\n%s", diff)
	}
	if got := field(stored.Object, "status.missedRuns"); got != int64(2) {
		t.Errorf("missedRuns %v: a status write at v1alpha1 lost a hidden status field", got)
	}
}

// TestLargeTasksStayReadable: a Task whose v1-only fields are large (64 KiB of body full of <,
// > and &, which JSON escapes six-fold unless told not to; env entries of 4 KiB) reads at every
// version, alone and in a LIST beside others, and server-side apply at v1 works on a Task that
// has a managed-fields entry at an old version. A Task too large to read at an old version is
// refused naming the field.
func TestLargeTasksStayReadable(t *testing.T) {
	ns := setUp(t)
	body := strings.Repeat("<a href='x'>&amp;</a>", 65536/22)
	big := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"big","namespace":%q},
		"spec":{"runner":{"type":"HTTP","http":{"url":"https://a.example/","method":"POST","body":%s}}}}`, ns, mustJSON(body))
	kubectl(t, big, "create", "-f", "-")
	for i := range 3 {
		createFrom(t, ns, fmt.Sprintf("apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: small-%d}\nspec: {type: shell, shell: 'echo %d'}\n", i, i))
	}
	for _, version := range []string{alpha, beta, hubVersion} {
		list, err := tasks(version, ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("LIST at %s: %v", version, err)
		}
		if len(list.Items) != 4 {
			t.Fatalf("LIST at %s: %d Tasks, want 4", version, len(list.Items))
		}
	}
	// An old-version apply records managed fields at v1alpha1; apply at v1 must still work.
	kubectl(t, fmt.Sprintf("apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: big, namespace: %s}\nspec: {type: http, url: 'https://a.example/', replicas: 2}\n", ns),
		"apply", "--server-side", "--field-manager=old-client", "--force-conflicts", "-f", "-")
	kubectl(t, fmt.Sprintf("apiVersion: example.com/v1\nkind: Task\nmetadata: {name: big, namespace: %s}\nspec: {runner: {type: HTTP, http: {url: 'https://a.example/', method: POST, body: %s}}, timeout: 9m}\n", ns, mustJSON(body)),
		"apply", "--server-side", "--field-manager=new-client", "--force-conflicts", "-f", "-")
	stored, err := tasks(hubVersion, ns).Get(t.Context(), "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if field(stored.Object, "spec.runner.http.body") != body || field(stored.Object, "spec.parallelism") != int64(2) {
		t.Fatalf("after applies at v1alpha1 and v1: body kept %t, parallelism %v", field(stored.Object, "spec.runner.http.body") == body, field(stored.Object, "spec.parallelism"))
	}

	var env []string
	for i := range 64 {
		env = append(env, fmt.Sprintf(`{"name":"E%d","value":%q}`, i, fuzzer.IncompressibleText(i, 4096)))
	}
	huge := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"huge","namespace":%q},
		"spec":{"runner":{"type":"Shell","shell":{"script":"x","env":[%s]}}}}`, ns, strings.Join(env, ","))
	_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(huge), "create", "-f", "-")
	if err == nil || !strings.Contains(stderr, "spec.runner.shell.env") || !strings.Contains(stderr, "could not be read at v1") {
		t.Fatalf("a Task unreadable at the old versions: err %v, stderr %q; want a refusal naming spec.runner.shell.env", err, stderr)
	}
}

// TestConversionFailuresReachTheClient: a damaged annotation is reported to the client with the
// conversion webhook's own message (the apiserver gets a failed review with HTTP 200, not a 400
// it would report as "an unknown reason").
func TestConversionFailuresReachTheClient(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: damaged}\nspec: {type: shell, shell: 'echo'}\n")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"v\":2,"}}}`, conversion.PreservedAnnotation)
	_, err := tasks(alpha, ns).Patch(t.Context(), "damaged", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err == nil {
		t.Fatal("a damaged annotation was accepted")
	}
	for _, want := range []string{conversion.PreservedAnnotation, "not a JSON object", "damaged"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "unknown reason") {
		t.Errorf("the client sees no reason: %v", err)
	}
}

// TestStaleLastAppliedKeepsV1Fields: client-side kubectl apply at an old version, with a
// last-applied configuration that went stale because the Task changed at v1 in between, keeps
// the v1 change and applies the visible edit.
func TestStaleLastAppliedKeepsV1Fields(t *testing.T) {
	ns := setUp(t)
	manifest := func(replicas int) string {
		return fmt.Sprintf("apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: stale, namespace: %s}\nspec: {type: shell, shell: 'echo', replicas: %d}\n", ns, replicas)
	}
	kubectl(t, manifest(1), "apply", "-f", "-")
	kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/stale", "--type=merge", "-p",
		`{"spec":{"timeout":"5m","runner":{"shell":{"env":[{"name":"A","value":"1"}]}},"schedule":{"cron":"@daily","timeZone":"UTC"}}}`)
	before, err := tasks(hubVersion, ns).Get(t.Context(), "stale", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, manifest(3), "apply", "-f", "-")
	after, err := tasks(hubVersion, ns).Get(t.Context(), "stale", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := clone(before.Object["spec"]).(obj)
	setField(want, "parallelism", int64(3))
	if diff := cmp.Diff(want, after.Object["spec"]); diff != "" {
		t.Errorf("apply with a stale last-applied (-want +got):\n%s", diff)
	}
}
