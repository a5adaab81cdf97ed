package conversion

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/sample"
)

// The apiserver's handling of a write at an old version, step by step, as documented in
// shared/architecture.md and verified on the real apiserver by the e2e tests: the stored object
// is read at the request's version, the client's object and the old one are converted to v1 for
// admission, the webhook decides, the result is converted back, the strategy resets what the
// endpoint may not change, and the object is converted to v1 for storage.

type writeKind int

const (
	createMain writeKind = iota
	updateMain
	updateStatus
)

// simulateWrite returns what the apiserver stores when a client at version reads stored (nil for
// a create), changes it with edit, and writes it back with kind.
func simulateWrite(t testing.TB, stored map[string]any, version string, kind writeKind, edit func(obj map[string]any)) (map[string]any, error) {
	t.Helper()
	var read map[string]any
	if stored != nil {
		read = mustConvert(t, stored, version)
	}
	client := map[string]any{}
	if read != nil {
		client = deepCopy(read).(map[string]any)
	}
	edit(client)
	object, err := Convert(reencode(t, client), hubVersion)
	if err != nil {
		return nil, err
	}
	w := Write{Version: version, Create: kind == createMain, Status: kind == updateStatus, Object: reencode(t, object)}
	if read != nil {
		w.OldObject = mustConvert(t, read, hubVersion)
	}
	decided, err := Decide(w)
	if err != nil {
		return nil, err
	}
	back := mustConvert(t, reencode(t, decided), version)
	switch kind {
	case createMain:
		delete(back, "status")
	case updateMain:
		replaceBody(back, body{"spec": back["spec"], "status": read["status"]})
		if read["status"] == nil {
			delete(back, "status")
		}
	case updateStatus:
		status, ok := back["status"]
		back = deepCopy(read).(map[string]any)
		if ok {
			back["status"] = status
		} else {
			delete(back, "status")
		}
	}
	return mustConvert(t, back, hubVersion), nil
}

const (
	alpha = "v1alpha1"
	beta  = "v1beta1"
)

