package cli

import (
	"bytes"
	"context"
	"strings"
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

// TestCancelSendsNothingTheOperatorWouldIgnore: a cancel on a machine whose clock is behind the
// cancel the operator last honoured would be ignored while the run goes on; it fails and writes
// nothing to the Task.
func TestCancelSendsNothingTheOperatorWouldIgnore(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	task := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"name": "report", "namespace": "default"},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "echo"}}},
		"status": map[string]any{"phase": "Running", "cancelRequest": now.Add(20 * time.Second).Format(time.RFC3339),
			"currentRun": map[string]any{"attempt": int64(1), "outcome": "Active", "job": map[string]any{"name": "report-0-1"}}},
	}}
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "tasks"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "TaskList"}, task)
	c := &clients{namespace: "default", tasks: dyn.Resource(gvr)}
	var out bytes.Buffer
	err := runRequestCommand(context.Background(), c, "report", cancelRequest, now, &out)
	want := `task "report" in namespace "default": a cancel requested at 2026-01-01T00:05:00Z is not later than the cancel of 2026-01-01T00:05:20Z the operator honoured`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("cancel behind the honoured one: %v (printed %q), want an error starting %q", err, out.String(), want)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("the refused cancel sent a %s", a.GetVerb())
		}
	}
}
