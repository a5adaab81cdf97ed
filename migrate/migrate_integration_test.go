package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
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
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/google/go-cmp/cmp"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
)

// TestRunMigratesStoredTasks is the main flow: Tasks written by the previous release (stored at
// v1alpha1), the CRD upgraded (v1 stored, conversion webhook), then migrate.Run. Along the way
// it checks that Run refuses before the upgrade and that a dry run writes nothing.
func TestRunMigratesStoredTasks(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	n := fixtureSize(t, "MIGRATE_TASKS", 300)
	keys := env.installPreviousRelease(ctx, t, n)

	t.Run("refuses while v1alpha1 is the storage version", func(t *testing.T) {
		raw, err := env.rawStored(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = migrate.Run(ctx, env.cfg, migrate.Options{})
		if !errors.Is(err, migrate.ErrNotStorageVersion) {
			t.Fatalf("Run before the upgrade: err = %v, want ErrNotStorageVersion", err)
		}
		t.Logf("refused with: %v", err)
		if after, err := env.rawStored(ctx); err != nil || !maps.Equal(raw, after) {
			t.Fatalf("etcd changed (%v)", err)
		}
	})

	env.upgradeToCurrentRelease(ctx, t)

	// Before the migration: etcd still holds v1alpha1, the CRD remembers both versions.
	env.requireEncodings(ctx, t, keys, atV1alpha1)
	if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1alpha1", "v1"}) {
		t.Fatalf("storedVersions after the upgrade = %v, want [v1alpha1 v1]", sv)
	}
	before := env.snapshot(ctx, t, versions...)
	if len(before["v1"]) != n {
		t.Fatalf("read %d Tasks at v1, want %d", len(before["v1"]), n)
	}
	if sample := before["v1"][keys[1]].(*taskv1.Task); sample.Spec.Runner.HTTP == nil || sample.Spec.Runner.HTTP.URL == "" {
		t.Fatalf("Task read at v1 is not converted by the webhook: %+v", sample.Spec)
	}

	t.Run("dry run writes nothing", func(t *testing.T) {
		raw, err := env.rawStored(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		sum, err := migrate.Run(ctx, env.cfg, migrate.Options{DryRun: true, PageSize: 100, Progress: &out,
			CheckpointFile: filepath.Join(t.TempDir(), "checkpoint.json")})
		if err != nil {
			t.Fatalf("dry run: %v\n%s", err, out.String())
		}
		t.Logf("%s", sum)
		if sum.Total != n || sum.Trimmed || !sum.DryRun {
			t.Errorf("summary = %+v", sum)
		}
		after, err := env.rawStored(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(raw, after) {
			t.Errorf("dry run changed etcd")
		}
		if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1alpha1", "v1"}) {
			t.Errorf("dry run changed storedVersions to %v", sv)
		}
	})

	shortcuts, inBytes := conversion.LosslessShortcuts("v1alpha1"), conversion.ShortcutsInBytes("v1alpha1")
	cpFile := filepath.Join(t.TempDir(), "checkpoint.json")
	var out bytes.Buffer
	sum, err := migrate.Run(ctx, env.cfg, migrate.Options{PageSize: 50, Concurrency: 4, CheckpointFile: cpFile,
		Progress: &out, ProgressInterval: time.Second})
	t.Logf("progress:\n%s", out.String())
	t.Logf("summary:\n%s", sum)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.Total != n || sum.Rewritten != n || sum.Failed != 0 || !sum.Trimmed || !slices.Equal(sum.StoredVersionsAfter, []string{"v1"}) {
		t.Errorf("summary = %+v", sum)
	}
	recordTiming("migrate.Run", n, sum.Duration)

	env.requireEncodings(ctx, t, keys, atV1)
	if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", sv)
	}
	requireSame(t, before, env.snapshot(ctx, t, versions...), nil)
	// Every Task was written at v1alpha1 and hides nothing from it: each rewrite the v1alpha1
	// watch cache sees, and each read at v1alpha1 since, takes the converter's shortcut, which
	// holds only if the bytes the apiserver sends are the ones the converter writes (its key
	// order, its escaping of the scripts' "&&").
	if got := conversion.LosslessShortcuts("v1alpha1") - shortcuts; got < uint64(n) {
		t.Errorf("%d conversions to v1alpha1 took the lossless shortcut during the migration and the reads after it, want at least %d (one per Task)", got, n)
	}
	// ... and v1alpha1's template reads those bytes, "\u0026\u0026" included, without a typed Task.
	if got := conversion.ShortcutsInBytes("v1alpha1") - inBytes; got < uint64(n) {
		t.Errorf("%d conversions to v1alpha1 took the shortcut in bytes, want at least %d (one per Task)", got, n)
	}
	if _, err := os.Stat(cpFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint left behind: %v", err)
	}

	// Running again is a no-op, and a dry run says so first.
	t.Run("dry run at [v1] says nothing to do", func(t *testing.T) {
		raw, err := env.rawStored(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		dry, err := migrate.Run(ctx, env.cfg, migrate.Options{DryRun: true, Progress: &out})
		if err != nil {
			t.Fatalf("dry run: %v\n%s", err, out.String())
		}
		t.Logf("%s", out.String())
		if dry.Total != 0 || dry.Rewritten != 0 || !strings.Contains(out.String(), "nothing to do") {
			t.Errorf("dry run at [v1] does not say nothing to do: %+v\n%s", dry, out.String())
		}
		for _, bad := range []string{"would rewrite", "would become", "from [v1] to [v1]"} {
			if strings.Contains(out.String(), bad) {
				t.Errorf("dry run at [v1] says %q:\n%s", bad, out.String())
			}
		}
		if after, err := env.rawStored(ctx); err != nil || !maps.Equal(raw, after) {
			t.Errorf("dry run changed etcd (%v)", err)
		}
	})
	sum, err = migrate.Run(ctx, env.cfg, migrate.Options{})
	if err != nil || sum.Total != 0 || len(sum.Notes) == 0 || !strings.Contains(sum.String(), "nothing to do") {
		t.Errorf("second run: %v, %+v", err, sum)
	}
}

// TestRunResumesAndKeepsConcurrentWrites interrupts a run after a few pages, expires its
// continue token by compacting etcd, and resumes it from the checkpoint, while another client
// keeps changing Tasks at v1alpha1 through both runs. Every change must survive.
func TestRunResumesAndKeepsConcurrentWrites(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	n := fixtureSize(t, "MIGRATE_TASKS", 300)
	keys := env.installPreviousRelease(ctx, t, n)
	env.upgradeToCurrentRelease(ctx, t)
	before := env.snapshot(ctx, t, "v1alpha1")

	// The other client: edits every tenth Task, one every 40ms, at v1alpha1.
	var edited []string
	for i := 5; i < n; i += 10 {
		edited = append(edited, keys[i])
	}
	var migrating atomic.Bool
	var duringMigration atomic.Int32
	editorDone := make(chan error, 1)
	go func() {
		editorDone <- func() error {
			for i, key := range edited {
				if !sleepCtx(ctx, 40*time.Millisecond) {
					return ctx.Err()
				}
				if err := editTask(ctx, env, key, i); err != nil {
					return fmt.Errorf("edit %s: %w", key, err)
				}
				if migrating.Load() {
					duringMigration.Add(1)
				}
			}
			return nil
		}()
	}()

	cpFile := filepath.Join(t.TempDir(), "checkpoint.json")
	opts := migrate.Options{PageSize: 20, Concurrency: 4, QPS: 100, CheckpointFile: cpFile, ProgressInterval: 500 * time.Millisecond}

	// First run: cancelled once three pages are checkpointed.
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		_ = testenv.Poll(runCtx, time.Minute, 10*time.Millisecond, "three checkpointed pages", func(context.Context) (bool, error) {
			data, err := os.ReadFile(cpFile)
			return err == nil && bytes.Contains(data, []byte(`"pages": 3,`)), nil
		})
	}()
	var out1 bytes.Buffer
	opts.Progress = &out1
	migrating.Store(true)
	sum1, err := migrate.Run(runCtx, env.cfg, opts)
	migrating.Store(false)
	t.Logf("first run:\n%s\n%s", out1.String(), sum1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	if sum1.Trimmed || sum1.Total >= n {
		t.Fatalf("interrupted run got too far: %+v", sum1)
	}
	if _, err := os.Stat(cpFile); err != nil {
		t.Fatalf("no checkpoint after the interruption: %v", err)
	}
	if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1alpha1", "v1"}) {
		t.Fatalf("storedVersions after the interrupted run = %v", sv)
	}
	enc, err := env.upgrade.StoredTaskVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, v := range enc {
		counts[v]++
	}
	t.Logf("etcd after the interrupted run: %v", counts)
	if counts[atV1] == 0 || counts[atV1alpha1] == 0 {
		t.Fatalf("want a half-migrated etcd, got %v", counts)
	}

	// Compact etcd: the checkpoint's continue token now names a revision that is gone.
	rev, err := env.cp.EtcdCompact(ctx)
	if err != nil {
		t.Fatalf("compact etcd: %v", err)
	}
	t.Logf("etcd compacted at revision %d", rev)

	var out2 bytes.Buffer
	opts.Progress = &out2
	migrating.Store(true)
	sum2, err := migrate.Run(ctx, env.cfg, opts)
	migrating.Store(false)
	t.Logf("resumed run:\n%s\n%s", out2.String(), sum2)
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if !sum2.Resumed || !sum2.Trimmed || sum2.Failed != 0 || sum2.Total < n {
		t.Errorf("resumed summary = %+v", sum2)
	}
	if strings.Contains(out2.String(), "continue token expired") {
		t.Logf("the resumed run met the expired continue token and recovered")
	} else {
		t.Logf("the apiserver still accepted the continue token after the compaction (served from its cache)")
	}
	if err := <-editorDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d edits happened while a migration was running; conflicts retried: %d in the first run, %d in all",
		duringMigration.Load(), len(edited), sum1.Conflicts, sum2.Conflicts)
	if duringMigration.Load() == 0 {
		t.Errorf("no edit overlapped a migration run; the test proves nothing")
	}

	env.requireEncodings(ctx, t, keys, atV1)
	if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", sv)
	}
	after := env.snapshot(ctx, t, "v1alpha1")
	for i, key := range edited {
		want := before["v1alpha1"][key].(*v1alpha1.Task).DeepCopy()
		editSpec(&want.Spec, i)
		if d := cmp.Diff(want, after["v1alpha1"][key]); d != "" {
			t.Errorf("edit of %s lost (-want +got):\n%s", key, d)
		}
	}
	isEdited := func(key string) bool { return slices.Contains(edited, key) }
	requireSame(t, before, after, isEdited)
}

