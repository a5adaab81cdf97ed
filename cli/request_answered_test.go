package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	taskv1 "example.com/task-operator/apis/v1"
)

// TestRequestCommandsSendWhatTheOperatorActsOn: each request command, on a Task as its status
// and annotations stand, sends the request the operator will act on when the plugin says, or
// sends nothing and says why: a request at or before what the operator answered (a clock behind
// the operator's) would be ignored; a request set by hand far ahead is left for its time, not
// followed; a suspended Task starts its run once resumed.
func TestRequestCommandsSendWhatTheOperatorActsOn(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	tomorrow := 33 * time.Hour
	active := map[string]any{"attempt": int64(1), "outcome": "Active", "job": map[string]any{"name": "nightly-0-1"},
		"scheduledTime": at(-time.Minute)}
	for _, tc := range []struct {
		name        string
		kind        requestKind
		scheduled   bool
		suspended   bool
		annotations map[string]any
		status      map[string]any
		wantSent    string // the annotation's value; "" when nothing may be sent
		wantOut     string // a part of what is printed, or of the error when nothing is sent
	}{
		{name: "rerun behind the request the operator answered", kind: rerunRequest,
			status:  map[string]any{"phase": "Succeeded", "runRequest": at(20 * time.Second)},
			wantOut: `task "nightly" in namespace "default": a run requested at ` + at(0) + ` is answered already by the run of ` + at(20*time.Second)},
		{name: "run behind the run the operator started, beside a request not started yet", kind: runRequest, scheduled: true,
			annotations: map[string]any{taskv1.AnnotationRunRequested: at(40 * time.Second)},
			status:      map[string]any{"phase": "Running", "currentRun": map[string]any{"attempt": int64(1), "outcome": "Active", "job": map[string]any{"name": "nightly-0-1"}, "scheduledTime": at(30 * time.Second)}},
			wantOut:     `task "nightly" in namespace "default": a run requested at ` + at(0) + ` is answered already by the run of ` + at(30*time.Second) + `: it would start nothing; the request of ` + at(40*time.Second) + `, not started yet, stands`},
		{name: "cancel behind a cancel the operator honoured a little ahead", kind: cancelRequest,
			status:   map[string]any{"phase": "Running", "cancelRequest": at(20 * time.Second), "currentRun": active},
			wantSent: at(21 * time.Second), wantOut: "the active run's Jobs are deleted"},
		{name: "cancel behind a cancel the operator honoured far ahead", kind: cancelRequest,
			status:  map[string]any{"phase": "Running", "cancelRequest": at(tomorrow), "currentRun": active},
			wantOut: `task "nightly" in namespace "default": a cancel requested at ` + at(0) + ` is not later than the cancel of ` + at(tomorrow)},
		{name: "cancel beside a run request set for tomorrow", kind: cancelRequest, scheduled: true,
			annotations: map[string]any{taskv1.AnnotationRunRequested: at(tomorrow)},
			status:      map[string]any{"phase": "Running", "currentRun": active},
			wantSent:    at(0), wantOut: "the active run's Jobs are deleted"},
		{name: "cancel beside a run request a second ahead", kind: cancelRequest, scheduled: true,
			annotations: map[string]any{taskv1.AnnotationRunRequested: at(time.Second)},
			status:      map[string]any{"phase": "Running", "currentRun": active},
			wantSent:    at(2 * time.Second), wantOut: "cancel requested at " + at(2*time.Second)},
		{name: "rerun beside a cancel set for tomorrow", kind: rerunRequest,
			annotations: map[string]any{taskv1.AnnotationCancelRequested: at(tomorrow)},
			status:      map[string]any{"phase": "Succeeded"},
			wantSent:    at(0), wantOut: "it starts now as Job nightly-" + strconv.FormatInt(now.Unix(), 10) + "-1"},
		{name: "rerun beside a cancel a second ahead", kind: rerunRequest,
			annotations: map[string]any{taskv1.AnnotationCancelRequested: at(time.Second)},
			status:      map[string]any{"phase": "Succeeded"},
			wantSent:    at(2 * time.Second), wantOut: "it starts now"},
		{name: "run of a suspended scheduled Task", kind: runRequest, scheduled: true, suspended: true,
			status:   map[string]any{"phase": "Suspended"},
			wantSent: at(0), wantOut: "it starts once the Task is resumed as Job nightly-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "echo"}}}
			if tc.scheduled {
				spec["schedule"] = map[string]any{"cron": "@every 1h"}
			}
			if tc.suspended {
				spec["suspend"] = true
			}
			task := map[string]any{"apiVersion": "example.com/v1", "kind": "Task",
				"metadata": map[string]any{"name": "nightly", "namespace": "default", "annotations": tc.annotations},
				"spec":     spec, "status": tc.status}
			sent, out, err := sendRequest(t, task, tc.kind, now)
			key := taskv1.AnnotationRunRequested
			if tc.kind == cancelRequest {
				key = taskv1.AnnotationCancelRequested
			}
			if tc.wantSent == "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantOut) || sent != nil {
					t.Errorf("sent %v, printed %q, error %v; want nothing sent and an error starting %q", sent, out, err, tc.wantOut)
				}
				return
			}
			if err != nil || sent[key] != tc.wantSent || !strings.Contains(out, tc.wantOut) {
				t.Errorf("sent %v, printed %q, error %v; want %s: %s and a line saying %q", sent, out, err, key, tc.wantSent, tc.wantOut)
			}
		})
	}
}

// sendRequest runs the request command kind on obj, held by a fake API server, at now: the
// annotations it patched (nil if it sent no patch), what it printed and its error.
func sendRequest(t *testing.T, obj map[string]any, kind requestKind, now time.Time) (map[string]string, string, error) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "tasks"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "TaskList"}, &unstructured.Unstructured{Object: obj})
	c := &clients{namespace: "default", tasks: dyn.Resource(gvr)}
	var out bytes.Buffer
	err := runRequestCommand(context.Background(), c, "nightly", kind, now, &out)
	var sent map[string]string
	for _, a := range dyn.Actions() {
		patch, ok := a.(k8stesting.PatchAction)
		if !ok {
			continue
		}
		var body struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		sent = body.Metadata.Annotations
	}
	return sent, out.String(), err
}
