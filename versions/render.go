package versions

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxListed bounds the objects named per finding; the counts are always complete.
const maxListed = 10

func crdGVR(crd *apix.CustomResourceDefinition, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
}

// String renders the report for humans.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CRD %s: storage version %s, storedVersions %v, conversion %s, %d Tasks\n",
		r.CRD, r.StorageVersion, r.StoredVersions, r.Conversion, r.Tasks)
	for _, v := range r.Versions {
		r.renderVersion(&b, v)
	}
	fmt.Fprintf(&b, "ownerReferences: scanned %d resources (%d objects) in every namespace\n", r.ScannedResources, r.ScannedObjects)
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "  SKIPPED %s: dependents there are not counted\n", s)
	}
	if len(r.Audit) > 0 {
		b.WriteString("audit log:\n")
		for _, a := range r.Audit {
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("not attributable without an audit log: who reads (GET, LIST, WATCH) or deletes at a version (admission never sees them: the apiserver only counts them, per apiserver), and the user agent of a write whose client set no field manager\n")
	return b.String()
}

func (r *Report) renderVersion(b *strings.Builder, v VersionReport) {
	var flags []string
	flags = append(flags, yesNo(v.Served, "served", "NOT served"))
	if v.Storage {
		flags = append(flags, "storage")
	}
	if v.Deprecated {
		flags = append(flags, "deprecated")
	}
	flags = append(flags, yesNo(v.InStoredVersions, "in storedVersions", "not in storedVersions"))
	fmt.Fprintf(b, "%s: %s\n", v.Name, strings.Join(flags, ", "))
	if v.ServedAgain {
		fmt.Fprintf(b, "  SERVED AGAIN: retired by `task-operator versions retire`, served since (an install applied as shipped?); retire it again, and install with config/components/retire-%s or the chart's crds.retiredVersions\n", v.Name)
	}
	if v.Warning != "" {
		fmt.Fprintf(b, "  warning: %q\n", v.Warning)
	}
	fmt.Fprintf(b, "  stored objects: %s\n", v.StoredObjects)
	if !v.Storage {
		listed(b, "Tasks with managedFields entries at "+v.Name, v.ManagedFields)
		listed(b, "dependents with ownerReferences naming "+r.Group+"/"+v.Name, v.OwnerRefs)
	}
	switch {
	case v.Requests == nil:
		b.WriteString("  requests: unknown (apiserver metrics unreadable)\n")
	default:
		fmt.Fprintf(b, "  requests since the apiserver started: %s; live watches: %.0f\n", verbs(v.Requests), v.LiveWatches)
	}
	if len(v.Writers) == 0 {
		b.WriteString("  writers recorded by the webhook: none\n")
	} else {
		b.WriteString("  writers recorded by the webhook:\n")
		for _, w := range v.Writers {
			fmt.Fprintf(b, "    %s\n", w)
		}
	}
}

func listed[T fmt.Stringer](b *strings.Builder, what string, items []T) {
	fmt.Fprintf(b, "  %s: %d\n", what, len(items))
	for i, it := range items {
		if i == maxListed {
			fmt.Fprintf(b, "    ... and %d more\n", len(items)-maxListed)
			break
		}
		fmt.Fprintf(b, "    %s\n", it)
	}
}

func verbs(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
