package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/migrate"
)

const migrateNS = "bench-migrate"

// Migration stores MigrateTasks Tasks at v1alpha1 under the previous release's CRD, upgrades the
// CRD, and times migrate.Run; then does the same again for the in-tree StorageVersionMigration.
// No operator runs meanwhile (it would start Jobs for the fixture); conversion is served by the
// project's converter in this process. At the end the CRD is deleted and an operator started
// again, which reinstalls it.
func Migration(ctx context.Context, e *harness.Env, s Sizes) *Result {
	r := newResult("migration")
	r.Err = migration(ctx, e, s, r)
	e.Logf("restoring the CRD and the operator")
	if err := e.DeleteCRD(ctx, 5*time.Minute); err != nil {
		r.Err = errors.Join(r.Err, err)
	} else if err := e.EnsureOperators(ctx, 1, false, false); err != nil {
		r.Err = errors.Join(r.Err, err)
	}
	return r
}

func migration(ctx context.Context, e *harness.Env, s Sizes, r *Result) error {
	n := s.MigrateTasks
	// Tasks carry the operator's finalizer: delete them, with the CRD, while it runs.
	if err := e.EnsureOperators(ctx, 1, false, false); err != nil {
		return err
	}
	e.Logf("deleting the Task CRD and every Task")
	if err := e.DeleteCRD(ctx, 10*time.Minute); err != nil {
		return err
	}
	if err := e.StopAll(); err != nil {
		return err
	}
	if err := e.DeleteWebhookConfigurations(ctx); err != nil {
		return err
	}
	if err := e.EnsureNamespace(ctx, migrateNS); err != nil {
		return err
	}
	wh, err := harness.StartConversionWebhook(ctx)
	if err != nil {
		return err
	}
	defer wh.Stop()
	cfg := rest.CopyConfig(e.Cfg)
	cfg.QPS, cfg.Burst = -1, 0 // the tools' own settings decide their pace

	var runTime, svmTime time.Duration
	for _, method := range []string{"migrate.Run", "StorageVersionMigration"} {
		if err := prepareFixture(ctx, e, s, n, wh); err != nil {
			return fmt.Errorf("%s fixture: %w", method, err)
		}
		e.Logf("migrating %d Tasks with %s", n, method)
		var d time.Duration
		switch method {
		case "migrate.Run":
			sum, err := migrate.Run(ctx, cfg, migrate.Options{})
			if err != nil {
				return fmt.Errorf("migrate.Run: %w", err)
			}
			d, runTime = sum.Duration, sum.Duration
			r.Violation("migrate.Run failed rewrites", sum.Failed, fmt.Sprintf("%d rewritten, %d conflicts; default options (page %d, concurrency %d)",
				sum.Rewritten, sum.Conflicts, migrate.DefaultPageSize, migrate.DefaultConcurrency))
		default:
			svmCtx, cancel := context.WithTimeout(ctx, timeoutFor(n, 3*time.Minute, 100*time.Millisecond))
			d, err = migrate.RunStorageVersionMigration(svmCtx, cfg, fmt.Sprintf("bench-%d", time.Now().UnixNano()))
			cancel()
			if err != nil {
				return fmt.Errorf("StorageVersionMigration: %w", err)
			}
			svmTime = d
		}
		r.Addf(method, fmt.Sprintf("%.0f objects/s", rate(n, d)), "%s", secs(d))
		stored, err := e.StoredVersions(ctx)
		if err != nil {
			return err
		}
		r.Violation(method+": Tasks not at v1 in etcd", n-stored["example.com/v1"], fmt.Sprintf("etcd encodings after: %v", stored))
		sv, err := e.CRDStoredVersions(ctx)
		if err != nil {
			return err
		}
		if !slices.Equal(sv, []string{"v1"}) {
			r.Violation(method+": storedVersions not trimmed", 1, fmt.Sprintf("%v", sv))
		}
	}
	r.Addf("Tasks migrated per method", "stored at v1alpha1 under the previous release's CRD", "%d", n)
	if runTime > 0 {
		r.Addf("StorageVersionMigration ÷ migrate.Run", "time ratio", "%.2f", svmTime.Seconds()/runTime.Seconds())
	}
	return nil
}

// prepareFixture leaves n Tasks stored at v1alpha1 under this release's CRD.
func prepareFixture(ctx context.Context, e *harness.Env, s Sizes, n int, wh *harness.ConversionWebhook) error {
	if err := e.InstallPreviousRelease(ctx); err != nil {
		return err
	}
	res := e.Dyn.Resource(harness.TaskGVR("v1alpha1")).Namespace(migrateNS)
	began := time.Now()
	err := harness.Parallel(ctx, n, s.Workers, func(ctx context.Context, i int) error {
		_, err := res.Create(ctx, harness.V1alpha1Task(migrateNS, harness.TaskName("mig", i), i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	e.Logf("created %d v1alpha1 Tasks in %s", n, time.Since(began).Round(time.Millisecond))
	if err := e.UpgradeCRD(ctx, wh.URL, wh.CABundle, migrateNS); err != nil {
		return err
	}
	stored, err := e.StoredVersions(ctx)
	if err != nil {
		return err
	}
	if stored["example.com/v1alpha1"] != n {
		return fmt.Errorf("fixture: etcd encodings %v, want %d at v1alpha1", stored, n)
	}
	return nil
}
