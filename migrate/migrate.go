package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var (
	// ErrNotStorageVersion is returned when v1 is not yet the CRD's storage version: rewriting
	// would store the Tasks at the old version again.
	ErrNotStorageVersion = errors.New("v1 is not the storage version of the CRD")
	// ErrCRDChanged is returned when the CRD's generation or storage version changed while the
	// Tasks were rewritten; storedVersions is then left alone.
	ErrCRDChanged = errors.New("the CRD changed during the migration")
	// ErrIncomplete is returned when some Tasks could not be rewritten; storedVersions is then
	// left alone.
	ErrIncomplete = errors.New("some Tasks could not be rewritten")
)

const (
	maxConflictRetries  = 8
	maxTransientRetries = 5
	maxListRestarts     = 3
	maxFailureSamples   = 20
)

// Run migrates every stored Task to the storage version v1 and then trims the CRD's
// status.storedVersions to [v1]; see the package documentation. It refuses to start unless v1
// is the CRD's storage version. The returned Summary is filled in as far as the run got, also
// when an error is returned, and is also written to opts.Progress at the end. An interrupted
// run (ctx cancelled) resumes from opts.CheckpointFile when run again.
//
// cfg's client-side rate limit is left as set; an unset one (QPS 0) is switched off rather
// than defaulting to client-go's 5 requests per second, so that opts.QPS is the limit.
func Run(ctx context.Context, cfg *rest.Config, opts Options) (Summary, error) {
	if cfg == nil {
		return Summary{}, errors.New("migrate: no rest config")
	}
	c := rest.CopyConfig(cfg)
	if c.RateLimiter == nil && c.QPS == 0 {
		c.QPS = -1
	}
	if c.UserAgent == "" {
		c.UserAgent = FieldManager
	}
	crds, err := apiextclient.NewForConfig(c)
	if err != nil {
		return Summary{}, fmt.Errorf("migrate: %w", err)
	}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return Summary{}, fmt.Errorf("migrate: %w", err)
	}
	storeFor := func(gvr schema.GroupVersionResource) taskStore { return dynamicStore{dyn.Resource(gvr)} }
	return run(ctx, crds.ApiextensionsV1().CustomResourceDefinitions(), storeFor, opts)
}

// migration is the state of one run.
type migration struct {
	opts    Options
	crds    crdStore
	store   taskStore
	limiter *rate.Limiter
	c       counters
	rep     *reporter

	mu         sync.Mutex
	failures   []string
	fieldsKept []string
	notes      []string
}

