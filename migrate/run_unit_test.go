package migrate

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	taskv1 "example.com/task-operator/apis/v1"
)

var threeNamespaces = []string{"team-a", "team-b", "team-c"}

func TestRunRewritesEveryTaskAndTrims(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks(threeNamespaces, 345, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	var out bytes.Buffer

	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 100, Concurrency: 5, CheckpointFile: cpFile, Progress: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if got := tasks.storedAt(); got["v1"] != 1035 || len(got) != 1 {
		t.Errorf("stored versions of the objects = %v, want all 1035 at v1", got)
	}
	if got := crds.storedVersions(); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", got)
	}
	want := Summary{Total: 1035, Rewritten: 1035, Trimmed: true}
	if sum.Total != want.Total || sum.Rewritten != want.Rewritten || sum.Skipped != 0 || sum.Conflicts != 0 || sum.Failed != 0 || !sum.Trimmed {
		t.Errorf("summary = %+v", sum)
	}
	if !slices.Equal(sum.StoredVersionsBefore, []string{"v1alpha1", "v1"}) || !slices.Equal(sum.StoredVersionsAfter, []string{"v1"}) {
		t.Errorf("storedVersions before/after = %v/%v", sum.StoredVersionsBefore, sum.StoredVersionsAfter)
	}
	if tasks.lists != 11 {
		t.Errorf("%d LIST calls, want 11 pages", tasks.lists)
	}
	if _, err := os.Stat(cpFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint still there after success: %v", err)
	}
	if !strings.Contains(out.String(), "1035/1035 objects (100.0%)") {
		t.Errorf("no final progress line in:\n%s", out.String())
	}
	t.Logf("summary:\n%s", sum)
}

func TestRunRefusesWhenV1IsNotTheStorageVersion(t *testing.T) {
	crds := newFakeCRD("v1alpha1", "v1alpha1")
	tasks := newFakeTasks(threeNamespaces, 5, "v1alpha1")
	sum, err := runFake(t.Context(), crds, tasks, Options{})
	if !errors.Is(err, ErrNotStorageVersion) {
		t.Fatalf("err = %v, want ErrNotStorageVersion", err)
	}
	if !strings.Contains(err.Error(), `"v1alpha1"`) {
		t.Errorf("error does not name the current storage version: %v", err)
	}
	if tasks.lists+tasks.updates != 0 || crds.statusWrites != 0 {
		t.Errorf("touched the cluster: %d lists, %d updates, %d CRD status writes", tasks.lists, tasks.updates, crds.statusWrites)
	}
	if !slices.Equal(sum.StoredVersionsBefore, []string{"v1alpha1"}) {
		t.Errorf("summary storedVersions = %v", sum.StoredVersionsBefore)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks(threeNamespaces, 40, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	sum, err := runFake(t.Context(), crds, tasks, Options{DryRun: true, PageSize: 7, CheckpointFile: cpFile})
	if err != nil {
		t.Fatal(err)
	}
	if tasks.updates != 0 || crds.statusWrites != 0 {
		t.Errorf("dry run wrote: %d updates, %d CRD status writes", tasks.updates, crds.statusWrites)
	}
	if _, err := os.Stat(cpFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote a checkpoint")
	}
	if sum.Total != 120 || sum.Rewritten != 120 || sum.Trimmed || !sum.DryRun {
		t.Errorf("summary = %+v", sum)
	}
	if s := sum.String(); !strings.Contains(s, "dry run") || !strings.Contains(s, "would become [v1]") {
		t.Errorf("summary text does not say it is a dry run:\n%s", s)
	}
}

// A Task changed between the LIST and its rewrite must keep the change: the stale copy is
// refused with a Conflict and the fresh one is written instead.
func TestConcurrentChangeIsNotLost(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 50, "v1alpha1")
	var once sync.Once
	tasks.beforeUpdate = func(key string, obj *unstructured.Unstructured) error {
		if key == "ns/task-0007" {
			once.Do(func() { tasks.userWrite(key, "parallelism", int64(42)) })
		}
		return nil
	}
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Conflicts != 1 || sum.Rewritten != 50 || tasks.gets != 1 {
		t.Errorf("conflicts %d, rewritten %d, gets %d; want 1, 50, 1", sum.Conflicts, sum.Rewritten, tasks.gets)
	}
	got, _ := tasks.Get(t.Context(), "ns", "task-0007")
	if p, _, _ := unstructured.NestedInt64(got.Object, "spec", "parallelism"); p != 42 {
		t.Errorf("concurrent change lost: parallelism = %d, want 42", p)
	}
}

func TestDeletedTaskIsSkipped(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 20, "v1alpha1")
	tasks.beforeUpdate = func(key string, _ *unstructured.Unstructured) error {
		if key == "ns/task-0003" || key == "ns/task-0004" {
			tasks.delete(key)
		}
		return nil
	}
	// task-0004 is deleted after a conflict made the migration read it again.
	var once sync.Once
	inner := tasks.beforeUpdate
	tasks.beforeUpdate = func(key string, obj *unstructured.Unstructured) error {
		if key == "ns/task-0004" {
			var conflicted bool
			once.Do(func() { conflicted = true })
			if conflicted {
				return apierrors.NewConflict(taskGR, obj.GetName(), errors.New("modified"))
			}
		}
		return inner(key, obj)
	}
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 6})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 2 || sum.Rewritten != 18 || sum.Total != 20 || !sum.Trimmed {
		t.Errorf("summary = %+v, want 2 skipped, 18 rewritten, trimmed", sum)
	}
}

