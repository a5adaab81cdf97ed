package versions

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"

	"example.com/task-operator/migrate"
)

var (
	// ErrBlocked is returned when a preflight check refuses; the error names every blocker.
	ErrBlocked = errors.New("retirement blocked")
	// ErrCRDChanged is returned when the CRD changed between the checks and the switch.
	ErrCRDChanged = errors.New("the CRD changed since the checks")
)

// RetireResult says what Retire did.
type RetireResult struct {
	Version string
	// Migrated is migrate's summary when Options.Migrate ran it.
	Migrated *migrate.Summary
	// OwnerRefsRewritten counts the dependents patched.
	OwnerRefsRewritten int
	// Retired is true once served is false and discovery no longer lists the version.
	Retired bool
	// Plan is what a dry run would do.
	Plan []string
}

// Retire stops serving version once nothing depends on it; see the preflight checks in
// Blocker. It first clears what the options allow (Migrate, RewriteOwnerRefs), then sets
// served: false with the resourceVersion the checks read (a concurrent change of the CRD
// fails it with ErrCRDChanged), and waits until discovery no longer lists the version.
func Retire(ctx context.Context, cfg *rest.Config, version string, opts Options) (RetireResult, error) {
	opts = opts.withDefaults()
	res := RetireResult{Version: version}
	c, err := newClients(cfg)
	if err != nil {
		return res, err
	}
	crd, err := c.getCRD(ctx, opts.CRDName)
	if err != nil {
		return res, err
	}
	v, err := versionOf(crd, version)
	if err != nil {
		return res, err
	}
	switch {
	case v.Storage:
		return res, fmt.Errorf("%s is the storage version of CRD %s: make another version the storage version and migrate first", version, crd.Name)
	case !v.Served:
		fmt.Fprintf(opts.Out, "%s is already not served; nothing to do (task-operator versions serve %s rolls back)\n", version, version)
		return res, nil
	}

	r, err := c.status(ctx, opts)
	if err != nil {
		return res, err
	}
	if opts.DryRun {
		res.Plan = plan(r, version, opts)
		for _, p := range res.Plan {
			fmt.Fprintf(opts.Out, "plan: %s\n", p)
		}
		return res, nil
	}
	if opts.Migrate && needsMigration(r.Version(version)) {
		if r, err = c.migrate(ctx, opts, r, version, &res); err != nil {
			return res, err
		}
	}
	if opts.RewriteOwnerRefs && len(r.Version(version).OwnerRefs) > 0 {
		n, err := c.rewriteOwnerRefs(ctx, opts, r.Group, r.Kind, r.Version(version).OwnerRefs, r.StorageVersion)
		res.OwnerRefsRewritten = n
		if err != nil {
			return res, err
		}
		if r, err = c.status(ctx, opts); err != nil {
			return res, err
		}
	}

	blockers := c.preflight(ctx, opts, r, version)
	var hard []Blocker
	for _, b := range blockers {
		if b.Forceable && opts.Force {
			fmt.Fprintf(opts.Out, "forced past: %s\n", b)
			continue
		}
		hard = append(hard, b)
	}
	if len(hard) > 0 {
		return res, &BlockedError{Version: version, Blockers: hard}
	}

	if err := c.setServed(ctx, opts.CRDName, version, false, r.crdResourceVersion); err != nil {
		return res, err
	}
	fmt.Fprintf(opts.Out, "%s: served: false; waiting until discovery no longer lists %s/%s\n", version, r.Group, version)
	if err := c.waitDiscovery(ctx, r.Group+"/"+version, false); err != nil {
		return res, err
	}
	res.Retired = true
	fmt.Fprintf(opts.Out, "%s retired: discovery no longer lists it; Tasks stay readable at the served versions; roll back with task-operator versions serve %s\n", version, version)
	return res, nil
}

func needsMigration(v *VersionReport) bool {
	return v.InStoredVersions || len(v.ManagedFields) > 0
}

// migrate runs migrate.Run, forced when storedVersions is already trimmed (so that the
// managedFields entries still at the version move), and reports again.
func (c *clients) migrate(ctx context.Context, opts Options, r *Report, version string, res *RetireResult) (*Report, error) {
	mo := migrate.Options{
		CRDName: opts.CRDName, QPS: opts.QPS, CheckpointFile: opts.MigrateCheckpoint, Progress: opts.Out,
		Force: !r.Version(version).InStoredVersions,
	}
	fmt.Fprintf(opts.Out, "migrating: %s is in storedVersions or has managedFields entries\n", version)
	sum, err := migrate.Run(ctx, c.cfg, mo)
	res.Migrated = &sum
	if err != nil {
		return nil, fmt.Errorf("migrate before retiring %s: %w", version, err)
	}
	return c.status(ctx, opts)
}

func plan(r *Report, version string, opts Options) []string {
	v := r.Version(version)
	var p []string
	if needsMigration(v) {
		if opts.Migrate {
			p = append(p, fmt.Sprintf("run task-operator migrate (storedVersions %v, %d Tasks with managedFields at %s)", r.StoredVersions, len(v.ManagedFields), version))
		} else {
			p = append(p, fmt.Sprintf("REFUSE: storedVersions %v / %d Tasks with managedFields at %s (--migrate moves them)", r.StoredVersions, len(v.ManagedFields), version))
		}
	}
	if n := len(v.OwnerRefs); n > 0 {
		if opts.RewriteOwnerRefs {
			p = append(p, fmt.Sprintf("rewrite the ownerReferences of %d dependents to %s/%s, at most %.0f per second", n, r.Group, r.StorageVersion, opts.QPS))
		} else {
			p = append(p, fmt.Sprintf("REFUSE: %d dependents name %s/%s in ownerReferences (--rewrite-owner-refs rewrites them)", n, r.Group, version))
		}
	}
	if v.LiveWatches > 0 {
		p = append(p, fmt.Sprintf("REFUSE unless --force: %.0f watches open at %s", v.LiveWatches, version))
	}
	if w := recentWriters(v, opts.RecentWindow, r.Taken); len(w) > 0 {
		p = append(p, fmt.Sprintf("REFUSE unless --force: recent writers at %s: %s", version, joinStrings(w)))
	}
	if len(r.Skipped) > 0 {
		p = append(p, fmt.Sprintf("REFUSE unless --force: %d resources not scanned for ownerReferences", len(r.Skipped)))
	}
	p = append(p, fmt.Sprintf("watch the apiserver's requests at %s for %s, probe the conversion webhook", version, opts.Observe))
	p = append(p, fmt.Sprintf("set served: false on %s in CRD %s (resourceVersion %s) and wait until discovery drops %s/%s", version, r.CRD, r.crdResourceVersion, r.Group, version))
	return p
}
