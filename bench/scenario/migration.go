package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
	"example.com/task-operator/webhook"
)

const migrateNS = "bench-migrate"

// migration stores s.Tasks Tasks at v1alpha1 under the previous release's CRD, upgrades the
// CRD, and times migrate.Run; then does the same again for the in-tree StorageVersionMigration.
// No operator runs meanwhile (it would start Jobs for the fixture); conversion is served by the
// project's /convert handler in this process. At the end the CRD is deleted and an operator
// started again, which reinstalls it.
func migration(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	up, err := testenv.NewUpgrade(ctx, e.CP)
	if err != nil {
		return err
	}
	err = compareMigrations(ctx, e, up, s.Tasks, r)
	e.Logf("restoring the CRD and the operator")
	return errors.Join(err, restore(ctx, e, up), up.Close())
}

// restore leaves what the other scenarios expect: this release's CRD and one operator.
func restore(ctx context.Context, e *harness.Env, up *testenv.Upgrade) error {
	if err := up.DeleteCRD(ctx, 5*time.Minute); err != nil {
		return err
	}
	return e.EnsureOperators(ctx, 1, false, false)
}

func compareMigrations(ctx context.Context, e *harness.Env, up *testenv.Upgrade, n int, r *Result) error {
	// Tasks carry the operator's finalizer: delete them, with the CRD, while it runs.
	e.Logf("deleting the Task CRD and every Task")
	if err := up.DeleteCRD(ctx, 10*time.Minute); err != nil {
		return err
	}
	if err := e.StopAll(); err != nil {
		return err
	}
	if err := deleteWebhookConfigurations(ctx, e.Client); err != nil {
		return err
	}
	if err := e.EnsureNamespace(ctx, migrateNS); err != nil {
		return err
	}
	cfg := rest.CopyConfig(e.Cfg)
	cfg.QPS, cfg.Burst = -1, 0 // the tools' own settings decide their pace
	f, err := newFloors(e, up)
	if err != nil {
		return err
	}

	rates := map[string]float64{}
	for _, m := range []timedMethod{{method: methodBare}, {method: methodMigrate, profile: true}} {
		if rates[m.method], err = timeMethod(ctx, e, up, cfg, m, n, r); err != nil {
			return err
		}
	}
	if err := againstCeiling(ctx, e, up, f, cfg, n, rates[methodMigrate], r); err != nil {
		return err
	}
	if rates[methodSVM], err = timeMethod(ctx, e, up, cfg, timedMethod{method: methodSVM}, n, r); err != nil {
		return err
	}
	r.Addf("Tasks migrated per method", "stored at v1alpha1 under the previous release's CRD", "%d", n)
	if rates[methodBare] > 0 {
		r.Addf("migrate.Run speed ÷ bare client", fmt.Sprintf("objects/s; same workers (%d) and pages (%d); goal ≥ 0.9", migrate.DefaultConcurrency, migrate.DefaultPageSize),
			"%.2f", rates[methodMigrate]/rates[methodBare])
		r.Addf("StorageVersionMigration speed ÷ migrate.Run", "objects/s", "%.2f", rates[methodSVM]/rates[methodMigrate])
	}
	renamed, err := f.timeCeiling(ctx, e, renameOnlyCeiling, f.renameOnly(), n, r)
	if err != nil {
		return err
	}
	r.Addf("the Tasks' bare client ÷ the rewrite ceiling: "+renameOnlyCeiling, "objects/s, same run", "%.2f", rates[methodBare]/rate(n, renamed))
	return probeCalls(ctx, e, up, f, max(5, min(20, n/10)), r)
}

