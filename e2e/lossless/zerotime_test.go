package lossless_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestATimeThatReadsAsUnsetIsRefusedAtV1AndKeptWhereStored: a time Go writes as one it reads
// back as unset (the zero instant, or within its first second) is refused on a write at v1,
// naming the field. A Task stored with one before (put in etcd as an earlier release could have
// stored it) keeps it through a status write at v1alpha1 or v1beta1 that does not touch it, and
// such a write, a condition's included, is not refused for it.
func TestATimeThatReadsAsUnsetIsRefusedAtV1AndKeptWhereStored(t *testing.T) {
	ns := setUp(t)
	createFrom(t, ns, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: zt}\nspec: {runner: {type: Shell, shell: {script: echo}}}\n")
	for _, write := range []struct{ status, field string }{
		{`{"status":{"startTime":"0001-01-01T00:00:00Z"}}`, "status.startTime"},
		{`{"status":{"lastPhaseTransitionTime":"0001-01-01T00:00:00.5Z"}}`, "status.lastPhaseTransitionTime"},
		{`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"R","message":"m","lastTransitionTime":"0001-01-01T01:00:00+01:00"}]}}`, "status.conditions[0].lastTransitionTime"},
	} {
		_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks.v1.example.com/zt",
			"--subresource=status", "--type=merge", "-p", write.status)
		if err == nil || !strings.Contains(stderr, write.field) {
			t.Errorf("v1 status write %s: %v %s, want it refused naming %s", write.status, err, stderr, write.field)
		}
	}

	for _, tc := range []struct{ version, status, patch, field string }{
		{alpha, `{"phase":"Running","lastPhaseTransitionTime":"0001-01-01T00:00:00Z"}`, `{"status":{"state":"Running","lastError":"a"}}`, `"lastPhaseTransitionTime":"0001-01-01T00:00:00Z"`},
		{alpha, `{"phase":"Running","lastPhaseTransitionTime":"0001-01-01T00:00:00.5Z"}`, `{"status":{"lastError":"b"}}`, `"lastPhaseTransitionTime":"0001-01-01T00:00:00.5Z"`},
		{beta, `{"phase":"Running","startTime":"0001-01-01T00:00:00Z"}`, `{"status":{"phase":"Running"}}`, `"startTime":"0001-01-01T00:00:00Z"`},
		{beta, `{"phase":"Running","conditions":[{"type":"Ready","status":"False","reason":"R","message":"m","lastTransitionTime":"0001-01-01T00:00:00Z"}]}`, `{"status":{"lastError":"c"}}`, `"lastTransitionTime":"0001-01-01T00:00:00Z"`},
	} {
		storeStatus(t, ns, "zt", tc.status)
		before := storedBody(t, ns, "zt")
		if _, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks."+tc.version+".example.com/zt",
			"--subresource=status", "--type=merge", "-p", tc.patch); err != nil {
			t.Errorf("status write at %s of a Task stored with %s: %v %s", tc.version, tc.field, err, stderr)
			continue
		}
		if after := storedBody(t, ns, "zt"); !strings.Contains(after, tc.field) {
			t.Errorf("a status write at %s lost %s:\n before %s\n after  %s", tc.version, tc.field, before, after)
		}
	}
}

// storeStatus puts status (JSON) into the Task's stored object in etcd directly, and waits
// until the apiserver serves it.
func storeStatus(t *testing.T, ns, name, status string) {
	t.Helper()
	key := testenv.TaskEtcdPrefix + ns + "/" + name
	raw, err := cluster.EtcdGet(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	var st any
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	o["status"] = st
	if err := cluster.EtcdPut(t.Context(), key, mustJSON(o)); err != nil {
		t.Fatal(err)
	}
	want := string(mustJSON(st))
	testenv.Eventually(t, 30*time.Second, "the apiserver to serve the stored status", func(ctx context.Context) (bool, error) {
		out, stderr, err := testenv.Kubectl(ctx, cluster.KubeconfigPath, nil, "get", "-n", ns, "tasks.v1.example.com/"+name, "-o", "jsonpath={.status}")
		var got any
		if err != nil || json.Unmarshal([]byte(out), &got) != nil {
			return false, fmt.Errorf("%v %s: %s", err, stderr, out)
		}
		return string(mustJSON(got)) == want, fmt.Errorf("served %s, want %s", out, want)
	})
}
