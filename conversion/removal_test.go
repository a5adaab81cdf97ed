package conversion

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entry is a managedFields entry as decoded JSON.
func entry(manager, operation, version, fields string) map[string]any {
	e := map[string]any{"manager": manager, "operation": operation, "apiVersion": "example.com/" + version, "fieldsType": "FieldsV1"}
	m, err := decodeJSON([]byte(fields))
	if err != nil {
		panic(err)
	}
	e["fieldsV1"] = m
	return e
}

func taskWith(spec map[string]any, entries ...map[string]any) map[string]any {
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	return map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"name": "t", "namespace": "ns", "managedFields": list},
		"spec":     spec,
	}
}

const (
	danWithEnv = `{"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{},"f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}}}}},"f:timeout":{}}}`
	danWithout = `{"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}}}}`
	patcher    = `{"f:metadata":{"f:annotations":{"f:task.example.com/preserved-v1-fields":{}}},"f:spec":{"f:replicas":{}}}`
)

// TestApplyRemovesWhatItsManagerDropped pins droppedByApply and its removal: what the applying
// manager's Apply entry stopped owning and no entry owns is removed, at the paths the entries
// name once translated to v1.
func TestApplyRemovesWhatItsManagerDropped(t *testing.T) {
	resurrected := map[string]any{
		"runner":      map[string]any{"type": "Shell", "shell": map[string]any{"script": "x", "env": []any{map[string]any{"name": "A", "value": "1"}}}},
		"timeout":     "9m",
		"parallelism": int64(2),
	}
	tests := []struct {
		name     string
		w        Write
		wantSpec map[string]any
	}{{
		name: "v1 apply drops env and timeout beside a v1alpha1 patcher",
		w: Write{Version: "v1", FieldManager: "dan",
			OldObject: taskWith(resurrected, entry("dan", "Apply", "v1", danWithEnv), entry("kubectl-patch", "Update", "v1alpha1", patcher)),
			Object:    taskWith(resurrected, entry("dan", "Apply", "v1", danWithout), entry("kubectl-patch", "Update", "v1alpha1", patcher)),
		},
		wantSpec: map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "x"}}, "parallelism": int64(2)},
	}, {
		name: "another manager still owns the field",
		w: Write{Version: "v1", FieldManager: "dan",
			OldObject: taskWith(resurrected, entry("dan", "Apply", "v1", danWithEnv), entry("eve", "Apply", "v1", `{"f:spec":{"f:timeout":{}}}`)),
			Object:    taskWith(resurrected, entry("dan", "Apply", "v1", danWithout), entry("eve", "Apply", "v1", `{"f:spec":{"f:timeout":{}}}`)),
		},
		// The env list goes with its item: dan alone owned both.
		wantSpec: map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "x"}}, "timeout": "9m", "parallelism": int64(2)},
	}, {
		name: "an old-version apply keeps what the version cannot express",
		w: Write{Version: "v1alpha1", FieldManager: "dan",
			OldObject: taskWith(resurrected, entry("dan", "Apply", "v1", danWithEnv)),
			Object:    taskWith(resurrected, entry("dan", "Apply", "v1alpha1", `{"f:spec":{"f:type":{},"f:shell":{}}}`)),
		},
		wantSpec: resurrected,
	}, {
		name: "an old-version apply resets what it maps to, to what the version gives when left out",
		w: Write{Version: "v1alpha1", FieldManager: "frank",
			OldObject: taskWith(resurrected, entry("frank", "Apply", "v1alpha1", `{"f:spec":{"f:type":{},"f:shell":{},"f:replicas":{}}}`)),
			Object:    taskWith(resurrected, entry("frank", "Apply", "v1alpha1", `{"f:spec":{"f:type":{},"f:shell":{}}}`)),
		},
		wantSpec: map[string]any{"runner": resurrected["runner"], "timeout": "9m", "parallelism": int64(1)},
	}, {
		name: "not an apply of the request's manager",
		w: Write{Version: "v1", FieldManager: "kubectl-edit",
			OldObject: taskWith(resurrected, entry("dan", "Apply", "v1", danWithEnv)),
			Object:    taskWith(resurrected, entry("dan", "Apply", "v1", danWithout)),
		},
		wantSpec: resurrected,
	}, {
		name: "an entry that does not translate: ownership unknown, nothing removed",
		w: Write{Version: "v1", FieldManager: "dan",
			OldObject: taskWith(resurrected, entry("dan", "Apply", "v1", danWithEnv)),
			Object:    taskWith(resurrected, entry("dan", "Apply", "v1", danWithout), entry("odd", "Update", "v1alpha1", `{"f:spec":{"f:nosuch":{}}}`)),
		},
		wantSpec: resurrected,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := deepCopy(tt.w.Object).(map[string]any)
			removeDropped(tt.w, obj, "spec")
			if diff := cmp.Diff(tt.wantSpec, obj["spec"]); diff != "" {
				t.Errorf("spec after the apply (-want +got):\n%s", diff)
			}
		})
	}
}
