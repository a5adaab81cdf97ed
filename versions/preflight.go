package versions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			Fix: "stop those clients or move them to " + r.StorageVersion + " (a watch held since the upgrade may be kube-controller-manager's, its garbage collector's or resource quota controller's: restart kube-controller-manager)", Forceable: true})
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
