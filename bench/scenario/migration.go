package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
// CRD, and times a bare client's rewrite of them; then does the same for migrate.Run, times it
// against the rewrite ceiling (rewrite_ceiling.go) and does the same for the in-tree
// StorageVersionMigration; then probes single writes and reads (probeCalls). No operator runs meanwhile (it would start Jobs for the fixture); conversion is served by the
// project's /convert handler in this process. At the end the CRD is deleted and an operator
// started again, which reinstalls it.
func migration(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	up, err := testenv.NewUpgrade(ctx, e.CP)
	if err != nil {
		return err
	}
	err = compareMigrations(ctx, e, up, s, r)
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

func compareMigrations(ctx context.Context, e *harness.Env, up *testenv.Upgrade, s Size, r *Result) error {
	n := s.Tasks
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

	rates, times := map[string]float64{}, map[string]time.Duration{}
	for _, m := range []timedMethod{{method: methodBare}, {method: methodMigrate, profile: true}} {
		if rates[m.method], times[m.method], err = timeMethod(ctx, e, up, cfg, m, n, r); err != nil {
			return err
		}
	}
	if err := againstCeiling(ctx, e, up, f, cfg, n, s.Reps, rates[methodBare], times[methodMigrate], r); err != nil {
		return err
	}
	if rates[methodSVM], _, err = timeMethod(ctx, e, up, cfg, timedMethod{method: methodSVM}, n, r); err != nil {
		return err
	}
	r.Addf("Tasks migrated per method", "stored at v1alpha1 under the previous release's CRD", "%d", n)
	if rates[methodBare] > 0 {
		r.Addf("migrate.Run speed ÷ bare client", fmt.Sprintf("objects/s; same workers (%d) and pages (%d); goal ≥ 0.9", migrate.DefaultConcurrency, migrate.DefaultPageSize),
			"%.2f", rates[methodMigrate]/rates[methodBare])
		r.Addf("StorageVersionMigration speed ÷ migrate.Run", "objects/s", "%.2f", rates[methodSVM]/rates[methodMigrate])
	}
	if s.Reps > 0 {
		if _, err := f.timeCeiling(ctx, e, ceiling{name: renameOnlyCeiling, conv: f.renameOnly()}, n, rates[methodBare], r); err != nil {
			return err
		}
	}
	return probeCalls(ctx, e, up, f, max(5, min(20, n/10)), r)
}

// againstCeiling times the no-webhook ceiling (B) twice and migrate.Run (A) once more: with
// the migrate.Run just timed the runs go A B B A, so that a drift of the machine over those
// minutes (etcd's database, the page cache, other processes) weighs on both sides of goal 2's
// ratio alike, where timed once each, one after the other, the ratio moved with it. The first
// migrate.Run was profiled, so every run is: the profiles' cost weighs alike too.
// splitTimings (the migration's Reps, even; 0 at full size, which keeps make bench within its
// time) adds the arms that split goal 2 into factors, that often each: the same-calls floor (C,
// rewrite_ceiling.go) twice around them, then the Task's-schemas ceiling (D) and the Task-shape
// ceiling (E), the same-calls floor's Floors and writes without a call, with the Task's schemas
// and without them (A B C D E F F E D C B A with two). D tells the calls' share of the gap to
// the no-webhook ceiling from the rest's; E splits the rest into the Task's schemas (D against
// E) and the fixture (E against B: Floors stored at v1 from their creation, v1's bodies with
// their defaults, the mark on each write). F is B with the mark on each write: B's writes are
// unchanged objects, which the apiserver runs twice, where migrate.Run's and every other arm's
// run once.
// The Tasks are deleted first: the Floors are rewritten beside no Task, as every migrate.Run is
// beside no Floor.
func againstCeiling(ctx context.Context, e *harness.Env, up *testenv.Upgrade, f *floors, cfg *rest.Config, n, splitTimings int, bare float64, first time.Duration, r *Result) error {
	if err := up.DeleteCRD(ctx, 10*time.Minute); err != nil {
		return err
	}
	noConversion := &apix.CustomResourceConversion{Strategy: apix.NoneConverter}
	none := func(label string) ceiling {
		return ceiling{name: noWebhookCeiling, label: label, conv: noConversion, profile: true}
	}
	free := func(label string) ceiling {
		return ceiling{name: renameOnlyFloor, label: label, conv: f.renameOnly(), profile: true, taskShaped: true, sameCalls: true}
	}
	schemas := func(label string) ceiling {
		return ceiling{name: taskSchemasCeiling, label: label, conv: noConversion, profile: true, taskShaped: true}
	}
	shape := func(label string) ceiling {
		return ceiling{name: taskShapeCeiling, label: label, conv: noConversion, profile: true, taskShaped: true, anySchema: true}
	}
	marked := func(label string) ceiling {
		return ceiling{name: markedCeiling, label: label, conv: noConversion, profile: true, marked: true}
	}
	order, middle := ceilingOrder(splitTimings, none, free, schemas, shape, marked)
	times := map[string]time.Duration{}
	for _, c := range order {
		d, err := f.timeCeiling(ctx, e, c, n, bare, r)
		if err != nil {
			return err
		}
		times[c.String()] = d
	}
	again := timedMethod{method: methodMigrate, label: methodMigrate + ", again after the ceilings", profile: true}
	_, second, err := timeMethod(ctx, e, up, cfg, again, n, r)
	if err != nil {
		return err
	}
	// The ratio of objects/s over the runs is the ratio of the summed times.
	ours := (first + second).Seconds()
	noneFirst, noneSecond := times[none("first").String()], times[none("second").String()]
	r.Addf("migrate.Run speed ÷ the no-webhook ceiling", fmt.Sprintf("objects/s over four runs timed in turn (A B … B A): migrate.Run %.0f, ceiling %.0f and %.0f, migrate.Run %.0f; goal ≥ 0.80",
		rate(n, first), rate(n, noneFirst), rate(n, noneSecond), rate(n, second)), "%.2f", (noneFirst+noneSecond).Seconds()/ours)
	if splitTimings == 0 {
		return nil
	}
	freeFirst, freeSecond := times[free("first").String()], times[free("second").String()]
	r.Addf("migrate.Run speed ÷ the same-calls floor", fmt.Sprintf("objects/s over four runs timed in turn (A … C … C … A): migrate.Run %.0f, Floors with the Task's schemas and the rename-only webhook, stored, created and rewritten at v1, %.0f and %.0f, migrate.Run %.0f; the same conversion calls per write",
		rate(n, first), rate(n, freeFirst), rate(n, freeSecond), rate(n, second)), "%.2f", (freeFirst+freeSecond).Seconds()/ours)
	reportSchemaCeiling(n, middle[0], middle[1], times, ours, noneFirst+noneSecond, r)
	reportOnePassCeiling(n, middle[2], times, ours, noneFirst+noneSecond, r)
	return nil
}

// ceilingOrder is the order againstCeiling times its ceilings in, after migrate.Run (A): B B
// with k 0; otherwise B C, k timings each of the middle arms (D E F, then F E D: with k even, no
// arm is timed later on average), then C B. It also returns each middle arm's timings, in the
// arms' order.
func ceilingOrder(k int, none, free func(label string) ceiling, middle ...func(label string) ceiling) (order []ceiling, runs [][]ceiling) {
	runs = make([][]ceiling, len(middle))
	if k == 0 {
		return []ceiling{none("first"), none("second")}, runs
	}
	order = []ceiling{none("first"), free("first")}
	for i := range k {
		round := make([]ceiling, len(middle))
		for j, arm := range middle {
			round[j] = arm(fmt.Sprint(i + 1))
			runs[j] = append(runs[j], round[j])
		}
		if i%2 == 1 {
			slices.Reverse(round)
		}
		order = append(order, round...)
	}
	return append(order, free("second"), none("second")), runs
}

// reportOnePassCeiling sets migrate.Run (ours: its two timings, summed) and the no-webhook
// ceiling (none: its two) against the same Floors marked on each write (runs), whose writes the
// apiserver runs once: an unchanged write of an object stored at another version runs twice
// (the store reads it from etcd, finds other bytes, and starts the update again).
func reportOnePassCeiling(n int, runs []ceiling, times map[string]time.Duration, ours float64, none time.Duration, r *Result) {
	marked, rates := meanTime(n, runs, times)
	r.Addf("migrate.Run speed ÷ the one-pass no-webhook ceiling", fmt.Sprintf("mean objects/s: migrate.Run %.0f; the no-webhook ceiling's Floors, each write marked so that it changes the object: %s; goal 2 against a ceiling whose writes run once, as migrate.Run's do",
		float64(2*n)/ours, rates), "%.2f", 2*marked/ours)
	r.Addf("the no-webhook ceiling ÷ the same Floors marked on each write", "mean objects/s, the same Floors stored at v1alpha1, no webhook: what writing them back unchanged costs the apiserver (below 1 when it runs each update twice)",
		"%.2f", 2*marked/none.Seconds())
}

// reportSchemaCeiling sets migrate.Run (ours: its two timings, summed) and the no-webhook
// ceiling (none: its two) against the Task's-schemas ceiling (schemaRuns), and that against the
// Task-shape ceiling (shapeRuns), which the no-webhook ceiling is set against in turn: the
// three ratios of the ceilings multiply to goal 2's.
func reportSchemaCeiling(n int, schemaRuns, shapeRuns []ceiling, times map[string]time.Duration, ours float64, none time.Duration, r *Result) {
	schemas, schemaRates := meanTime(n, schemaRuns, times)
	shape, shapeRates := meanTime(n, shapeRuns, times)
	r.Addf("migrate.Run speed ÷ the Task's schemas without a webhook", fmt.Sprintf("mean objects/s: migrate.Run %.0f; the same-calls floor's Floors and writes with no conversion webhook: %s; the Task's schemas on both sides: what the calls of migrate.Run's writes cost, our webhook's and the apiserver's sides together (and a Task's status subresource, which a Floor lacks)",
		float64(2*n)/ours, schemaRates), "%.2f", 2*schemas/ours)
	r.Addf("the Task's schemas without a webhook ÷ the no-webhook ceiling", "mean objects/s, the same runs, neither making a call: the Task's schemas and the fixture together (the two rows below)",
		"%.2f", none.Seconds()/2/schemas)
	r.Addf("the Task's schemas without a webhook ÷ the same Floors without them", fmt.Sprintf("mean objects/s: the Task-shaped Floors, stored and created at v1, rewritten with the mark, no webhook, with schemas that keep any field: %s; what the Task's schemas cost the apiserver on these Floors: validation (OpenAPI, CEL), pruning and defaulting as each version's watch cache decodes, the field manager's typed view",
		shapeRates), "%.2f", shape/schemas)
	r.Addf("Task-shaped Floors without the Task's schemas ÷ the no-webhook ceiling", "mean objects/s, neither with a schema that checks anything nor a call: what the fixture costs, Floors stored at v1 from their creation (v1's bodies, defaults filled in) and marked on each write against Floors moved from v1alpha1 (v1alpha1's smaller bodies) and written back unchanged",
		"%.2f", none.Seconds()/2/shape)
}

// meanTime is the mean of runs' timings in seconds, and their objects/s for the report.
func meanTime(n int, runs []ceiling, times map[string]time.Duration) (float64, string) {
	var total time.Duration
	rates := make([]string, 0, len(runs))
	for _, c := range runs {
		total += times[c.String()]
		rates = append(rates, fmt.Sprintf("%.0f", rate(n, times[c.String()])))
	}
	return total.Seconds() / float64(len(runs)), strings.Join(rates, ", ")
}

// timedMethod is one timing of a migration method; label names its rows (the method's name
// unless given), profile asks for CPU profiles meanwhile.
type timedMethod struct {
	method, label string
	profile       bool
}

// timeMethod stores n Tasks at v1alpha1 (at most svmMaxTasks for the StorageVersionMigration),
// times m's method migrating them and checks the result; it returns the objects/s and the time.
func timeMethod(ctx context.Context, e *harness.Env, up *testenv.Upgrade, cfg *rest.Config, m timedMethod, n int, r *Result) (float64, time.Duration, error) {
	if m.label == "" {
		m.label = m.method
	}
	if m.method == methodSVM && n > svmMaxTasks {
		n = svmMaxTasks
	}
	if err := prepareFixture(ctx, e, up, n); err != nil {
		return 0, 0, fmt.Errorf("%s fixture: %w", m.label, err)
	}
	waited, err := settleConversions(ctx, e, taskv1.CRDName)
	if err != nil {
		return 0, 0, err
	}
	r.Addf(m.label+": conversion calls before timing, per Task", "made after the CRD upgrade by the new watch caches listing the fixture; waited for, not counted below",
		"%.2f", waited/float64(max(n, 1)))
	e.Logf("migrating %d Tasks with %s", n, m.label)
	stop, err := watchConversions(ctx, e, up)
	if err != nil {
		return 0, 0, err
	}
	waitProfiles, err := profileIf(ctx, e, m.profile, n, m.label, r)
	if err != nil {
		return 0, 0, err
	}
	d, err := runMigration(ctx, e, up, cfg, m, n, r)
	if err != nil {
		return 0, 0, err
	}
	if err := waitProfiles(); err != nil {
		return 0, 0, fmt.Errorf("profiles: %w", err)
	}
	load, err := stop()
	if err != nil {
		return 0, 0, err
	}
	r.Addf(m.label, fmt.Sprintf("%.0f objects/s, %d Tasks", rate(n, d), n), "%s", secs(d))
	load.report(r, m.label, n)
	return rate(n, d), d, checkMigrated(ctx, up, m, n, r)
}

// profileIf takes CPU profiles of the run called label when asked and it rewrites n objects,
// at least profileMinTasks (fewer are done within the delay); wait waits for them.
func profileIf(ctx context.Context, e *harness.Env, asked bool, n int, label string, r *Result) (wait func() error, err error) {
	if !asked || n < profileMinTasks {
		return func() error { return nil }, nil
	}
	dir, err := os.MkdirTemp("", "task-operator-bench-profiles-")
	if err != nil {
		return nil, err
	}
	r.Add(label+": CPU profiles", dir, fmt.Sprintf("%s from %s in: this process (the /convert handler and the rewriting client) and kube-apiserver", profileWindow, profileDelay))
	return profiles(ctx, e, dir, profileDelay, profileWindow)
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
		done, err := bareRewrite(ctx, tasksAtV1(up), migrate.DefaultPageSize, migrate.DefaultConcurrency, nil)
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
		r.Violation(m.label+": failed rewrites", sum.Failed, fmt.Sprintf("%d rewritten, %d conflicts; default options (page %d, concurrency %d)",
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