// store creates task at v1 and writes its status, as a user and the operator would, and returns
// what the apiserver holds.
func store(t testing.TB, task *taskv1.Task) map[string]any {
	t.Helper()
	obj := hubObject(t, task)
	status := compact(bodyOf(obj))["status"]
	created, err := simulateWrite(t, nil, hubVersion, createMain, func(o map[string]any) {
		for k, v := range obj {
			o[k] = deepCopy(v)
		}
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if status == nil {
		return created
	}
	stored, err := simulateWrite(t, created, hubVersion, updateStatus, func(o map[string]any) { o["status"] = deepCopy(status) })
	if err != nil {
		t.Fatalf("write status: %v", err)
	}
	return stored
}

func mustWrite(t *testing.T, stored map[string]any, version string, kind writeKind, edit func(map[string]any)) map[string]any {
	t.Helper()
	out, err := simulateWrite(t, stored, version, kind, edit)
	if err != nil {
		t.Fatalf("write at %s: %v", version, err)
	}
	return out
}

// scheduledHub is a scheduled Task that left its history limits to the defaults.
func scheduledHub() *taskv1.Task {
	task := sample.SimpleTask()
	task.Spec.Schedule = &taskv1.Schedule{Cron: "@daily"}
	return task
}

func get(t testing.TB, obj map[string]any, p path) any {
	t.Helper()
	v, _ := lookup(obj, p)
	return v
}

func TestUnchangedWritesAreByteExact(t *testing.T) {
	for _, version := range []string{alpha, beta} {
		for _, kind := range []writeKind{updateMain, updateStatus} {
			rnd := rand.New(rand.NewPCG(uint64(kind), 7))
			for _, task := range []*taskv1.Task{sample.RichTask("echo hi"), sample.HTTPTask(), sample.SimpleTask()} {
				obj := store(t, task)
				respell(rnd, obj)
				got := mustWrite(t, obj, version, kind, func(map[string]any) {})
				requireSameBody(t, fmt.Sprintf("PUT back unchanged at %s (kind %d)", version, kind), obj, got)
			}
		}
	}
}

// forged is a preserved annotation a client wrote itself: a different script, image and
// parallelism, and a status that says the Task already succeeded.
func forged(t testing.TB, version string) string {
	t.Helper()
	p := &preserved{Format: preservedFormat, Patch: body{
		"spec": map[string]any{
			"runner":      map[string]any{"shell": map[string]any{"image": "evil:latest", "env": []any{map[string]any{"name": "X", "value": "rm -rf /data"}}}},
			"timeout":     "-5s",
			"parallelism": int64(50000),
			"schedule":    map[string]any{"cron": "* * * * *"},
		},
		"status": map[string]any{"phase": "Succeeded", "conditions": []any{map[string]any{"type": "Succeeded", "status": "True", "reason": "Forged", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}},
	}}
	// Fingerprints that match whatever the client sends do not help a forger either.
	value, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	return value
}

func withAnnotation(value string) func(map[string]any) {
	return func(o map[string]any) {
		meta := o["metadata"].(map[string]any)
		setAnnotation(meta, PreservedAnnotation, value)
	}
}

func TestForgedAnnotationSetsNothing(t *testing.T) {
	for _, version := range []string{alpha, beta} {
		t.Run(version+"/update", func(t *testing.T) {
			obj := store(t, sample.RichTask("echo hi"))
			got := mustWrite(t, obj, version, updateMain, withAnnotation(forged(t, version)))
			requireSameBody(t, "forged annotation on update", obj, got)
		})
		t.Run(version+"/status", func(t *testing.T) {
			obj := store(t, sample.RichTask("echo hi"))
			got := mustWrite(t, obj, version, updateStatus, withAnnotation(forged(t, version)))
			requireSameBody(t, "forged annotation on a status write", obj, got)
		})
		t.Run(version+"/create", func(t *testing.T) {
			plain := sample.SimpleTask()
			spoke := mustConvert(t, hubObject(t, plain), version)
			got := mustWrite(t, nil, version, createMain, func(o map[string]any) {
				for k, v := range spoke {
					o[k] = deepCopy(v)
				}
				withAnnotation(forged(t, version))(o)
				if version == alpha {
					o["status"] = map[string]any{"state": "Succeeded"}
				} else {
					o["status"] = map[string]any{"phase": "Succeeded"}
				}
			})
			want := store(t, plain)
			requireSameBody(t, "forged annotation on create", want, got)
			if _, ok := got["status"]; ok {
				t.Fatalf("create at %s set status: %v", version, got["status"])
			}
		})
	}
}

func deleteAnnotation(o map[string]any) {
	meta := o["metadata"].(map[string]any)
	delete(meta, "annotations")
}

// TestOldVersionEditsKeepHiddenFields edits a Task at an old version in the ways clients do and
// checks what is stored, field by field.
func TestOldVersionEditsKeepHiddenFields(t *testing.T) {
	type check struct {
		at   path
		want any // nil: absent
	}
	unchangedHidden := func(stored map[string]any) []check {
		var out []check
		for _, p := range []path{"spec.runner.shell.image", "spec.runner.shell.env", "spec.retry.backoff", "spec.schedule",
			"spec.timeout", "spec.ttlSecondsAfterFinished", "spec.successfulJobsHistoryLimit", "status.conditions", "status.lastJob.uid", "status.activeJobs"} {
			out = append(out, check{p, get(t, stored, p)})
		}
		return out
	}
	tests := []struct {
		name    string
		task    *taskv1.Task
		version string
		kind    writeKind
		edit    func(stored map[string]any) func(map[string]any)
		checks  func(stored map[string]any) []check
	}{{
		name: "v1alpha1 replicas edited, annotation deleted (kubectl annotate -)", task: sample.RichTask("echo hi"), version: alpha, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { deleteAnnotation(o); setAt(o, "spec.replicas", int64(5)) }
		},
		checks: func(stored map[string]any) []check {
			return append(unchangedHidden(stored), check{"spec.parallelism", int64(5)})
		},
	}, {
		name: "v1beta1 stale annotation from an exported manifest", task: sample.RichTask("echo hi"), version: beta, kind: updateMain,
		edit: func(stored map[string]any) func(map[string]any) {
			older := deepCopy(stored).(map[string]any)
			setAt(older, "spec.schedule.timeZone", "UTC")
			setAt(older, "spec.runner.shell.env", []any{})
			stale := mustConvert(t, older, beta)
			value := preservedValue(stale)
			return func(o map[string]any) { withAnnotation(value)(o); setAt(o, "spec.maxRetries", int64(9)) }
		},
		checks: func(stored map[string]any) []check {
			return append(unchangedHidden(stored), check{"spec.retry.maxRetries", int64(9)})
		},
	}, {
		name: "v1alpha1 main-resource write cannot set status", task: sample.RichTask("echo hi"), version: alpha, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "status.state", "Succeeded"); setAt(o, "status.retryCount", int64(7)) }
		},
		checks: func(stored map[string]any) []check {
			return append(unchangedHidden(stored), check{"status.phase", get(t, stored, "status.phase")}, check{"status.attempts", get(t, stored, "status.attempts")})
		},
	}, {
		name: "v1alpha1 new URL resets the hidden request", task: sample.HTTPTask(), version: alpha, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "spec.url", "https://elsewhere.example/x") }
		},
		checks: func(map[string]any) []check {
			return []check{
				{"spec.runner.http.url", "https://elsewhere.example/x"}, {"spec.runner.http.method", "GET"},
				{"spec.runner.http.headers", nil}, {"spec.runner.http.body", nil}, {"spec.runner.http.timeout", "30s"},
				{"spec.runner.http.acceptedStatusCodes", nil},
			}
		},
	}, {
		name: "v1alpha1 same URL keeps the hidden request", task: sample.HTTPTask(), version: alpha, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { deleteAnnotation(o); setAt(o, "spec.maxRetry", int64(1)) }
		},
		checks: func(stored map[string]any) []check {
			return []check{{"spec.runner.http", get(t, stored, "spec.runner.http")}, {"spec.retry.maxRetries", int64(1)}}
		},
	}, {
		name: "v1beta1 new URL resets body, timeout and codes but keeps what v1beta1 shows", task: sample.HTTPTask(), version: beta, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "spec.runner.http.url", "https://elsewhere.example/x") }
		},
		checks: func(stored map[string]any) []check {
			return []check{
				{"spec.runner.http.method", "POST"}, {"spec.runner.http.headers", get(t, stored, "spec.runner.http.headers")},
				{"spec.runner.http.body", nil}, {"spec.runner.http.timeout", "30s"}, {"spec.runner.http.acceptedStatusCodes", nil},
			}
		},
	}, {
		name: "v1alpha1 runner switched from shell to http", task: sample.RichTask("echo hi"), version: alpha, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) {
				setAt(o, "spec.type", "http")
				delete(o["spec"].(map[string]any), "shell")
				setAt(o, "spec.url", "https://a.example/")
			}
		},
		checks: func(stored map[string]any) []check {
			return []check{
				{"spec.runner.shell", nil}, {"spec.runner.type", "HTTP"},
				{"spec.runner.http", map[string]any{"url": "https://a.example/", "method": "GET", "timeout": "30s"}},
				{"spec.schedule", get(t, stored, "spec.schedule")},
			}
		},
	}, {
		name: "v1beta1 schedule removed takes its time zone with it", task: sample.RichTask("echo hi"), version: beta, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { delete(o["spec"].(map[string]any), "schedule") }
		},
		checks: func(stored map[string]any) []check {
			return []check{{"spec.schedule", nil}, {"spec.timeout", get(t, stored, "spec.timeout")}}
		},
	}, {
		name: "v1beta1 schedule removed keeps the history limits it was defaulted with", task: scheduledHub(), version: beta, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { delete(o["spec"].(map[string]any), "schedule") }
		},
		checks: func(map[string]any) []check {
			return []check{{"spec.schedule", nil}, {"spec.successfulJobsHistoryLimit", int64(3)}, {"spec.failedJobsHistoryLimit", int64(1)}}
		},
	}, {
		name: "v1beta1 cron changed keeps time zone and policy", task: sample.RichTask("echo hi"), version: beta, kind: updateMain,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "spec.schedule", "30 3 * * *") }
		},
		checks: func(stored map[string]any) []check {
			return []check{
				{"spec.schedule.cron", "30 3 * * *"}, {"spec.schedule.timeZone", "Europe/Paris"},
				{"spec.schedule.concurrencyPolicy", "Forbid"}, {"spec.schedule.startingDeadlineSeconds", int64(30)},
			}
		},
	}, {
		name: "v1alpha1 status write with another Job drops the old Job's UID", task: sample.RichTask("echo hi"), version: alpha, kind: updateStatus,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "status.lastJobName", "rich-9") }
		},
		checks: func(stored map[string]any) []check {
			return []check{
				{"status.lastJob", map[string]any{"name": "rich-9"}}, {"status.conditions", get(t, stored, "status.conditions")},
				{"spec", get(t, stored, "spec")},
			}
		},
	}, {
		name: "v1beta1 status write cannot change spec", task: sample.RichTask("echo hi"), version: beta, kind: updateStatus,
		edit: func(map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "spec.parallelism", int64(40)); setAt(o, "status.phase", "Running") }
		},
		checks: func(stored map[string]any) []check {
			return []check{{"spec", get(t, stored, "spec")}, {"status.phase", "Running"}, {"status.lastJob", get(t, stored, "status.lastJob")}}
		},
	}, {
		name: "spellings of untouched hidden fields survive an edit", task: sample.RichTask("echo hi"), version: alpha, kind: updateMain,
		edit: func(stored map[string]any) func(map[string]any) {
			return func(o map[string]any) { setAt(o, "spec.shell", "echo changed") }
		},
		checks: func(stored map[string]any) []check {
			return []check{{"spec.timeout", "30m"}, {"spec.retry.backoff.max", "60s"}, {"spec.runner.shell.script", "echo changed"}}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := store(t, tt.task)
			setAt(stored, "spec.timeout", "30m")
			setAt(stored, "spec.retry.backoff.max", "60s")
			got := mustWrite(t, stored, tt.version, tt.kind, tt.edit(stored))
			for _, c := range tt.checks(stored) {
				if diff := cmp.Diff(c.want, get(t, got, c.at)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.at, diff)
				}
			}
			if _, err := Convert(deepCopy(got).(map[string]any), alpha); err != nil {
				t.Errorf("stored Task cannot be read at v1alpha1: %v", err)
			}
			if preservedValue(got) != "" {
				t.Errorf("the preserved annotation was stored")
			}
		})
	}
}

