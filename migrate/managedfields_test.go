package migrate

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

const (
	alpha = "example.com/v1alpha1"
	beta  = "example.com/v1beta1"
	hub   = "example.com/v1"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, apiVersion, subresource string, at time.Time, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: apiVersion, Subresource: subresource,
		Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

const (
	apply  = metav1.ManagedFieldsOperationApply
	update = metav1.ManagedFieldsOperationUpdate
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// requireEntries compares entries with want, the sets as sets.
func requireEntries(t *testing.T, got, want []metav1.ManagedFieldsEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d:\n%s", len(got), len(want), entriesText(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		gs, ws := setOf(t, g), setOf(t, w)
		if !gs.Equals(ws) {
			gj, _ := gs.ToJSON()
			wj, _ := ws.ToJSON()
			t.Errorf("entry %d (%s %s %s): fields\n got %s\nwant %s", i, g.Manager, g.Operation, g.Subresource, gj, wj)
		}
		g.FieldsV1, w.FieldsV1 = nil, nil
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("entry %d (-want +got):\n%s", i, d)
		}
	}
}

func setOf(t *testing.T, e metav1.ManagedFieldsEntry) *fieldpath.Set {
	t.Helper()
	s := &fieldpath.Set{}
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		t.Fatalf("entry of %s: %v", e.Manager, err)
	}
	return s
}

func entriesText(es []metav1.ManagedFieldsEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %s %s %s %q %v %s\n", e.Manager, e.Operation, e.APIVersion, e.Subresource, e.Time, e.FieldsV1.Raw)
	}
	return b.String()
}

func TestMovedManagedFieldsTranslatesV1alpha1(t *testing.T) {
	in := []metav1.ManagedFieldsEntry{
		entry("kubectl", apply, alpha, "", t0, `{"f:metadata":{"f:labels":{"f:team":{}},"f:annotations":{"f:note":{},"f:task.example.com/preserved-v1-fields":{}}},`+
			`"f:spec":{"f:type":{},"f:shell":{},"f:replicas":{},"f:maxRetry":{},"f:url":{}}}`),
		entry("old-operator", update, alpha, "status", t0, `{"f:status":{".":{},"f:state":{},"f:lastJobName":{},"f:retryCount":{},"f:lastError":{},"f:lastUpdateTime":{}}}`),
	}
	out, moved, err := movedManagedFields(in)
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{
		entry("kubectl", apply, hub, "", t0, `{"f:metadata":{"f:labels":{"f:team":{}},"f:annotations":{"f:note":{}}},`+
			`"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}},"f:http":{"f:url":{}}},"f:parallelism":{},"f:retry":{"f:maxRetries":{}}}}`),
		entry("old-operator", update, hub, "status", t0, `{"f:status":{".":{},"f:phase":{},"f:lastJob":{"f:name":{}},"f:attempts":{},"f:lastError":{},"f:lastPhaseTransitionTime":{}}}`),
	})
	// Moving again is a no-op: everything is at v1.
	again, moved, err := movedManagedFields(out)
	if err != nil || moved {
		t.Fatalf("second move: moved %v, err %v", moved, err)
	}
	requireEntries(t, again, out)
}

func TestMovedManagedFieldsTranslatesV1beta1(t *testing.T) {
	in := []metav1.ManagedFieldsEntry{
		entry("gitops", apply, beta, "", t0, `{"f:spec":{"f:runner":{"f:type":{},"f:http":{"f:url":{},"f:method":{},`+
			`"f:headers":{"k:{\"name\":\"Accept\"}":{".":{},"f:name":{},"f:value":{}}}}},`+
			`"f:parallelism":{},"f:maxRetries":{},"f:schedule":{},"f:suspend":{}}}`),
		entry("beta-operator", update, beta, "status", t0, `{"f:status":{"f:observedGeneration":{},"f:phase":{},"f:attempts":{},"f:lastJobName":{},"f:lastError":{},`+
			`"f:startTime":{},"f:completionTime":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{},"f:message":{},"f:lastTransitionTime":{},"f:observedGeneration":{}}}}}`),
		// An object that was empty: the member is the object itself.
		entry("shell-user", update, beta, "", t0, `{"f:spec":{"f:runner":{"f:shell":{".":{},"f:image":{}}}}}`),
	}
	out, moved, err := movedManagedFields(in)
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{
		entry("gitops", apply, hub, "", t0, `{"f:spec":{"f:runner":{"f:type":{},"f:http":{"f:url":{},"f:method":{},`+
			`"f:headers":{"k:{\"name\":\"Accept\"}":{".":{},"f:name":{},"f:value":{}}}}},`+
			`"f:parallelism":{},"f:retry":{"f:maxRetries":{}},"f:schedule":{"f:cron":{}},"f:suspend":{}}}`),
		entry("beta-operator", update, hub, "status", t0, `{"f:status":{"f:observedGeneration":{},"f:phase":{},"f:attempts":{},"f:lastJob":{"f:name":{}},"f:lastError":{},`+
			`"f:startTime":{},"f:completionTime":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{},"f:message":{},"f:lastTransitionTime":{},"f:observedGeneration":{}}}}}`),
		entry("shell-user", update, hub, "", t0, `{"f:spec":{"f:runner":{"f:shell":{".":{},"f:image":{}}}}}`),
	})
}