// TestStorageVersionMigration runs the same migration with the built-in
// StorageVersionMigration API and kube-controller-manager's controller.
func TestStorageVersionMigration(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	n := fixtureSize(t, "MIGRATE_TASKS", 300)
	keys := env.installPreviousRelease(ctx, t, n)
	env.upgradeToCurrentRelease(ctx, t)
	before := env.snapshot(ctx, t, versions...)
	env.requireEncodings(ctx, t, keys, atV1alpha1)

	svmCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	name := fmt.Sprintf("tasks-to-v1-%d", time.Now().UnixNano())
	watch := env.watchRewrites(svmCtx, n)
	d, err := migrate.RunStorageVersionMigration(svmCtx, env.cfg, name)
	first, last := watch()
	t.Logf("the controller rewrote the first Task %s after the StorageVersionMigration was created and the last %s later",
		first.Round(time.Millisecond), (last - first).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("StorageVersionMigration: %v\nkube-controller-manager log:\n%s", err, testenv.Tail(env.cp.Logs(testenv.KubeControllerManager), 40))
	}
	t.Logf("StorageVersionMigration of %d Tasks took %s", n, d.Round(time.Millisecond))
	if svm, err := env.kube.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{}); err == nil {
		for _, c := range svm.Status.Conditions {
			t.Logf("  condition %s=%s at +%s: %s", c.Type, c.Status, c.LastTransitionTime.Sub(svm.CreationTimestamp.Time), c.Message)
		}
	}
	recordTiming("StorageVersionMigration", n, d)
	recordTiming("  of which rewriting", n, last-first)

	env.requireEncodings(ctx, t, keys, atV1)
	if sv := env.storedVersions(ctx, t); !slices.Equal(sv, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", sv)
	}
	requireSame(t, before, env.snapshot(ctx, t, versions...), nil)
}