// TestV1WritesDropTheAnnotationAndKeepSpellings: an annotation set at v1 never survives to be
// applied by a later old-version write, and a v1 write is stored as written plus defaults.
func TestV1WritesDropTheAnnotationAndKeepSpellings(t *testing.T) {
	task := sample.RichTask("echo ok")
	task.Annotations[PreservedAnnotation] = forged(t, alpha)
	obj := hubObject(t, task)
	setAt(obj, "spec.timeout", "90s")
	setAt(obj, "spec.suspend", false)
	delete(obj["spec"].(map[string]any), "successfulJobsHistoryLimit")
	got := mustWrite(t, nil, hubVersion, createMain, func(o map[string]any) {
		for k, v := range obj {
			o[k] = deepCopy(v)
		}
	})
	if preservedValue(got) != "" {
		t.Fatal("a preserved annotation written at v1 was stored")
	}
	for _, c := range []struct {
		at   path
		want any
	}{{"spec.timeout", "90s"}, {"spec.suspend", false}, {"spec.successfulJobsHistoryLimit", int64(3)}, {"spec.runner.shell.script", "echo ok"}} {
		if diff := cmp.Diff(c.want, get(t, got, c.at)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.at, diff)
		}
	}
	// The next old-version write does not bring anything of it back.
	later := mustWrite(t, got, alpha, updateMain, func(o map[string]any) { withAnnotation(forged(t, alpha))(o) })
	requireSameBody(t, "old-version write after a v1 write", got, later)
}