func run(ctx context.Context, crds crdStore, storeFor func(schema.GroupVersionResource) taskStore, opts Options) (sum Summary, err error) {
	start := time.Now()
	opts = opts.withDefaults()
	m := &migration{opts: opts, crds: crds}
	m.rep = newReporter(opts.Progress, "migrate "+opts.CRDName, &m.c, start)
	if opts.QPS > 0 {
		m.limiter = rate.NewLimiter(rate.Limit(opts.QPS), 1)
	}
	sum = Summary{CRDName: opts.CRDName, DryRun: opts.DryRun}
	defer func() {
		sum.Duration = time.Since(start)
		sum.Total = int(m.c.seen.Load())
		sum.Rewritten = int(m.c.rewritten.Load())
		sum.Skipped = int(m.c.skipped.Load())
		sum.Conflicts = int(m.c.conflicts.Load())
		sum.Failed = int(m.c.failed.Load())
		sum.ManagedFieldsMoved = int(m.c.fieldsMoved.Load())
		sum.ManagedFieldsKept = int(m.c.fieldsKept.Load())
		m.mu.Lock()
		sum.Failures = slices.Clone(m.failures)
		sum.ManagedFieldsKeptSamples = slices.Clone(m.fieldsKept)
		sum.Notes = slices.Clone(m.notes)
		m.mu.Unlock()
		fmt.Fprintln(opts.Progress, sum.String())
	}()

	crd, err := crds.Get(ctx, opts.CRDName, metav1.GetOptions{})
	if err != nil {
		return sum, fmt.Errorf("migrate: read CRD %s: %w", opts.CRDName, err)
	}
	sum.StoredVersionsBefore = slices.Clone(crd.Status.StoredVersions)
	sum.StoredVersionsAfter = slices.Clone(crd.Status.StoredVersions)
	if storage := storageVersion(crd); storage != TargetVersion {
		return sum, fmt.Errorf("migrate: %w: CRD %s stores new objects at %q; apply the CRD of this release, which makes %s the storage version, then migrate",
			ErrNotStorageVersion, crd.Name, storage, TargetVersion)
	}
	if !served(crd, TargetVersion) {
		return sum, fmt.Errorf("migrate: CRD %s does not serve %s", crd.Name, TargetVersion)
	}
	if opts.Namespace != "" && crd.Spec.Scope != apiextv1.NamespaceScoped {
		return sum, fmt.Errorf("migrate: CRD %s is cluster-scoped; a namespace cannot be chosen", crd.Name)
	}
	generation, uid := crd.Generation, crd.UID
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: TargetVersion, Resource: crd.Spec.Names.Plural}
	m.store = storeFor(gvr)

	// A dry run takes the same decision as the real run, so that it reports what the run will do.
	alreadyMigrated := slices.Equal(crd.Status.StoredVersions, []string{TargetVersion})
	if alreadyMigrated && !opts.Force {
		m.note("%sstoredVersions is already [%s]: every Task is stored at %s, nothing to do", dryRunPrefix(opts.DryRun), TargetVersion, TargetVersion)
		return sum, nil
	}

	cp, err := m.resumeOrStart(crd)
	if err != nil {
		return sum, err
	}
	sum.Resumed = cp.Pages > 0 || cp.ListDone

	m.rep.run(opts.ProgressInterval)
	err = m.rewriteAll(ctx, cp)
	m.rep.close()
	if err != nil {
		return sum, err
	}

	done := fmt.Sprintf("%d Tasks", m.c.seen.Load())
	switch {
	case opts.DryRun:
		switch {
		case opts.Namespace != "":
			m.note("dry run: would rewrite the %s of namespace %q; storedVersions would stay %v (only a migration of all namespaces trims it)", done, opts.Namespace, crd.Status.StoredVersions)
		case alreadyMigrated:
			m.note("dry run: would rewrite %s at %s (--force); storedVersions would stay [%s]", done, TargetVersion, TargetVersion)
		default:
			m.note("dry run: would rewrite %s at %s and then set storedVersions from %v to [%s]", done, TargetVersion, crd.Status.StoredVersions, TargetVersion)
		}
		return sum, nil
	case m.c.failed.Load() > 0:
		return sum, fmt.Errorf("migrate: %w: %d of %d; storedVersions left at %v; fix the cause and run again",
			ErrIncomplete, m.c.failed.Load(), m.c.seen.Load(), crd.Status.StoredVersions)
	case opts.Namespace != "":
		m.note("only namespace %q was migrated: storedVersions left at %v", opts.Namespace, crd.Status.StoredVersions)
		return sum, removeCheckpoint(opts.CheckpointFile)
	}

	after, trimmed, err := m.trim(ctx, generation, uid)
	if after != nil {
		sum.StoredVersionsAfter = after
	}
	sum.Trimmed = trimmed
	if err != nil {
		if errors.Is(err, ErrCRDChanged) {
			// The checkpoint's generation no longer matches: it would not be resumed anyway.
			_ = removeCheckpoint(opts.CheckpointFile)
		}
		return sum, err
	}
	return sum, removeCheckpoint(opts.CheckpointFile)
}

// dryRunPrefix marks the notes of a dry run, which say what the real run would do.
func dryRunPrefix(dryRun bool) string {
	if dryRun {
		return "dry run: "
	}
	return ""
}

// resumeOrStart loads the checkpoint if there is one that belongs to this CRD, namespace and
// CRD generation, and restores its counts; otherwise it starts a fresh one.
func (m *migration) resumeOrStart(crd *apiextv1.CustomResourceDefinition) (*checkpoint, error) {
	fresh := &checkpoint{CRD: crd.Name, CRDUID: string(crd.UID), Generation: crd.Generation, Namespace: m.opts.Namespace, Started: time.Now().UTC()}
	path := m.opts.CheckpointFile
	if path == "" || m.opts.DryRun {
		return fresh, nil
	}
	old, err := loadCheckpoint(path)
	switch {
	case isUnreadable(err):
		return nil, fmt.Errorf("migrate: %w", err)
	case err != nil:
		m.note("ignoring checkpoint: %v; starting from the beginning", err)
		return fresh, nil
	case old == nil:
		return fresh, nil
	case old.CRD != crd.Name || old.CRDUID != string(crd.UID):
		m.note("ignoring checkpoint %s: it belongs to another CRD (%s, uid %s); starting from the beginning", path, old.CRD, old.CRDUID)
		return fresh, nil
	case old.Namespace != m.opts.Namespace:
		m.note("ignoring checkpoint %s: it was written for namespace %q; starting from the beginning", path, old.Namespace)
		return fresh, nil
	case old.Generation != crd.Generation:
		m.note("ignoring checkpoint %s: the CRD changed since it was written (generation %d, now %d); starting from the beginning", path, old.Generation, crd.Generation)
		return fresh, nil
	}
	m.c.seen.Store(int64(old.Total))
	m.c.rewritten.Store(int64(old.Rewritten))
	m.c.skipped.Store(int64(old.Skipped))
	m.c.conflicts.Store(int64(old.Conflicts))
	m.c.fieldsMoved.Store(int64(old.ManagedFieldsMoved))
	m.c.fieldsKept.Store(int64(old.ManagedFieldsKept))
	m.rep.baseDone = m.c.done()
	if old.ListDone {
		m.note("resuming from checkpoint %s: all %d Tasks were rewritten, only the trim of storedVersions is left", path, old.Total)
	} else {
		m.note("resuming from checkpoint %s: %d Tasks in %d pages already done", path, old.Total, old.Pages)
	}
	return old, nil
}
