package versions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Report is what Status found, per version of the CRD.
type Report struct {
	CRD            string
	Group, Kind    string
	Resource       string
	StorageVersion string
	StoredVersions []string
	Conversion     string
	// Tasks is the number of Tasks listed.
	Tasks    int
	Versions []VersionReport
	// ScannedResources and ScannedObjects count what the ownerReference scan listed.
	ScannedResources, ScannedObjects int
	// Skipped names the resources the ownerReference scan could not list, and why: a
	// dependent there is not counted.
	Skipped []string
	// Notes say what could not be read or attributed.
	Notes []string
	// Audit holds the audit log's counts when one was read.
	Audit []AuditCount
	// Taken is when the report was made.
	Taken time.Time

	crdResourceVersion string
}

// VersionReport is one version's line of the report.
type VersionReport struct {
	Name             string
	Served, Storage  bool
	Deprecated       bool
	Warning          string
	InStoredVersions bool
	// StoredObjects says how many Tasks may be stored at this version, and how that is known.
	StoredObjects string
	// MayHaveStoredObjects is false only when it is proven that none is.
	MayHaveStoredObjects bool
	// ManagedFields are the Tasks with managedFields entries recorded at this version.
	ManagedFields []ManagedFieldsAt
	// OwnerRefs are the dependents whose ownerReferences name a Task at this version.
	OwnerRefs []Dependent
	// Requests counts what the apiserver served at this version since it started, by verb;
	// nil when its metrics could not be read.
	Requests map[string]float64
	// LiveWatches is the number of watches open at this version on that apiserver.
	LiveWatches float64
	// Writers are the users and agents the webhook recorded writing at this version.
	Writers []UsageEntry
	// ServedAgain says the version is served although Retire stopped serving it (the CRD's
	// RetiredAnnotation names it): an install applied as shipped put it back.
	ServedAgain bool
}

// Version returns the report of version, or nil.
func (r *Report) Version(name string) *VersionReport {
	for i := range r.Versions {
		if r.Versions[i].Name == name {
			return &r.Versions[i]
		}
	}
	return nil
}

// Status reports, for every version of the CRD, what still depends on it; see Report. It
// writes the report to opts.Out too.
func Status(ctx context.Context, cfg *rest.Config, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	c, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	r, err := c.status(ctx, opts)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(opts.Out, r.String())
	return r, nil
}

func (c *clients) status(ctx context.Context, opts Options) (*Report, error) {
	crd, err := c.getCRD(ctx, opts.CRDName)
	if err != nil {
		return nil, err
	}
	r := &Report{
		CRD: crd.Name, Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind, Resource: crd.Spec.Names.Plural,
		StorageVersion: storageVersion(crd), StoredVersions: slices.Clone(crd.Status.StoredVersions),
		Conversion: conversionStrategy(crd), Taken: time.Now(),
		crdResourceVersion: crd.ResourceVersion,
	}
	s := &scan{fields: map[string][]ManagedFieldsAt{}, owners: map[string][]Dependent{}}
	tasks := crdGVR(crd, r.StorageVersion)
	if err := c.scanTasks(ctx, s, tasks, opts.PageSize); err != nil {
		return nil, err
	}
	if err := c.scanOwners(ctx, s, r.Group, r.Kind, r.StorageVersion, opts.PageSize); err != nil {
		return nil, err
	}
	r.Tasks, r.ScannedResources, r.ScannedObjects, r.Skipped = s.tasks, s.resources, s.objects, s.skipped

	use, err := c.readAPIServerMetrics(ctx, r.Group, r.Resource)
	if err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("requests and watches per version unknown: %v", err))
	}
	records, note := c.readUsage(ctx, opts.OperatorNamespace)
	if note != "" {
		r.Notes = append(r.Notes, note)
	}
	if opts.AuditLog != "" {
		counts, bad, err := readAuditLog(opts.AuditLog, r.Group, r.Resource)
		if err != nil {
			return nil, err
		}
		r.Audit = counts
		if bad > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("audit log: %d lines did not decode and were skipped", bad))
		}
	}

	for _, v := range crd.Spec.Versions {
		vr := VersionReport{
			Name: v.Name, Served: v.Served, Storage: v.Storage, Deprecated: v.Deprecated,
			InStoredVersions: inStoredVersions(crd, v.Name),
			ServedAgain:      v.Served && slices.Contains(retiredVersions(crd), v.Name),
			ManagedFields:    s.fields[v.Name], OwnerRefs: s.owners[v.Name],
			Writers: writersAt(records, v.Name),
		}
		if v.DeprecationWarning != nil {
			vr.Warning = *v.DeprecationWarning
		}
		vr.MayHaveStoredObjects, vr.StoredObjects = storedAt(vr, r)
		if use != nil {
			u := use[v.Name]
			vr.Requests, vr.LiveWatches = u.requests, u.watches
			if vr.Requests == nil {
				vr.Requests = map[string]float64{}
			}
		}
		r.Versions = append(r.Versions, vr)
	}
	return r, nil
}

// storedAt says how many Tasks may be stored at a version. The apiserver does not say which
// version an object is encoded at; what it guarantees is that status.storedVersions lists
// every version any object may still be stored at (it adds the storage version before it
// writes an object there, and only a migration that rewrote every object, such as
// task-operator migrate, removes one). So a version missing from it has no object, proven;
// one in it may have any of the Tasks.
func storedAt(v VersionReport, r *Report) (bool, string) {
	switch {
	case v.Storage:
		return true, fmt.Sprintf("all %d Tasks written since it became the storage version", r.Tasks)
	case !v.InStoredVersions:
		return false, "none: not in status.storedVersions (only a complete migration removes a version from it)"
	default:
		return true, fmt.Sprintf("up to %d Tasks: it is in status.storedVersions; run task-operator migrate", r.Tasks)
	}
}

// readUsage reads the webhook's usage record; a missing or unreadable one is a note.
func (c *clients) readUsage(ctx context.Context, namespace string) ([]UsageRecord, string) {
	cm, err := c.kube.CoreV1().ConfigMaps(namespace).Get(ctx, UsageConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("no write record: ConfigMap %s/%s does not exist (no operator has recorded a write yet, or it runs with --usage-record-interval=0)", namespace, UsageConfigMap)
	case err != nil:
		return nil, fmt.Sprintf("write record unreadable: %v", err)
	}
	records, bad := DecodeUsage(cm.Data)
	if len(bad) > 0 {
		return records, fmt.Sprintf("write record: keys that do not decode: %s", strings.Join(bad, "; "))
	}
	return records, ""
}
