package plugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// A Task stored with a quantity no typed decoding parses in bounded time (by an earlier
// release, or while the admission webhooks were removed: here straight into etcd, with the
// operator's finalizer) stops nothing else. The operator runs the other Tasks and starts no run
// of it; its conditions name the field and `kubectl task status` shows them; writes that leave
// the quantity alone are taken, one that brings another is refused; fixed, it runs; its delete
// completes.
// Without the operator's read filter its informer hangs decoding the Task and no other Task
// runs; without the webhook's ratchet no status of it is written and its delete hangs.
func TestATaskStoredWithAnUnreadableQuantityStopsNothingElse(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("spoiled", "", "  suspend: true\n  resources: {limits: {cpu: \"1\", memory: 64Mi}}\n"))
	spoil(t, ns, "spoiled", map[string]any{"cpu": "1e3000000000", "memory": "64Mi"})
	defer removeSpoiled(t, ns, "spoiled")

	apply(t, ns, task("healthy", "", ""))
	waitFor(t, ns, "healthy", "Succeeded")

	waitFor(t, ns, "spoiled", "Stalled")
	want := `spec.resources.limits.cpu: Invalid value: "1e3000000000": ` + taskv1.QuantityBoundsMessage
	stalled := ok(t, "get", "-n", ns, "task/spoiled", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")]}`)
	var cond struct{ Reason, Message string }
	if err := json.Unmarshal([]byte(stalled), &cond); err != nil {
		t.Fatalf("Stalled condition %q: %v", stalled, err)
	}
	if cond.Reason != taskv1.ReasonInvalidSpec || !strings.HasPrefix(cond.Message, want) {
		t.Errorf("Stalled: reason %q, message %q; want %s and a message beginning %q", cond.Reason, cond.Message, taskv1.ReasonInvalidSpec, want)
	}
	if jobs := ok(t, "get", "jobs", "-n", ns, "-l", taskv1.LabelTaskName+"=spoiled", "-o", "name"); strings.TrimSpace(jobs) != "" {
		t.Errorf("the unreadable Task has Jobs: %s", jobs)
	}
	contains(t, "kubectl task status", ok(t, "task", "status", "spoiled", "-n", ns),
		"Stalled", "True, "+taskv1.ReasonInvalidSpec, "spec.resources.limits.cpu")

	// Other Tasks read at every version; a LIST at an old version fails naming this one, which
	// the apiserver cannot convert for its watch cache (the conversion webhook refuses it).
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		ok(t, "get", "-n", ns, "tasks."+v+".example.com/healthy")
		if r := kubectl(t, "", "get", "-n", ns, "tasks."+v+".example.com"); r.code == 0 || !strings.Contains(r.stderr, "/spoiled") {
			t.Errorf("LIST at %s: exit %d, %s; want it refused naming the unreadable Task", v, r.code, r.stderr)
		}
	}

	ok(t, "label", "-n", ns, "task/spoiled", "team=a")
	if r := kubectl(t, "", "patch", "-n", ns, "task/spoiled", "--type=merge", "-p", `{"spec":{"resources":{"limits":{"memory":"1e99"}}}}`); r.code == 0 || !strings.Contains(r.stderr, "spec.resources.limits.memory") {
		t.Errorf("a write bringing another quantity out of bounds: exit %d, %s; want it refused naming spec.resources.limits.memory", r.code, r.stderr)
	}
	// Nothing the operator read was written back: the stored Task keeps its quantity and has no
	// annotation of the filter's.
	stored := storedTask(t, ns, "spoiled")
	if !strings.Contains(stored, `"1e3000000000"`) || strings.Contains(stored, taskv1.AnnotationUnreadable) {
		t.Errorf("the stored Task changed: %s", stored)
	}

	// Fixed at v1, it runs.
	ok(t, "patch", "-n", ns, "tasks.v1.example.com/spoiled", "--type=merge", "-p", `{"spec":{"resources":{"limits":{"cpu":"1"}}}}`)
	waitFor(t, ns, "spoiled", "Succeeded")
	ok(t, "delete", "-n", ns, "task/spoiled", "--timeout=60s")
}

// spoil sets the stored Task's spec.resources.limits to limits, clears its suspend and gives it
// the operator's finalizer, in etcd, and waits until the apiserver serves it.
func spoil(t *testing.T, ns, name string, limits map[string]any) {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal([]byte(storedTask(t, ns, name)), &o); err != nil {
		t.Fatal(err)
	}
	o["metadata"].(map[string]any)["finalizers"] = []any{taskv1.FinalizerJobs}
	spec := o["spec"].(map[string]any)
	spec["resources"].(map[string]any)["limits"] = limits
	delete(spec, "suspend")
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.EtcdPut(t.Context(), testenv.TaskEtcdPrefix+ns+"/"+name, raw); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the apiserver to serve the spoiled Task", func(ctx context.Context) (bool, error) {
		r := kubectl(t, "", "get", "-n", ns, "tasks.v1.example.com/"+name, "-o", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"1e3000000000"`), nil
	})
}

func storedTask(t *testing.T, ns, name string) string {
	t.Helper()
	raw, err := cluster.EtcdGet(t.Context(), testenv.TaskEtcdPrefix+ns+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// removeSpoiled deletes the Task if the test left it (from etcd if the API cannot), and waits
// until Tasks list again at every served version: the suite's other tests list there.
func removeSpoiled(t *testing.T, ns, name string) {
	if r := kubectl(t, "", "delete", "-n", ns, "task/"+name, "--ignore-not-found", "--timeout=60s"); r.code != 0 {
		t.Errorf("delete of the unreadable Task: exit %d, %s; removing it from etcd", r.code, r.stderr)
		if err := cluster.EtcdDelete(t.Context(), testenv.TaskEtcdPrefix+ns+"/"+name); err != nil {
			t.Error(err)
		}
	}
	for _, version := range []string{"v1alpha1", "v1beta1", "v1"} {
		testenv.Eventually(t, 2*time.Minute, "Tasks to list at "+version, func(ctx context.Context) (bool, error) {
			return kubectl(t, "", "get", "tasks."+version+".example.com", "-A").code == 0, nil
		})
	}
}