func TestInterruptedRunResumesFromCheckpoint(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks(threeNamespaces, 100, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")

	ctx, cancel := context.WithCancel(t.Context())
	tasks.beforeList = func(call int, _ metav1.ListOptions) error {
		if call == 5 { // four pages done
			cancel()
		}
		return nil
	}
	sum, err := runFake(ctx, crds, tasks, Options{PageSize: 25, CheckpointFile: cpFile})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	if sum.Trimmed || !slices.Equal(crds.storedVersions(), []string{"v1alpha1", "v1"}) {
		t.Fatalf("interrupted run trimmed storedVersions: %v", crds.storedVersions())
	}
	cp, err := loadCheckpoint(cpFile)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint: %v, %v", cp, err)
	}
	if cp.Pages != 4 || cp.Total != 100 || cp.Rewritten != 100 || cp.Continue == "" || cp.ListDone {
		t.Fatalf("checkpoint = %+v", cp)
	}

	tasks.beforeList = nil
	updatesBefore := tasks.updates
	var out bytes.Buffer
	sum, err = runFake(t.Context(), crds, tasks, Options{PageSize: 25, CheckpointFile: cpFile, Progress: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Resumed || sum.Total != 300 || sum.Rewritten != 300 || !sum.Trimmed {
		t.Errorf("resumed summary = %+v", sum)
	}
	if n := tasks.updates - updatesBefore; n != 200 {
		t.Errorf("resumed run rewrote %d objects, want the remaining 200", n)
	}
	if got := tasks.storedAt(); got["v1"] != 300 {
		t.Errorf("stored at = %v", got)
	}
	if !strings.Contains(out.String(), "resuming from checkpoint") {
		t.Errorf("resume not reported:\n%s", out.String())
	}
	if _, err := os.Stat(cpFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint left after success")
	}
}

// A crash after the last page but before the trim resumes straight to the trim.
func TestCheckpointAfterLastPageOnlyTrims(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 30, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	ctx, cancel := context.WithCancel(t.Context())
	crds.afterGet = func(call int) {
		if call == 2 { // the re-read before the trim
			cancel()
		}
	}
	if _, err := runFake(ctx, crds, tasks, Options{PageSize: 10, CheckpointFile: cpFile}); err == nil {
		t.Fatal("want an error from the cancelled trim")
	}
	if cp, _ := loadCheckpoint(cpFile); cp == nil || !cp.ListDone {
		t.Fatalf("checkpoint = %+v, want ListDone", cp)
	}
	crds.afterGet = nil
	lists := tasks.lists
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10, CheckpointFile: cpFile})
	if err != nil {
		t.Fatal(err)
	}
	if tasks.lists != lists || !sum.Trimmed || sum.Total != 30 {
		t.Errorf("lists %d -> %d, summary %+v", lists, tasks.lists, sum)
	}
}