// TestMovedManagedFieldsMergesWhatTheApiserverWouldConfuse: a manager that applied at v1alpha1
// and updated at v1beta1 and at v1 has, once moved, two Update entries at v1 with the same
// identity for the apiserver: they become one, owning both sets, with the later time. Its Apply
// entry stays apart (another identity), and so do its status-subresource entries.
func TestMovedManagedFieldsMergesWhatTheApiserverWouldConfuse(t *testing.T) {
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	in := []metav1.ManagedFieldsEntry{
		entry("mixed", apply, alpha, "", t0, `{"f:spec":{"f:type":{},"f:shell":{}}}`),
		entry("mixed", update, beta, "", t2, `{"f:spec":{"f:suspend":{},"f:maxRetries":{}}}`),
		entry("mixed", update, hub, "", t1, `{"f:spec":{"f:timeout":{},"f:retry":{"f:backoff":{"f:initial":{}}}}}`),
		entry("mixed", update, alpha, "status", t1, `{"f:status":{"f:state":{}}}`),
		entry("mixed", update, hub, "status", t0, `{"f:status":{"f:phase":{},"f:nextRunTime":{}}}`),
	}
	out, moved, err := movedManagedFields(in)
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{
		entry("mixed", apply, hub, "", t0, `{"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}}}}`),
		entry("mixed", update, hub, "", t2, `{"f:spec":{"f:suspend":{},"f:timeout":{},"f:retry":{"f:maxRetries":{},"f:backoff":{"f:initial":{}}}}}`),
		entry("mixed", update, hub, "status", t1, `{"f:status":{"f:phase":{},"f:nextRunTime":{}}}`),
	})
}