func preservedValue(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	value, _ := annotations[PreservedAnnotation].(string)
	return value
}

// TestDefaultsNeverReplaceAValue: a value the typed form cannot tell from unset (parallelism 0)
// is left for validation to refuse, not defaulted into a valid one.
func TestDefaultsNeverReplaceAValue(t *testing.T) {
	obj := hubObject(t, sample.SimpleTask())
	setAt(obj, "spec.parallelism", int64(0))
	decided, err := Decide(Write{Version: hubVersion, Create: true, Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, decided, "spec.parallelism"); got != int64(0) {
		t.Fatalf("parallelism %v, want the 0 that was sent", got)
	}
}

// TestOldVersionEditKeepsUntouchedVisibleFields: README rule 4 says an edit at an old version changes
// what it edits; only a visible field the edit touched is respelled. But once a part (spec or
// status) is edited, every visible field is rebuilt from the old version's typed form, so fields
// the edit never touched change too: a sub-second timestamp is truncated, an attempts count the
// v1alpha1 mapping cannot tell from its default is invented, an explicit empty header value is
// dropped.
func TestOldVersionEditKeepsUntouchedVisibleFields(t *testing.T) {
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
			stored := store(t, sample.RichTask("echo"))
			setAt(stored, "status.lastPhaseTransitionTime", "2026-01-02T03:04:05.678Z")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.lastPhaseTransitionTime",
	}, {
		name: "v1beta1 status write keeps a sub-second startTime", version: beta, kind: updateStatus,
		task: func() map[string]any {
			stored := store(t, sample.RichTask("echo"))
			setAt(stored, "status.startTime", "2026-01-02T03:04:05.678Z")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.startTime",
	}, {
		name: "v1alpha1 status write does not invent attempts", version: alpha, kind: updateStatus,
		task: func() map[string]any {
			stored := store(t, sample.RichTask("echo"))
			delete(stored["status"].(map[string]any), "attempts")
			return stored
		},
		edit: func(o map[string]any) { setAt(o, "status.lastError", "boom") },
		at:   "status.attempts",
	}, {
		name: "v1beta1 spec write keeps an explicit empty header value", version: beta, kind: updateMain,
		task: func() map[string]any {
			stored := store(t, sample.HTTPTask())
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