func TestCheckpointOfAnotherCRDGenerationIsIgnored(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 30, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	stale := &checkpoint{CRD: DefaultCRDName, CRDUID: "crd-uid-1", Generation: 1, Continue: "5|ns/task-0020", Pages: 2, Total: 20, Rewritten: 20}
	if err := stale.save(cpFile); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10, CheckpointFile: cpFile, Progress: &out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resumed || sum.Total != 30 || tasks.updates != 30 {
		t.Errorf("summary %+v, %d updates", sum, tasks.updates)
	}
	if !strings.Contains(out.String(), "generation 1, now 2") {
		t.Errorf("not explained:\n%s", out.String())
	}

	// A corrupt checkpoint is ignored, too.
	if err := os.WriteFile(cpFile, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	crds = newFakeCRD("v1", "v1alpha1", "v1")
	if _, err := runFake(t.Context(), crds, tasks, Options{CheckpointFile: cpFile}); err != nil {
		t.Fatal(err)
	}
}

func TestExpiredContinueToken(t *testing.T) {
	for _, tc := range []struct {
		name              string
		offerInconsistent bool
		wantNote          string
		wantLists         int
	}{
		{"restart from the beginning", false, "restarting the listing from the beginning", 3 + 5},
		{"continue inconsistently", true, "continuing from the same position", 3 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crds := newFakeCRD("v1", "v1alpha1", "v1")
			tasks := newFakeTasks([]string{"ns"}, 50, "v1alpha1")
			tasks.offerInconsistent = tc.offerInconsistent
			tasks.beforeList = func(call int, opts metav1.ListOptions) error {
				if call == 3 { // compaction while page 3 is requested
					tasks.mu.Lock()
					tasks.compactedRV = tasks.rv
					tasks.mu.Unlock()
				}
				return nil
			}
			var out bytes.Buffer
			sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10, Progress: &out})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "continue token expired") || !strings.Contains(out.String(), tc.wantNote) {
				t.Errorf("expiry not reported:\n%s", out.String())
			}
			if got := tasks.storedAt(); got["v1"] != 50 || !sum.Trimmed {
				t.Errorf("stored at %v, trimmed %v", got, sum.Trimmed)
			}
			// Page 3 fails once, then either pages 1-5 again or pages 3-5.
			if tasks.lists != tc.wantLists {
				t.Errorf("%d LIST calls, want %d", tasks.lists, tc.wantLists)
			}
		})
	}
}

func TestCRDChangeDuringRunPreventsTrim(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 30, "v1alpha1")
	tasks.beforeList = func(call int, _ metav1.ListOptions) error {
		if call == 2 {
			crds.changeSpec()
		}
		return nil
	}
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10})
	if !errors.Is(err, ErrCRDChanged) {
		t.Fatalf("err = %v, want ErrCRDChanged", err)
	}
	if sum.Trimmed || crds.statusWrites != 0 || !slices.Equal(crds.storedVersions(), []string{"v1alpha1", "v1"}) {
		t.Errorf("trimmed anyway: %+v", sum)
	}
	if !strings.Contains(sum.String(), "NOT trimmed") || !strings.Contains(err.Error(), "generation changed from 2 to 3") {
		t.Errorf("not explained: %v\n%s", err, sum)
	}
}

func TestFailedRewritesPreventTrimAndAreRetriedOnResume(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 40, "v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	var broken atomic.Bool
	broken.Store(true)
	tasks.beforeUpdate = func(key string, obj *unstructured.Unstructured) error {
		if key == "ns/task-0015" && broken.Load() {
			return apierrors.NewInvalid(taskv1.GroupKind, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")})
		}
		return nil
	}
	sum, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10, CheckpointFile: cpFile})
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("err = %v, want ErrIncomplete", err)
	}
	if sum.Failed != 1 || sum.Rewritten != 39 || sum.Trimmed || len(sum.Failures) != 1 || !strings.Contains(sum.Failures[0], "ns/task-0015") {
		t.Errorf("summary = %+v", sum)
	}
	// The checkpoint stops before the page with the failure.
	cp, _ := loadCheckpoint(cpFile)
	if cp == nil || cp.Pages != 1 || cp.Total != 10 {
		t.Fatalf("checkpoint = %+v, want it after page 1", cp)
	}
	broken.Store(false)
	sum, err = runFake(t.Context(), crds, tasks, Options{PageSize: 10, CheckpointFile: cpFile})
	if err != nil || !sum.Trimmed || sum.Failed != 0 || sum.Total != 40 {
		t.Fatalf("rerun: %v, %+v", err, sum)
	}
}

