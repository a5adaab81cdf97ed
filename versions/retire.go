package versions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"example.com/task-operator/migrate"
)

// RetiredAnnotation on the CRD lists, comma-separated, the versions Retire stopped serving.
// The operator's own install (--install-crd) keeps them unserved when it applies the CRD
// again; Serve removes a version from it.
const RetiredAnnotation = "versions.example.com/retired"

var (
	// ErrBlocked is returned when a preflight check refuses; the error names every blocker.
	ErrBlocked = errors.New("retirement blocked")
	// ErrCRDChanged is returned when the CRD changed between the checks and the switch.
	ErrCRDChanged = errors.New("the CRD changed since the checks")
)

// Blocker is one reason not to stop serving a version yet.
type Blocker struct {
	// Check names the check: storedVersions, managedFields, ownerReferences, scan, watches,
	// writers, requests, conversion.
	Check string
	// What is found, naming objects, users or agents.
	What string
	// Fix says what clears it.
	Fix string
	// Forceable blockers are ignored with Options.Force.
	Forceable bool
}

func (b Blocker) String() string {
	s := fmt.Sprintf("[%s] %s; %s", b.Check, b.What, b.Fix)
	if b.Forceable {
		s += " (or --force)"
	}
	return s
}

// BlockedError lists the blockers of a refused retirement.
type BlockedError struct {
	Version  string
	Blockers []Blocker
}

func (e *BlockedError) Error() string {
	lines := make([]string, len(e.Blockers))
	for i, b := range e.Blockers {
		lines[i] = "  " + b.String()
	}
	return fmt.Sprintf("%v: %s stays served:\n%s", ErrBlocked, e.Version, strings.Join(lines, "\n"))
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// Has reports whether a blocker of check is listed.
func (e *BlockedError) Has(check string) bool {
	return slices.ContainsFunc(e.Blockers, func(b Blocker) bool { return b.Check == check })
}

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

func recentWriters(v *VersionReport, window time.Duration, now time.Time) []UsageEntry {
	var out []UsageEntry
	for _, w := range v.Writers {
		if now.Sub(w.Last) <= window {
			out = append(out, w)
		}
	}
	return out
}

func joinStrings[T fmt.Stringer](items []T) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = it.String()
	}
	return strings.Join(s, "; ")
}

func names[T fmt.Stringer](items []T) string {
	if len(items) > maxListed {
		return joinStrings(items[:maxListed]) + fmt.Sprintf("; and %d more", len(items)-maxListed)
	}
	return joinStrings(items)
}

// preflight runs every check against the report r and the live cluster.
func (c *clients) preflight(ctx context.Context, opts Options, r *Report, version string) []Blocker {
	v := r.Version(version)
	var out []Blocker
	if v.InStoredVersions {
		out = append(out, Blocker{Check: "storedVersions", What: fmt.Sprintf("status.storedVersions %v lists %s: Tasks may be stored at it", r.StoredVersions, version),
			Fix: "run task-operator migrate (or retire with --migrate)"})
	}
	if n := len(v.ManagedFields); n > 0 {
		out = append(out, Blocker{Check: "managedFields", What: fmt.Sprintf("%d Tasks have managedFields entries at %s: %s", n, version, names(v.ManagedFields)),
			Fix: "retire with --migrate (task-operator migrate --force moves them)"})
	}
	if n := len(v.OwnerRefs); n > 0 {
		out = append(out, Blocker{Check: "ownerReferences", What: fmt.Sprintf("%d dependents name their owner as %s/%s, which the garbage collector could no longer resolve: %s", n, r.Group, version, names(v.OwnerRefs)),
			Fix: "retire with --rewrite-owner-refs"})
	}
	if len(r.Skipped) > 0 {
		out = append(out, Blocker{Check: "scan", What: fmt.Sprintf("%d resources could not be scanned for ownerReferences: %s", len(r.Skipped), strings.Join(r.Skipped, "; ")),
			Fix: "run with permission to list them in every namespace", Forceable: true})
	}
	if v.LiveWatches > 0 {
		who := "the apiserver does not name the client; an audit log does (--audit-log)"
		if w := auditAt(r.Audit, version, "watch"); w != "" {
			who = "by the audit log: " + w
		}
		out = append(out, Blocker{Check: "watches", What: fmt.Sprintf("%.0f watches are open at %s (%s)", v.LiveWatches, version, who),
			Fix: "stop those clients or move them to " + r.StorageVersion, Forceable: true})
	}
	if w := recentWriters(v, opts.RecentWindow, r.Taken); len(w) > 0 {
		out = append(out, Blocker{Check: "writers", What: fmt.Sprintf("the admission webhook recorded writes at %s within %s: %s", version, opts.RecentWindow, joinStrings(w)),
			Fix: "move those clients to " + r.StorageVersion, Forceable: true})
	}
	if b, ok := c.observe(ctx, opts, r, version); ok {
		out = append(out, b)
	}
	if err := c.probeConversion(ctx, r, version); err != nil {
		out = append(out, Blocker{Check: "conversion", What: fmt.Sprintf("the conversion webhook is not healthy: %v", err),
			Fix: "fix the operator's webhook first: objects at the other versions and managedFields need it"})
	}
	return out
}

