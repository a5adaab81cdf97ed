package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestRerunSendsNothingTheOperatorWouldTakeAsAnswered: rerun on a machine whose clock is behind
// the last request the operator honoured fails and writes nothing to the Task.
func TestRerunSendsNothingTheOperatorWouldTakeAsAnswered(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	task := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"name": "report", "namespace": "default"},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "echo"}}},
		"status":   map[string]any{"phase": "Succeeded", "runRequest": now.Add(20 * time.Second).Format(time.RFC3339)},
	}}
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "tasks"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "TaskList"}, task)
	c := &clients{namespace: "default", tasks: dyn.Resource(gvr)}
	var out bytes.Buffer
	err := runRequestCommand(context.Background(), c, "report", rerunRequest, now, &out)
	if err == nil {
		t.Fatalf("rerun at %s after a request honoured at %s: no error; printed %q", now, now.Add(20*time.Second), out.String())
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("the refused rerun sent a %s", a.GetVerb())
		}
	}
}