// TestMovedManagedFieldsRefusesWhatItCannotTranslate: any path, version or encoding it does not
// know leaves the whole list alone, with a reason naming the entry and the path.
func TestMovedManagedFieldsRefusesWhatItCannotTranslate(t *testing.T) {
	ok := entry("fine", apply, alpha, "", t0, `{"f:spec":{"f:type":{}}}`)
	for _, tc := range []struct {
		name string
		bad  metav1.ManagedFieldsEntry
		want string
	}{
		{"unknown spec field", entry("m", apply, alpha, "", t0, `{"f:spec":{"f:type":{},"f:bogus":{}}}`), `manager "m" (Apply at example.com/v1alpha1): path .spec.bogus has no counterpart`},
		{"v1 name at the old version", entry("m", update, beta, "", t0, `{"f:spec":{"f:schedule":{"f:cron":{}}}}`), `.spec.schedule.cron has no counterpart`},
		{"list item below a plain field", entry("m", update, alpha, "", t0, `{"f:spec":{"f:shell":{"k:{\"name\":\"x\"}":{}}}}`), `has no counterpart`},
		{"unknown top-level field", entry("m", update, alpha, "", t0, `{"f:extra":{}}`), `.extra has no counterpart`},
		{"status subresource", entry("m", update, beta, "status", t0, `{"f:status":{"f:lastJob":{}}}`), `(Update of /status at example.com/v1beta1): path .status.lastJob`},
		{"unknown version", entry("m", update, "example.com/v2", "", t0, `{"f:spec":{}}`), `example.com/v2 has no field map`},
		{"another group", entry("m", update, "other.example.com/v1alpha1", "", t0, `{"f:spec":{}}`), `not a version of example.com`},
		{"fields type", metav1.ManagedFieldsEntry{Manager: "m", Operation: update, APIVersion: beta, FieldsType: "FieldsV2"}, `fieldsType "FieldsV2"`},
		{"malformed fields", entry("m", update, beta, "", t0, `{"f:spec":`), `fieldsV1 does not decode`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, moved, err := movedManagedFields([]metav1.ManagedFieldsEntry{ok, tc.bad})
			if err == nil || moved || out != nil {
				t.Fatalf("moved %v, out %v, err %v; want an error", moved, out, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestMovedManagedFieldsNothingToDo: no entries, or all at v1 (also ones the table would not
// know: they are not translated), come back as they are.
func TestMovedManagedFieldsNothingToDo(t *testing.T) {
	v1 := []metav1.ManagedFieldsEntry{entry("m", update, hub, "", t0, `{"f:spec":{"f:anything":{}}}`)}
	for _, in := range [][]metav1.ManagedFieldsEntry{nil, {}, v1} {
		out, moved, err := movedManagedFields(in)
		if err != nil || moved || len(out) != len(in) {
			t.Errorf("%v: moved %v, %d entries, err %v", in, moved, len(out), err)
		}
	}
}

// TestMovedManagedFieldsOnlyTheAnnotation: an entry that owned nothing but the preserved-fields
// annotation owns nothing at v1; it is kept empty, for the apiserver to drop (it drops every
// empty set), rather than removed, so that a list never becomes empty (an empty list in an
// update would make the apiserver keep the stored one).
func TestMovedManagedFieldsOnlyTheAnnotation(t *testing.T) {
	in := []metav1.ManagedFieldsEntry{entry("m", apply, alpha, "", t0, `{"f:metadata":{"f:annotations":{"f:task.example.com/preserved-v1-fields":{}}}}`)}
	out, moved, err := movedManagedFields(in)
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{entry("m", apply, hub, "", t0, `{}`)})
}

// TestRunMovesManagedFields runs the migration on fakes: Tasks with entries at old versions
// are written with them moved; a Task with an entry it cannot translate is written with its
// managedFields as they were and reported; a Task changed between the LIST and its rewrite is
// moved from the fresh copy; a dry run counts without writing; a rerun moves nothing.
func TestRunMovesManagedFields(t *testing.T) {
	ctx := context.Background()
	tasks := newFakeTasks([]string{"ns"}, 4, "v1alpha1")
	set := func(key string, entries ...metav1.ManagedFieldsEntry) {
		o := tasks.objects[key].obj
		o.SetManagedFields(entries)
	}
	set("ns/task-0000", entry("kubectl", apply, alpha, "", t0, `{"f:spec":{"f:shell":{}}}`))
	set("ns/task-0001", entry("kubectl", apply, alpha, "", t0, `{"f:spec":{"f:bogus":{}}}`), entry("ctl", update, beta, "", t0, `{"f:spec":{"f:suspend":{}}}`))
	set("ns/task-0002", entry("ctl", update, beta, "", t0, `{"f:spec":{"f:schedule":{}}}`))
	// task-0003: no managedFields.
	bad := tasks.objects["ns/task-0001"].obj.GetManagedFields()

	// A concurrent writer adds an entry at v1beta1 to task-0002 just before its first rewrite.
	raced := false
	tasks.beforeUpdate = func(key string, obj *unstructured.Unstructured) error {
		if key == "ns/task-0002" && !raced {
			raced = true
			tasks.mu.Lock()
			changed := tasks.objects[key].obj.DeepCopy()
			changed.SetManagedFields(append(changed.GetManagedFields(), entry("late", update, beta, "status", t0, `{"f:status":{"f:phase":{}}}`)))
			_, err := tasks.writeLocked(key, changed)
			tasks.mu.Unlock()
			if err != nil {
				t.Error(err)
			}
		}
		return nil
	}

	var dry bytes.Buffer
	sum, err := runFake(ctx, newFakeCRD("v1", "v1alpha1", "v1"), tasks, Options{DryRun: true, Progress: &dry})
	if err != nil || sum.ManagedFieldsMoved != 2 || sum.ManagedFieldsKept != 1 || tasks.updates != 0 {
		t.Fatalf("dry run: err %v, %+v, %d updates", err, sum, tasks.updates)
	}
	if !strings.Contains(sum.String(), "would be moved to v1 on 2 objects; left as they were on 1") {
		t.Errorf("dry-run summary:\n%s", sum)
	}

	var out bytes.Buffer
	sum, err = runFake(ctx, newFakeCRD("v1", "v1alpha1", "v1"), tasks, Options{Progress: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if sum.Rewritten != 4 || sum.ManagedFieldsMoved != 2 || sum.ManagedFieldsKept != 1 || sum.Conflicts != 1 || !sum.Trimmed {
		t.Errorf("summary: %+v", sum)
	}
	text := sum.String()
	for _, want := range []string{
		"managedFields: entries at old versions moved to v1 on 2 objects; left as they were on 1",
		`managedFields kept: ns/task-0001: the entry of manager "kubectl" (Apply at example.com/v1alpha1): path .spec.bogus has no counterpart at example.com/v1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary does not say %q:\n%s", want, text)
		}
	}
	if !strings.Contains(out.String(), "the managedFields of ns/task-0001 stay as they were") {
		t.Errorf("progress does not report task-0001:\n%s", out.String())
	}

	get := func(key string) []metav1.ManagedFieldsEntry { return tasks.objects[key].obj.GetManagedFields() }
	requireEntries(t, get("ns/task-0000"), []metav1.ManagedFieldsEntry{entry("kubectl", apply, hub, "", t0, `{"f:spec":{"f:runner":{"f:shell":{"f:script":{}}}}}`)})
	requireEntries(t, get("ns/task-0001"), bad)
	requireEntries(t, get("ns/task-0002"), []metav1.ManagedFieldsEntry{
		entry("ctl", update, hub, "", t0, `{"f:spec":{"f:schedule":{"f:cron":{}}}}`),
		entry("late", update, hub, "status", t0, `{"f:status":{"f:phase":{}}}`),
	})
	if len(get("ns/task-0003")) != 0 {
		t.Errorf("task-0003 gained managedFields: %v", get("ns/task-0003"))
	}

	// A rerun (forced: storedVersions is [v1] now) finds nothing to move; the Task it could
	// not translate is reported again.
	sum, err = runFake(ctx, newFakeCRD("v1", "v1"), tasks, Options{Force: true})
	if err != nil || sum.Rewritten != 4 || sum.ManagedFieldsMoved != 0 || sum.ManagedFieldsKept != 1 {
		t.Errorf("rerun: err %v, %+v", err, sum)
	}
	requireEntries(t, get("ns/task-0000"), []metav1.ManagedFieldsEntry{entry("kubectl", apply, hub, "", t0, `{"f:spec":{"f:runner":{"f:shell":{"f:script":{}}}}}`)})
}

// TestResumedRunKeepsManagedFieldsCounts: the counts survive an interruption in the checkpoint.
func TestResumedRunKeepsManagedFieldsCounts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tasks := newFakeTasks([]string{"ns"}, 30, "v1alpha1")
	for _, o := range tasks.objects {
		o.obj.SetManagedFields([]metav1.ManagedFieldsEntry{entry("kubectl", apply, alpha, "", t0, `{"f:spec":{"f:replicas":{}}}`)})
	}
	tasks.beforeList = func(call int, _ metav1.ListOptions) error {
		if call == 3 {
			cancel()
		}
		return nil
	}
	cp := t.TempDir() + "/cp.json"
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	if _, err := runFake(ctx, crds, tasks, Options{PageSize: 10, Concurrency: 1, CheckpointFile: cp}); err == nil {
		t.Fatal("the interrupted run succeeded")
	}
	tasks.beforeList = nil
	sum, err := runFake(context.Background(), crds, tasks, Options{PageSize: 10, CheckpointFile: cp})
	if err != nil || !sum.Resumed || sum.ManagedFieldsMoved != 30 || sum.Rewritten != 30 {
		t.Fatalf("resumed run: err %v, %+v", err, sum)
	}
	for key, o := range tasks.objects {
		for _, e := range o.obj.GetManagedFields() {
			if e.APIVersion != hub {
				t.Errorf("%s: entry at %s", key, e.APIVersion)
			}
		}
	}
}

// TestDottedFieldNamesAreNotPaths: a field name that contains a dot is one key, not a
// path: "runner.type" under spec is no field of v1beta1 (a client can write any managedFields on
// an update), and must not be read as spec.runner.type, which would grant its manager ownership
// of a field it never set. The same for an object's "." member and for a name below a Same
// field's list item, which carries over as it is (the same key at v1).
func TestDottedFieldNamesAreNotPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    metav1.ManagedFieldsEntry
	}{
		{"leaf", entry("m", apply, beta, "", t0, `{"f:spec":{"f:runner.type":{}}}`)},
		{"v1alpha1 leaf", entry("m", update, alpha, "", t0, `{"f:status.state":{}}`)},
		{"object member", entry("m", update, beta, "", t0, `{"f:spec":{"f:runner.http":{".":{}}}}`)},
		{"same-shape prefix", entry("m", update, beta, "", t0, `{"f:spec":{"f:runner":{"f:http.headers":{"k:{\"name\":\"a\"}":{}}}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, moved, err := movedManagedFields([]metav1.ManagedFieldsEntry{tc.e})
			if err == nil || moved {
				t.Fatalf("moved %v, err %v; want an error:\n%s", moved, err, entriesText(out))
			}
			if !strings.Contains(err.Error(), "no counterpart") {
				t.Errorf("error %q", err)
			}
		})
	}
	// A dot in a key of metadata (labels, annotations) or below a list item is no field path
	// of the table: those carry over.
	ok := entry("m", apply, beta, "", t0, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/name":{}}},`+
		`"f:spec":{"f:runner":{"f:http":{"f:headers":{"k:{\"name\":\"x.y\"}":{".":{},"f:name":{}}}}}}}`)
	out, moved, err := movedManagedFields([]metav1.ManagedFieldsEntry{ok})
	if err != nil || !moved {
		t.Fatalf("moved %v, err %v", moved, err)
	}
	requireEntries(t, out, []metav1.ManagedFieldsEntry{entry("m", apply, hub, "", t0, string(ok.FieldsV1.Raw))})
}