// observe compares the apiserver's request counters at version before and after
// opts.Observe; any request in between is a blocker.
func (c *clients) observe(ctx context.Context, opts Options, r *Report, version string) (Blocker, bool) {
	before := r.Version(version).Requests
	if opts.Observe < 0 {
		return Blocker{}, false
	}
	if before == nil {
		// Unread is not unused: neither the requests nor the open watches at the version are
		// known (the report's watch count is 0 for want of metrics, not for want of watches).
		return Blocker{Check: "requests", What: fmt.Sprintf("the apiserver's metrics could not be read: requests and open watches at %s are unknown", version),
			Fix: "grant get on the /metrics non-resource URL", Forceable: true}, true
	}
	select {
	case <-ctx.Done():
		return Blocker{}, false
	case <-time.After(opts.Observe):
	}
	use, err := c.readAPIServerMetrics(ctx, r.Group, r.Resource)
	if err != nil {
		return Blocker{Check: "requests", What: err.Error(), Fix: "grant get on the /metrics non-resource URL", Forceable: true}, true
	}
	delta := map[string]float64{}
	for verb, n := range use[version].requests {
		if d := n - before[verb]; d > 0 {
			delta[verb] = d
		}
	}
	if len(delta) == 0 {
		return Blocker{}, false
	}
	who := "the apiserver does not name the client; an audit log does (--audit-log)"
	if w := auditAt(r.Audit, version, ""); w != "" {
		who = "by the audit log: " + w
	}
	return Blocker{Check: "requests", What: fmt.Sprintf("requests at %s while checking (%s since the report): %s (%s)", version, time.Since(r.Taken).Round(time.Second), verbs(delta), who),
		Fix: "stop those clients or move them to " + r.StorageVersion, Forceable: true}, true
}

func auditAt(counts []AuditCount, version, verb string) string {
	var out []AuditCount
	for _, a := range counts {
		if a.Version == version && (verb == "" || a.Verb == verb) {
			out = append(out, a)
		}
	}
	return names(out)
}

// probeConversion checks that the apiserver can convert between version and the storage
// version: a server-side dry-run create at version is converted to the storage version for
// admission and back for the answer (nothing is stored, and the operator's record skips dry
// runs). It needs the default namespace.
func (c *clients) probeConversion(ctx context.Context, r *Report, version string) error {
	if r.Conversion != string(apix.WebhookConverter) {
		return nil
	}
	probe := &unstructured.Unstructured{Object: probeTask(r.Group, version, r.Kind)}
	_, err := c.dyn.Resource(crdGVRFromReport(r, version)).Namespace(metav1.NamespaceDefault).
		Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	return err
}