// watchRewrites polls etcd until all n Tasks are encoded at v1. The returned function waits for
// that and reports when the first and the last Task were seen at v1, relative to the call.
func (env *testEnv) watchRewrites(ctx context.Context, n int) func() (first, last time.Duration) {
	start := time.Now()
	var first, last time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The times are reported: asked every 100 ms, they are that precise.
		_ = testenv.Poll(ctx, 3*time.Minute, 100*time.Millisecond, "every Task stored at v1", func(ctx context.Context) (bool, error) {
			enc, err := env.upgrade.StoredTaskVersions(ctx)
			if err != nil {
				return false, err
			}
			v1 := 0
			for _, v := range enc {
				if v == atV1 {
					v1++
				}
			}
			if v1 > 0 && first == 0 {
				first = time.Since(start)
			}
			if v1 < n {
				return false, nil
			}
			last = time.Since(start)
			return true, nil
		})
	}()
	return func() (time.Duration, time.Duration) {
		<-done
		return first, last
	}
}

// BenchmarkMigrate times migrating MIGRATE_BENCH_TASKS (default 200) Tasks from v1alpha1 to v1
// with migrate.Run and with a StorageVersionMigration. Run it with -benchtime=1x:
//
//	go test ./migrate -run '^$' -bench Migrate -benchtime=1x
func BenchmarkMigrate(b *testing.B) {
	env := cluster(b)
	n := fixtureSize(b, "MIGRATE_BENCH_TASKS", 200)
	bench := func(b *testing.B, migrateOnce func(ctx context.Context, i int) (time.Duration, error)) {
		ctx := b.Context()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			env.installPreviousRelease(ctx, b, n)
			env.upgradeToCurrentRelease(ctx, b)
			b.StartTimer()
			d, err := migrateOnce(ctx, i)
			if err != nil {
				b.Fatal(err)
			}
			total += d
		}
		b.ReportMetric(float64(n*b.N)/total.Seconds(), "tasks/s")
		b.ReportMetric(float64(n), "tasks/op")
	}
	b.Run("Run", func(b *testing.B) {
		bench(b, func(ctx context.Context, _ int) (time.Duration, error) {
			sum, err := migrate.Run(ctx, env.cfg, migrate.Options{})
			recordTiming("migrate.Run (bench)", n, sum.Duration)
			return sum.Duration, err
		})
	})
	b.Run("StorageVersionMigration", func(b *testing.B) {
		bench(b, func(ctx context.Context, i int) (time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			watch := env.watchRewrites(ctx, n)
			d, err := migrate.RunStorageVersionMigration(ctx, env.cfg, fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i))
			first, last := watch()
			recordTiming("StorageVersionMigration (bench)", n, d)
			recordTiming("  of which rewriting (bench)", n, last-first)
			b.ReportMetric((last - first).Seconds(), "rewrite-s/op")
			return d, err
		})
	})
}

