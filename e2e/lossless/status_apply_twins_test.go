package lossless_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestStatusApplyRemovalsMatchATaskWrittenAtOneVersion: rule 6 for status applies at the old
// versions, each status field in turn: manager "st" applies a full status at V, another manager
// writes one other status field at another version (W), and st applies again without the
// field; the status read at V is what it is on a twin Task whose other write was made at V.
func TestStatusApplyRemovalsMatchATaskWrittenAtOneVersion(t *testing.T) {
	ns := setUp(t)
	ctx := t.Context()
	type other struct{ version, patch string }
	cases := []struct {
		version string
		full    obj
		twin    other // the other write, at the version itself
		others  []other
		exclude string // the field the other write sets
	}{
		{version: alpha,
			full:    obj{"state": "Failed", "lastJobName": "j-0-3", "retryCount": int64(2), "lastError": "boom"},
			twin:    other{alpha, `{"status":{"lastUpdateTime":"2026-01-01T00:00:00Z"}}`},
			others:  []other{{beta, `{"status":{"completionTime":"2026-01-01T00:00:00Z"}}`}, {hubVersion, `{"status":{"lastPhaseTransitionTime":"2026-01-01T00:00:00Z"}}`}},
			exclude: "lastUpdateTime"},
		{version: beta,
			full: obj{"phase": "Failed", "lastJobName": "j-0-3", "attempts": int64(3), "lastError": "boom", "observedGeneration": int64(1),
				"startTime":  "2026-01-01T00:00:00Z",
				"conditions": []any{obj{"type": "Ready", "status": "False", "reason": "X", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}}},
			twin:    other{beta, `{"status":{"completionTime":"2026-01-01T00:00:00Z"}}`},
			others:  []other{{alpha, `{"status":{"lastUpdateTime":"2026-01-01T00:00:00Z"}}`}, {hubVersion, `{"status":{"nextRunTime":"2026-01-01T00:00:00Z"}}`}},
			exclude: "completionTime"},
	}
	var failures []string
	n := 0
	for _, c := range cases {
		for dropped := range c.full {
			for _, o := range c.others {
				n++
				name := fmt.Sprintf("st-%d", n)
				twin := name + "-twin"
				run := func(task string, w other) error {
					spec := obj{"runner": obj{"type": "Shell", "shell": obj{"script": "x"}}}
					if c.version == alpha {
						spec = obj{"type": "shell", "shell": "x"}
					}
					u := &unstructured.Unstructured{Object: obj{"apiVersion": "example.com/" + c.version, "kind": "Task",
						"metadata": obj{"name": task, "namespace": ns}, "spec": spec}}
					if _, err := tasks(c.version, ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
						return err
					}
					apply := func(status obj) error {
						m := &unstructured.Unstructured{Object: obj{"apiVersion": "example.com/" + c.version, "kind": "Task",
							"metadata": obj{"name": task, "namespace": ns}, "status": status}}
						_, err := tasks(c.version, ns).ApplyStatus(ctx, task, m, metav1.ApplyOptions{FieldManager: "st", Force: true})
						return err
					}
					if err := apply(c.full); err != nil {
						return err
					}
					if _, err := tasks(w.version, ns).Patch(ctx, task, types.MergePatchType, []byte(w.patch), metav1.PatchOptions{FieldManager: "other"}, "status"); err != nil {
						return err
					}
					without := clone(c.full).(map[string]any)
					delete(without, dropped)
					return apply(without)
				}
				if err := run(name, o); err != nil {
					t.Fatal(err)
				}
				if err := run(twin, c.twin); err != nil {
					t.Fatal(err)
				}
				got, _ := tasks(c.version, ns).Get(ctx, name, metav1.GetOptions{})
				want, _ := tasks(c.version, ns).Get(ctx, twin, metav1.GetOptions{})
				gs, _ := got.Object["status"].(map[string]any)
				ws, _ := want.Object["status"].(map[string]any)
				delete(gs, c.exclude)
				delete(ws, c.exclude)
				if d := cmp.Diff(ws, gs); d != "" {
					failures = append(failures, fmt.Sprintf("status apply at %s dropping %s after a write at %s: status differs from a Task written at %s only (-only %s +got):\n%s",
						c.version, dropped, o.version, c.version, c.version, d))
				}
			}
		}
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d:\n%s", len(failures), n, strings.Join(failures, "\n"))
	}
}