// setServed sets served on version with the CRD's resourceVersion rv ("" reads it now), and
// records the version in RetiredAnnotation (or drops it from there when serving).
func (c *clients) setServed(ctx context.Context, crdName, version string, served bool, rv string) error {
	crd, err := c.getCRD(ctx, crdName)
	if err != nil {
		return err
	}
	if rv != "" && crd.ResourceVersion != rv {
		return fmt.Errorf("%w (resourceVersion %s, checked at %s): run again", ErrCRDChanged, crd.ResourceVersion, rv)
	}
	v, err := versionOf(crd, version)
	if err != nil {
		return err
	}
	v.Served = served
	retired := retiredVersions(crd)
	retired = slices.DeleteFunc(retired, func(s string) bool { return s == version })
	if !served {
		retired = append(retired, version)
	}
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	if len(retired) == 0 {
		delete(crd.Annotations, RetiredAnnotation)
	} else {
		crd.Annotations[RetiredAnnotation] = strings.Join(retired, ",")
	}
	_, err = c.crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %v; run again", ErrCRDChanged, err)
	}
	if err != nil {
		return fmt.Errorf("set served: %t on %s of CRD %s: %w", served, version, crdName, err)
	}
	return nil
}

// RetiredVersions lists the versions RetiredAnnotation names on crd.
func RetiredVersions(crd *apix.CustomResourceDefinition) []string { return retiredVersions(crd) }

func retiredVersions(crd *apix.CustomResourceDefinition) []string {
	var out []string
	for _, s := range strings.Split(crd.Annotations[RetiredAnnotation], ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// waitDiscovery waits until discovery lists groupVersion (listed) or answers 404 for it.
func (c *clients) waitDiscovery(ctx context.Context, groupVersion string, listed bool) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoveryTimeout)
	defer cancel()
	for {
		_, err := c.disc.ServerResourcesForGroupVersion(groupVersion)
		switch {
		case listed && err == nil, !listed && apierrors.IsNotFound(err):
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("discovery of %s: %w", groupVersion, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery still %s %s: %w", yesNo(listed, "lacks", "lists"), groupVersion, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Serve serves version again (the rollback of Retire): served: true, the version dropped from
// RetiredAnnotation, and it waits until discovery lists it. Nothing was lost while it was not
// served: the objects are stored at the storage version and convert to it as before.
func Serve(ctx context.Context, cfg *rest.Config, version string, opts Options) error {
	opts = opts.withDefaults()
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	crd, err := c.getCRD(ctx, opts.CRDName)
	if err != nil {
		return err
	}
	v, err := versionOf(crd, version)
	if err != nil {
		return err
	}
	if v.Served && !slices.Contains(retiredVersions(crd), version) {
		fmt.Fprintf(opts.Out, "%s is served already\n", version)
		return nil
	}
	if opts.DryRun {
		fmt.Fprintf(opts.Out, "plan: set served: true on %s in CRD %s and wait until discovery lists %s/%s\n", version, crd.Name, crd.Spec.Group, version)
		return nil
	}
	if err := c.setServed(ctx, opts.CRDName, version, true, crd.ResourceVersion); err != nil {
		return err
	}
	if err := c.waitDiscovery(ctx, crd.Spec.Group+"/"+version, true); err != nil {
		return err
	}
	if err := c.waitReadable(ctx, crdGVR(crd, version)); err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "%s served again: discovery lists %s/%s and Tasks read at it\n", version, crd.Spec.Group, version)
	return nil
}

// waitReadable waits until a LIST at gvr succeeds: after a change of the CRD the apiserver
// answers "storage is (re)initializing" until the version's watch cache has listed every
// object again, each one converted.
func (c *clients) waitReadable(ctx context.Context, gvr schema.GroupVersionResource) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoveryTimeout)
	defer cancel()
	for {
		_, err := c.meta.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still not readable: %w", resourceName(gvr), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
