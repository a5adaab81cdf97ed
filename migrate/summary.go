package migrate

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Summary reports what a run did. Counts include the work of earlier, interrupted runs that
// this one resumed from a checkpoint.
type Summary struct {
	// CRDName is the CRD that was migrated.
	CRDName string
	// Total is the number of Tasks listed.
	Total int
	// Rewritten counts the Tasks written back at the storage version (in a dry run: the Tasks
	// that would be).
	Rewritten int
	// Skipped counts the Tasks deleted between the LIST and their rewrite.
	Skipped int
	// Conflicts counts rewrites that met a concurrent change and were read again and retried.
	Conflicts int
	// Failed counts the Tasks that could not be rewritten; see Failures.
	Failed int
	// Failures holds a sample of the failures, as "namespace/name: error".
	Failures []string
	// ManagedFieldsMoved counts the rewritten Tasks whose managedFields entries recorded at
	// v1alpha1 or v1beta1 were moved to v1 (in a dry run: would be).
	ManagedFieldsMoved int
	// ManagedFieldsKept counts the rewritten Tasks whose entries at old versions were left as
	// they were, because a field path in them has no v1 counterpart; ManagedFieldsKeptSamples
	// says why for some of them, as "namespace/name: reason". Their ownership stays as it was,
	// and every write to them still converts to those versions.
	ManagedFieldsKept        int
	ManagedFieldsKeptSamples []string
	// Duration is the wall time of this run.
	Duration time.Duration
	// StoredVersionsBefore and StoredVersionsAfter are the CRD's status.storedVersions when
	// the run started and when it ended.
	StoredVersionsBefore, StoredVersionsAfter []string
	// Trimmed is true when this run set storedVersions to [v1].
	Trimmed bool
	// DryRun is true when nothing was written.
	DryRun bool
	// Resumed is true when the run continued from a checkpoint.
	Resumed bool
	// Notes explains anything out of the ordinary: a resumed run, an expired continue token, why
	// storedVersions was not trimmed.
	Notes []string
}

// String renders the summary for humans, on one or more lines.
func (s Summary) String() string {
	var b strings.Builder
	name := s.CRDName
	if name == "" {
		name = DefaultCRDName
	}
	if s.DryRun {
		fmt.Fprintf(&b, "dry run of the %s migration to %s: %d objects listed, %d would be rewritten", name, TargetVersion, s.Total, s.Rewritten)
	} else {
		fmt.Fprintf(&b, "%s migration to %s: %d objects, %d rewritten, %d skipped (deleted), %d conflicts retried, %d failed",
			name, TargetVersion, s.Total, s.Rewritten, s.Skipped, s.Conflicts, s.Failed)
	}
	fmt.Fprintf(&b, " in %s", s.Duration.Round(time.Millisecond))
	if secs := s.Duration.Seconds(); secs > 0 && s.Total > 0 {
		fmt.Fprintf(&b, " (%.1f objects/s)", float64(s.Total)/secs)
	}
	b.WriteString("\n")
	if s.ManagedFieldsMoved > 0 || s.ManagedFieldsKept > 0 {
		verb := "moved"
		if s.DryRun {
			verb = "would be moved"
		}
		fmt.Fprintf(&b, "managedFields: entries at old versions %s to %s on %d objects; left as they were on %d (a field without a %s counterpart)\n",
			verb, TargetVersion, s.ManagedFieldsMoved, s.ManagedFieldsKept, TargetVersion)
	}
	switch {
	case s.Trimmed:
		fmt.Fprintf(&b, "storedVersions: %v -> %v\n", s.StoredVersionsBefore, s.StoredVersionsAfter)
	case s.DryRun && slices.Equal(s.StoredVersionsBefore, []string{TargetVersion}):
		fmt.Fprintf(&b, "storedVersions: %v (would stay)\n", s.StoredVersionsBefore)
	case s.DryRun:
		fmt.Fprintf(&b, "storedVersions: %v (would become [%s])\n", s.StoredVersionsBefore, TargetVersion)
	case slices.Equal(s.StoredVersionsAfter, []string{TargetVersion}):
		fmt.Fprintf(&b, "storedVersions: %v (already)\n", s.StoredVersionsAfter)
	default:
		fmt.Fprintf(&b, "storedVersions: %v (not trimmed)\n", s.StoredVersionsAfter)
	}
	for _, f := range s.Failures {
		fmt.Fprintf(&b, "failed: %s\n", f)
	}
	for _, k := range s.ManagedFieldsKeptSamples {
		fmt.Fprintf(&b, "managedFields kept: %s\n", k)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