// againstCeiling times the no-webhook ceiling twice and migrate.Run once more, so that with
// first (migrate.Run's objects/s just timed) the two are timed A B B A: a drift of the machine
// over those minutes (etcd's database, the page cache, other processes) weighs on both sides
// alike, where timed once each, one after the other, the ratio moved with it.
func againstCeiling(ctx context.Context, e *harness.Env, up *testenv.Upgrade, f *floors, cfg *rest.Config, n int, first float64, r *Result) error {
	var ceilings []time.Duration
	for range 2 {
		d, err := f.timeCeiling(ctx, e, noWebhookCeiling, &apix.CustomResourceConversion{Strategy: apix.NoneConverter}, n, r)
		if err != nil {
			return err
		}
		ceilings = append(ceilings, d)
	}
	second, err := timeMethod(ctx, e, up, cfg, timedMethod{method: methodMigrate, label: methodMigrate + ", timed again after the ceiling"}, n, r)
	if err != nil {
		return err
	}
	// Ratios of objects/s are ratios of the inverse times; the pairs' sums weigh both alike.
	migrateTime := time.Duration(float64(n)/first*float64(time.Second)) + time.Duration(float64(n)/second*float64(time.Second))
	r.Addf("migrate.Run speed ÷ the no-webhook ceiling", fmt.Sprintf("objects/s, timed in turn: migrate.Run, ceiling, ceiling, migrate.Run (%.0f, %.0f, %.0f, %.0f objects/s); goal ≥ 0.80",
		first, rate(n, ceilings[0]), rate(n, ceilings[1]), second), "%.2f", (ceilings[0]+ceilings[1]).Seconds()/migrateTime.Seconds())
	return nil
}

// timedMethod is one timing of a migration method; label names its rows (the method's name
// unless given), profile asks for CPU profiles of migrate.Run meanwhile.
type timedMethod struct {
	method, label string
	profile       bool
}

// timeMethod stores n Tasks at v1alpha1 (at most svmMaxTasks for the StorageVersionMigration),
// times m's method migrating them and checks the result; it returns the objects/s.
func timeMethod(ctx context.Context, e *harness.Env, up *testenv.Upgrade, cfg *rest.Config, m timedMethod, n int, r *Result) (float64, error) {
	if m.label == "" {
		m.label = m.method
	}
	if m.method == methodSVM && n > svmMaxTasks {
		n = svmMaxTasks
	}
	if err := prepareFixture(ctx, e, up, n); err != nil {
		return 0, fmt.Errorf("%s fixture: %w", m.label, err)
	}
	waited, err := settleConversions(ctx, e, taskv1.CRDName)
	if err != nil {
		return 0, err
	}
	r.Addf(m.label+": conversion calls before timing, per Task", "made after the CRD upgrade by the new watch caches listing the fixture; waited for, not counted below",
		"%.2f", waited/float64(max(n, 1)))
	e.Logf("migrating %d Tasks with %s", n, m.label)
	stop, err := watchConversions(ctx, e, up)
	if err != nil {
		return 0, err
	}
	waitProfiles := func() error { return nil }
	if m.profile && n >= profileMinTasks {
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("task-operator-bench-profiles-%d", time.Now().Unix()))
		if waitProfiles, err = profiles(ctx, e, dir, profileDelay, profileWindow); err != nil {
			return 0, err
		}
		r.Add(m.label+": CPU profiles", dir, fmt.Sprintf("%s from %s in: this process (the /convert handler and the migrating client) and kube-apiserver", profileWindow, profileDelay))
	}
	d, err := runMigration(ctx, e, up, cfg, m, n, r)
	if err != nil {
		return 0, err
	}
	if err := waitProfiles(); err != nil {
		return 0, fmt.Errorf("profiles: %w", err)
	}
	load, err := stop()
	if err != nil {
		return 0, err
	}
	r.Addf(m.label, fmt.Sprintf("%.0f objects/s, %d Tasks", rate(n, d), n), "%s", secs(d))
	load.report(r, m.label, n)
	return rate(n, d), checkMigrated(ctx, up, m, n, r)
}

// The methods a migration is timed with.
const (
	methodBare    = "bare client"
	methodMigrate = "migrate.Run"
	methodSVM     = "StorageVersionMigration"
)

// svmMaxTasks caps the StorageVersionMigration's fixture: the in-tree controller rewrites about
// 10 objects/s here, so 10,000 Tasks would take some 17 minutes of a bench run for one figure
// that objects/s already gives.
const svmMaxTasks = 2000

// Profiles are taken of profileWindow of migrate.Run from profileDelay in, at profileMinTasks
// or more (fewer are rewritten within the delay).
const (
	profileMinTasks = 2000
	profileDelay    = 10 * time.Second
	profileWindow   = 20 * time.Second
)

