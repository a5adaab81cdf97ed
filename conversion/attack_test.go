package conversion

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// forgedLeaves is a preserved-fields annotation whose patch holds n keys no Task has, under part
// (spec or status): n hidden "fields" for restoreHidden to try one by one.
func forgedLeaves(part string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"v":2,"spec":"x","status":"y","patch":{%q:{`, part)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	b.WriteString(`}}}`)
	return b.String()
}

// TestAttackForgedLeavesCostBoundedWork: a client writing at an old version sends an annotation of
// a few thousand unknown keys (well under maxPreservedValues and the 256 KiB annotation limit)
// with a large visible field. restoreHidden then re-encodes and re-decodes the whole body once per
// key (the "keep the others, one by one" fallback): 2,000 keys and a 64 KiB script took 4 s of
// CPU and gigabytes of allocation; 19,000 keys and a 2 MiB status.lastError (the apiserver
// converts before it validates, so only its 3 MiB request limit applies) take tens of minutes.
// One write by anyone allowed to update a Task pins a webhook replica. The work must not grow
// with the number of keys a client invents.
func TestAttackForgedLeavesCostBoundedWork(t *testing.T) {
	cases := []struct {
		name, part string
		spec       map[string]any
		status     map[string]any
	}{
		{"spec keys, 64 KiB script", "spec",
			map[string]any{"type": "shell", "shell": strings.Repeat("e", 64<<10), "replicas": int64(1), "maxRetry": int64(0)}, nil},
		{"status keys, 256 KiB lastError", "status",
			map[string]any{"type": "shell", "shell": "echo", "replicas": int64(1), "maxRetry": int64(0)},
			map[string]any{"lastError": strings.Repeat("e", 256<<10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "example.com/v1alpha1", "kind": "Task",
				"metadata": map[string]any{"name": "slow", "namespace": "ns",
					"annotations": map[string]any{PreservedAnnotation: forgedLeaves(tc.part, 1000)}},
				"spec": tc.spec,
			}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _ = Convert(obj, hubVersion) // refused or converted: either is fine, cheaply
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %v, %d MiB allocated", tc.name, took, allocated>>20)
			if limit := uint64(64 << 20); allocated > limit {
				t.Fatalf("converting one object with a forged annotation of 1,000 keys allocated %d MiB (took %v); want under %d MiB",
					allocated>>20, took, limit>>20)
			}
		})
	}
}

// TestHubPathsKnowEveryField pins hubPaths to the hub's JSON: every path of a fully populated
// Task is in it, and nothing below a leaf is.
func TestHubPathsKnowEveryField(t *testing.T) {
	obj := hubObject(t, richHub("echo"))
	setAt(obj, "spec.runner.http", map[string]any{"url": "https://a/", "method": "GET", "headers": []any{}, "body": "b", "timeout": "1s", "acceptedStatusCodes": []any{}})
	var walk func(m map[string]any, at path)
	walk = func(m map[string]any, at path) {
		for k, v := range m {
			p := join(at, k)
			if !hubPaths[p] {
				t.Errorf("%s is a field of the hub, missing from hubPaths", p)
			}
			if sub, ok := v.(map[string]any); ok {
				walk(sub, p)
			}
		}
	}
	walk(bodyOf(obj), "")
	for _, p := range []path{"spec.retry.backoff.max", "status.currentRun.job.uid", "status.observedSchedule.since", "status.conditions"} {
		if !hubPaths[p] {
			t.Errorf("%s missing from hubPaths", p)
		}
	}
	for _, p := range []path{"spec.timeout.Duration", "status.startTime.Time", "spec.k1", "metadata", "spec.runner.shell.env.name"} {
		if hubPaths[p] {
			t.Errorf("%s is not a field of the hub, but in hubPaths", p)
		}
	}
}

// TestAttackEditKeepsUntouchedVisibleFields: README rule 4 says an edit at an old version changes
// what it edits; only a visible field the edit touched is respelled. But once a part (spec or
// status) is edited, every visible field is rebuilt from the old version's typed form, so fields
// the edit never touched change too: a sub-second timestamp is truncated, an attempts count the
// v1alpha1 mapping cannot tell from its default is invented, an explicit empty header value is
// dropped.
func TestAttackEditKeepsUntouchedVisibleFields(t *testing.T) {
	tests := []struct {
		name    string
		task    func() map[string]any
		version string
		kind    writeKind
		edit    func(map[string]any)
		at      path
	}{{
		name: "v1alpha1 status write keeps a sub-second lastPhaseTransitionTime (lastUpdateTime)", version: alpha, kind: updateStatus,
		task: func() map[string]any {
			stored := store(t, richHub("echo"))
			setAt(stored, "status.lastPhaseTransitionTime", "2026-01-02T03:04:05.678Z")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.lastPhaseTransitionTime",
	}, {
		name: "v1beta1 status write keeps a sub-second startTime", version: beta, kind: updateStatus,
		task: func() map[string]any {
			stored := store(t, richHub("echo"))
			setAt(stored, "status.startTime", "2026-01-02T03:04:05.678Z")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.startTime",
	}, {
		name: "v1alpha1 status write does not invent attempts", version: alpha, kind: updateStatus,
		task: func() map[string]any {
			stored := store(t, richHub("echo"))
			delete(stored["status"].(map[string]any), "attempts")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.attempts",
	}, {
		name: "v1beta1 spec write keeps an explicit empty header value", version: beta, kind: updateMain,
		task: func() map[string]any {
			stored := store(t, httpHub())
			setAt(stored, "spec.runner.http.headers", []any{map[string]any{"name": "X-Empty", "value": ""}})
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "spec.maxRetries", int64(7)) },
		at:   "spec.runner.http.headers",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := tt.task()
			got := mustWrite(t, stored, tt.version, tt.kind, tt.edit)
			want, _ := lookup(stored, tt.at)
			have, _ := lookup(got, tt.at)
			if fingerprint(want) != fingerprint(have) {
				t.Errorf("%s was %v, the edit did not touch it, stored %v", tt.at, want, have)
			}
		})
	}
}
