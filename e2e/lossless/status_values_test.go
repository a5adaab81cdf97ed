package lossless_test

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// TestStatusWritesAtOldVersionsAreHeldToV1sValues: a status write at an old version stores a v1
// status, so it is held to the values v1 takes: a phase outside v1's, a retry count v1's int32
// attempts cannot hold (retryCount + 1) or a negative count is refused naming the field, and
// the stored Task is left as it was. A value v1 takes is stored.
func TestStatusWritesAtOldVersionsAreHeldToV1sValues(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: st}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
	for _, tc := range []struct {
		name, version, patch string
		refused              string // the field the refusal names; "" for a write that is stored
		stored               string // what the stored body then holds
	}{
		{"a phase v1 does not take, at v1alpha1", alpha, `{"status":{"state":"Bogus"}}`, "status.state", ""},
		{"a phase v1 does not take, at v1beta1", beta, `{"status":{"phase":"Bogus"}}`, "status.phase", ""},
		{"a retry count past v1's attempts", alpha, `{"status":{"state":"Running","retryCount":2147483647}}`, "status.retryCount", ""},
		{"a negative retry count", alpha, `{"status":{"state":"Running","retryCount":-5,"lastJobName":"st-0-1"}}`, "status.retryCount", ""},
		{"negative attempts at v1beta1", beta, `{"status":{"phase":"Running","attempts":-1}}`, "status.attempts", ""},
		{"values v1 takes", alpha, `{"status":{"state":"Retrying","retryCount":2,"lastJobName":"st-0-3"}}`, "", `"attempts":3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := storedBody(t, ns, "st")
			_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks."+tc.version+".example.com/st",
				"--subresource=status", "--type=merge", "-p", tc.patch)
			after := storedBody(t, ns, "st")
			if tc.refused == "" {
				if err != nil || !strings.Contains(after, tc.stored) {
					t.Fatalf("%s at %s: %v %s; stored %s, want it to hold %s", tc.patch, tc.version, err, stderr, after, tc.stored)
				}
				return
			}
			if err == nil || !strings.Contains(stderr, tc.refused) || !strings.Contains(stderr, "Invalid") {
				t.Errorf("%s at %s: err %v, %q; want a refusal naming %s", tc.patch, tc.version, err, stderr, tc.refused)
			}
			if after != before {
				t.Errorf("a refused write changed the stored Task:\n before %s\n after  %s", before, after)
			}
		})
	}
}

// TestADamagedPreservedAnnotationFailsTheWriteNamingItAndLosesNothing: a write at an old
// version carrying a preserved-fields annotation the converter did not write (it does not
// parse, or holds what no Task does) is refused naming the annotation and saying to leave it
// out; nothing is stored, the Task reads at every version, and the same write without it keeps
// the fields v1alpha1 cannot show.
func TestADamagedPreservedAnnotationFailsTheWriteNamingItAndLosesNothing(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: dmg}\nspec: {runner: {type: Shell, shell: {script: echo, env: [{name: A, value: '1'}]}}, timeout: 5m}\n")
	before := storedBody(t, ns, "dmg")
	write := func(annotation *string) (string, error) {
		ops := []any{map[string]any{"op": "replace", "path": "/spec/maxRetry", "value": 7}}
		if annotation != nil {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]any{conversion.PreservedAnnotation: *annotation}})
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks.v1alpha1.example.com/dmg", "--type=json", "-p", string(patch))
		return stderr, err
	}
	for _, value := range []string{`{not json`, `gz:!!!!`, `[]`, `{"v":"2"}`, `{"v":2,"patch":{"metadata":{"x":1}}}`, strings.Repeat("[", 10000)} {
		stderr, err := write(&value)
		if err == nil || !strings.Contains(stderr, conversion.PreservedAnnotation) || !strings.Contains(stderr, "leave it out of a write") {
			t.Errorf("annotation %.20q: err %v, %q; want a refusal naming the annotation and saying to leave it out", value, err, stderr)
		}
		if after := storedBody(t, ns, "dmg"); after != before {
			t.Errorf("annotation %.20q: a refused write changed the stored Task:\n before %s\n after  %s", value, before, after)
		}
	}
	for _, v := range []string{alpha, beta, hubVersion} {
		if _, err := tasks(v, ns).List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Errorf("list at %s: %v", v, err)
		}
	}
	if stderr, err := write(nil); err != nil {
		t.Fatalf("the same write without the annotation: %v %s", err, stderr)
	}
	if after := storedBody(t, ns, "dmg"); !strings.Contains(after, `"env":[{"name":"A","value":"1"}]`) || !strings.Contains(after, `"timeout":"5m"`) || !strings.Contains(after, `"maxRetries":7`) {
		t.Errorf("after the write without the annotation: stored %s; want maxRetries 7 and the env and timeout kept", after)
	}
}