// runMigration runs one method over the n Tasks of the fixture and times it.
func runMigration(ctx context.Context, e *harness.Env, up *testenv.Upgrade, cfg *rest.Config, m timedMethod, n int, r *Result) (time.Duration, error) {
	switch m.method {
	case methodBare:
		began := time.Now()
		done, err := bareRewrite(ctx, tasksAtV1(up), migrate.DefaultPageSize, migrate.DefaultConcurrency)
		if err != nil {
			return 0, fmt.Errorf("bare client: %w", err)
		}
		if done != n {
			return 0, fmt.Errorf("bare client rewrote %d Tasks, want %d", done, n)
		}
		return time.Since(began), nil
	case methodMigrate:
		sum, err := migrate.Run(ctx, cfg, migrate.Options{})
		if err != nil {
			return 0, fmt.Errorf("migrate.Run: %w", err)
		}
		r.Violation(m.label+" failed rewrites", sum.Failed, fmt.Sprintf("%d rewritten, %d conflicts; default options (page %d, concurrency %d)",
			sum.Rewritten, sum.Conflicts, migrate.DefaultPageSize, migrate.DefaultConcurrency))
		return sum.Duration, nil
	default:
		svmCtx, cancel := context.WithTimeout(ctx, timeoutFor(n, 3*time.Minute, 100*time.Millisecond))
		defer cancel()
		d, err := migrate.RunStorageVersionMigration(svmCtx, cfg, fmt.Sprintf("bench-%d", time.Now().UnixNano()))
		if err != nil {
			return 0, fmt.Errorf("StorageVersionMigration: %w", err)
		}
		return d, nil
	}
}

// checkMigrated counts, in etcd, the Tasks a method left at another version than v1. The bare
// client does not trim storedVersions; the others must.
func checkMigrated(ctx context.Context, up *testenv.Upgrade, m timedMethod, n int, r *Result) error {
	stored, err := storedVersionCounts(ctx, up)
	if err != nil {
		return err
	}
	r.Violation(m.label+": Tasks not at v1 in etcd", n-stored[taskv1.GroupVersion.String()], fmt.Sprintf("etcd encodings after: %v", stored))
	if m.method == methodBare {
		return nil
	}
	sv, err := up.CRDStoredVersions(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(sv, []string{"v1"}) {
		r.Violation(m.label+": storedVersions not trimmed", 1, fmt.Sprintf("%v", sv))
	}
	return nil
}

// probeCalls measures the conversion calls of a write at v1 on k Tasks created at v1, then the
// floor under any conversion call on the same Tasks.
func probeCalls(ctx context.Context, e *harness.Env, up *testenv.Upgrade, f *floors, k int, r *Result) error {
	if err := prepareFixture(ctx, e, up, 0); err != nil {
		return fmt.Errorf("write probes: %w", err)
	}
	if err := probeWrites(ctx, e, up, k, r); err != nil {
		return err
	}
	if err := probeCallFloor(ctx, e, up, f, k, floorReadsPerTask*k, r); err != nil {
		return fmt.Errorf("floor probe: %w", err)
	}
	return nil
}

// floorReadsPerTask is how often the floor probe reads each probed Task: enough calls for a
// p99, a few seconds at most.
const floorReadsPerTask = 50

// prepareFixture leaves n Tasks stored at v1alpha1 under this release's CRD.
func prepareFixture(ctx context.Context, e *harness.Env, up *testenv.Upgrade, n int) error {
	if err := up.InstallPreviousRelease(ctx); err != nil {
		return err
	}
	began := time.Now()
	if _, err := up.CreateV1alpha1Tasks(ctx, []string{migrateNS}, n, e.Workers); err != nil {
		return err
	}
	e.Logf("created %d v1alpha1 Tasks in %s", n, time.Since(began).Round(time.Millisecond))
	if err := up.UpgradeCRD(ctx); err != nil {
		return err
	}
	stored, err := storedVersionCounts(ctx, up)
	if err != nil {
		return err
	}
	if stored[v1alpha1.GroupVersion.String()] != n {
		return fmt.Errorf("fixture: etcd encodings %v, want %d at v1alpha1", stored, n)
	}
	return nil
}

// storedVersionCounts counts the Tasks in etcd by the apiVersion they are encoded at.
func storedVersionCounts(ctx context.Context, up *testenv.Upgrade) (map[string]int, error) {
	versions, err := up.StoredTaskVersions(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, v := range versions {
		counts[v]++
	}
	return counts, nil
}

// deleteWebhookConfigurations removes the operator's admission webhook configurations, so that
// Tasks can be written while no operator runs; a starting operator creates them again.
func deleteWebhookConfigurations(ctx context.Context, c client.Client) error {
	o := webhook.DefaultOptions()
	for _, obj := range []client.Object{
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.MutatingConfigName}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingConfigName}},
	} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