func TestTransientErrorsAreRetried(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 10, "v1alpha1")
	var fails atomic.Int32
	tasks.beforeUpdate = func(key string, _ *unstructured.Unstructured) error {
		if key == "ns/task-0002" && fails.Add(1) <= 2 {
			return apierrors.NewTooManyRequests("slow down", 0)
		}
		return nil
	}
	sum, err := runFake(t.Context(), crds, tasks, Options{})
	if err != nil || sum.Rewritten != 10 || sum.Failed != 0 {
		t.Fatalf("%v, %+v", err, sum)
	}
}

func TestNamespaceRunDoesNotTrim(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks(threeNamespaces, 10, "v1alpha1")
	sum, err := runFake(t.Context(), crds, tasks, Options{Namespace: "team-b", PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 10 || sum.Rewritten != 10 || sum.Trimmed || crds.statusWrites != 0 {
		t.Errorf("summary = %+v", sum)
	}
	if got := tasks.storedAt(); got["v1"] != 10 || got["v1alpha1"] != 20 {
		t.Errorf("stored at = %v", got)
	}
}

func TestAlreadyMigratedDoesNothingUnlessForced(t *testing.T) {
	crds := newFakeCRD("v1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 10, "v1")
	sum, err := runFake(t.Context(), crds, tasks, Options{})
	if err != nil || tasks.lists != 0 || len(sum.Notes) != 1 {
		t.Fatalf("%v, %d lists, notes %v", err, tasks.lists, sum.Notes)
	}
	sum, err = runFake(t.Context(), crds, tasks, Options{Force: true})
	if err != nil || sum.Rewritten != 10 || sum.Trimmed || crds.statusWrites != 0 {
		t.Fatalf("forced: %v, %+v", err, sum)
	}
}

// A dry run says what the real run with the same options will do: nothing at [v1] unless forced.
func TestDryRunAtV1SaysWhatTheRunWillDo(t *testing.T) {
	tests := []struct {
		name          string
		force         bool
		wantRewritten int
		wantText      []string
		wantNotText   []string
	}{
		{name: "nothing to do", wantText: []string{"nothing to do", "storedVersions: [v1] (would stay)"},
			wantNotText: []string{"would rewrite", "would become", "to [v1]"}},
		{name: "forced", force: true, wantRewritten: 10, wantText: []string{"would rewrite 10 Tasks", "would stay [v1]"},
			wantNotText: []string{"nothing to do", "from [v1] to [v1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crds := newFakeCRD("v1", "v1")
			tasks := newFakeTasks([]string{"ns"}, 10, "v1")
			dry, err := runFake(t.Context(), crds, tasks, Options{DryRun: true, Force: tt.force})
			if err != nil || tasks.updates != 0 || crds.statusWrites != 0 {
				t.Fatalf("dry run: %v, %d updates, %d CRD status writes", err, tasks.updates, crds.statusWrites)
			}
			ran, err := runFake(t.Context(), crds, tasks, Options{Force: tt.force})
			if err != nil {
				t.Fatal(err)
			}
			if dry.Rewritten != tt.wantRewritten || ran.Rewritten != dry.Rewritten || ran.Total != dry.Total {
				t.Errorf("dry run would rewrite %d of %d, the run rewrote %d of %d, want %d", dry.Rewritten, dry.Total, ran.Rewritten, ran.Total, tt.wantRewritten)
			}
			text := dry.String()
			for _, want := range tt.wantText {
				if !strings.Contains(text, want) {
					t.Errorf("dry-run summary lacks %q:\n%s", want, text)
				}
			}
			for _, bad := range tt.wantNotText {
				if strings.Contains(text, bad) {
					t.Errorf("dry-run summary says %q:\n%s", bad, text)
				}
			}
		})
	}
}

func TestQPSLimitsRewrites(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 21, "v1alpha1")
	start := time.Now()
	if _, err := runFake(t.Context(), crds, tasks, Options{QPS: 40, Concurrency: 8}); err != nil {
		t.Fatal(err)
	}
	// 21 rewrites at 40/s with a burst of one take at least 20/40 s.
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Errorf("21 rewrites at 40 QPS took %v", d)
	}
}

func TestProgressLines(t *testing.T) {
	crds := newFakeCRD("v1", "v1alpha1", "v1")
	tasks := newFakeTasks([]string{"ns"}, 60, "v1alpha1")
	tasks.beforeUpdate = func(string, *unstructured.Unstructured) error {
		time.Sleep(3 * time.Millisecond)
		return nil
	}
	out := &syncBuffer{}
	if _, err := runFake(t.Context(), crds, tasks, Options{PageSize: 10, Concurrency: 1, Progress: out, ProgressInterval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	lines := strings.Count(text, "objects (")
	if lines < 3 || !strings.Contains(text, "/60 objects (") || !strings.Contains(text, "ETA ") || !strings.Contains(text, "/s") {
		t.Errorf("progress output:\n%s", text)
	}
}

func TestReporterLine(t *testing.T) {
	var c counters
	c.rewritten.Store(250)
	c.skipped.Store(50)
	c.total.Store(1000)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newReporter(nil, "migrate tasks.example.com", &c, start)
	got := r.line(start.Add(10 * time.Second))
	want := "migrate tasks.example.com: 300/1000 objects (30.0%), rewritten 250, skipped 50, conflicts 0, failed 0, managedFields moved 0 kept 0, 30.0/s, elapsed 10s, ETA 23s"
	if got != want {
		t.Errorf("line =\n%s\nwant\n%s", got, want)
	}
	c.total.Store(0)
	if got := r.line(start.Add(time.Second)); !strings.Contains(got, "300/? objects,") || !strings.Contains(got, "ETA unknown") {
		t.Errorf("unknown total: %s", got)
	}
}

func TestSummaryString(t *testing.T) {
	s := Summary{
		Total: 1000, Rewritten: 990, Skipped: 10, Conflicts: 3, Duration: 4 * time.Second,
		StoredVersionsBefore: []string{"v1alpha1", "v1"}, StoredVersionsAfter: []string{"v1"}, Trimmed: true,
		Notes: []string{"resuming from checkpoint"},
	}
	want := "tasks.example.com migration to v1: 1000 objects, 990 rewritten, 10 skipped (deleted), 3 conflicts retried, 0 failed in 4s (250.0 objects/s)\n" +
		"storedVersions: [v1alpha1 v1] -> [v1]\n" +
		"note: resuming from checkpoint"
	if got := s.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

func TestCheckpointSaveIsAtomicAndRoundTrips(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	cp := &checkpoint{CRD: taskv1.CRDName, CRDUID: "u", Generation: 3, Continue: "abc", Pages: 2, Total: 7, Rewritten: 6, Skipped: 1}
	for range 3 {
		if err := cp.save(path); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	got, err := loadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	got.Updated, cp.Updated = time.Time{}, time.Time{}
	if *got != *cp {
		t.Errorf("round trip: %+v != %+v", got, cp)
	}
	if cp, err := loadCheckpoint(filepath.Join(dir, "missing")); cp != nil || err != nil {
		t.Errorf("missing checkpoint: %v, %v", cp, err)
	}
}

func TestBindFlags(t *testing.T) {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	o := BindFlags(fs)
	err := fs.Parse([]string{"--namespace=a", "--page-size=50", "--concurrency=2", "--qps=7.5", "--dry-run", "--checkpoint=/tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "a" || o.PageSize != 50 || o.Concurrency != 2 || o.QPS != 7.5 || !o.DryRun || o.CheckpointFile != "/tmp/x" || o.CRDName != DefaultCRDName {
		t.Errorf("options = %+v", o)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