// editTask changes the spec of a Task at v1alpha1, as a user of the previous release would.
func editTask(ctx context.Context, env *testEnv, key string, i int) error {
	ns, name, _ := strings.Cut(key, "/")
	client := env.upgrade.Tasks("v1alpha1", ns)
	for {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var task v1alpha1.Task
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &task); err != nil {
			return err
		}
		editSpec(&task.Spec, i)
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&task.Spec)
		if err != nil {
			return err
		}
		obj.Object["spec"] = spec
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// editSpec is the change the other client makes to the i-th edited Task.
func editSpec(spec *v1alpha1.TaskSpec, i int) {
	spec.Replicas = 9
	if spec.Type == "shell" {
		spec.Shell = fmt.Sprintf("echo edited %d", i)
	} else {
		spec.URL = fmt.Sprintf("https://hooks.example.com/edited/%d", i)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

type timing struct {
	method string
	n      int
	d      time.Duration
}

var timings struct {
	sync.Mutex
	rows []timing
}

func recordTiming(method string, n int, d time.Duration) {
	timings.Lock()
	defer timings.Unlock()
	timings.rows = append(timings.rows, timing{method, n, d})
}

// reportTimings prints the migration timings side by side when the run measured any.
func reportTimings() {
	timings.Lock()
	defer timings.Unlock()
	if len(timings.rows) == 0 {
		return
	}
	fmt.Println("migration timings (v1alpha1 -> v1, conversion webhook in the loop):")
	fmt.Printf("  %-34s %7s %12s %10s\n", "method", "tasks", "duration", "tasks/s")
	for _, r := range timings.rows {
		fmt.Printf("  %-34s %7d %12s %10.1f\n", r.method, r.n, r.d.Round(time.Millisecond), float64(r.n)/r.d.Seconds())
	}
}
