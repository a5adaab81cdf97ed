package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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

// crdStore is the part of the CRD client Run uses.
type crdStore interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextv1.CustomResourceDefinition, error)
	UpdateStatus(ctx context.Context, crd *apiextv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextv1.CustomResourceDefinition, error)
}

// taskStore reads and writes Tasks at one version.
type taskStore interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

type dynamicStore struct {
	res dynamic.NamespaceableResourceInterface
}

func (d dynamicStore) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if namespace == "" {
		return d.res.List(ctx, opts)
	}
	return d.res.Namespace(namespace).List(ctx, opts)
}

func (d dynamicStore) Get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	return d.res.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (d dynamicStore) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return d.res.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
}

// migration is the state of one run.
type migration struct {
	opts    Options
	crds    crdStore
	store   taskStore
	limiter *rate.Limiter
	c       counters
	rep     *reporter

	mu       sync.Mutex
	failures []string
	notes    []string
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
		m.mu.Lock()
		sum.Failures = slices.Clone(m.failures)
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

	if slices.Equal(crd.Status.StoredVersions, []string{TargetVersion}) && !opts.Force && !opts.DryRun {
		m.note("storedVersions is already [%s]: every Task is stored at %s, nothing to do", TargetVersion, TargetVersion)
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
		if opts.Namespace != "" {
			m.note("dry run: would rewrite the %s of namespace %q; storedVersions would stay %v (only a migration of all namespaces trims it)", done, opts.Namespace, crd.Status.StoredVersions)
		} else {
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
	m.rep.baseDone = m.c.done()
	if old.ListDone {
		m.note("resuming from checkpoint %s: all %d Tasks were rewritten, only the trim of storedVersions is left", path, old.Total)
	} else {
		m.note("resuming from checkpoint %s: %d Tasks in %d pages already done", path, old.Total, old.Pages)
	}
	return old, nil
}

// rewriteAll walks the pages from cp's continue token and rewrites every Task, saving the
// checkpoint after every page.
func (m *migration) rewriteAll(ctx context.Context, cp *checkpoint) error {
	token := cp.Continue
	firstPage := true
	restarts := 0
	// The checkpoint only advances past pages without failures, so that a rerun retries them.
	clean := true
	for !cp.ListDone {
		list, err := m.store.List(ctx, m.opts.Namespace, metav1.ListOptions{Limit: m.opts.PageSize, Continue: token})
		if err != nil {
			if ctx.Err() != nil {
				return m.interrupted(ctx, cp)
			}
			if token == "" || (!apierrors.IsResourceExpired(err) && !apierrors.IsGone(err)) {
				return fmt.Errorf("migrate: list Tasks: %w", err)
			}
			// The token pins the resourceVersion of the first page; once etcd has compacted it
			// the list cannot continue consistently. The apiserver then offers a token that
			// continues from the same key at the latest revision: nothing before the key needs
			// another rewrite, and whatever was created or changed since is stored at the
			// storage version already, so continuing from there misses nothing.
			if next := inconsistentContinue(err); next != "" {
				m.note("the continue token expired (%v); continuing from the same position with the token the apiserver offered", shortErr(err))
				token = next
				continue
			}
			restarts++
			if restarts > maxListRestarts {
				return fmt.Errorf("migrate: the continue token expired %d times: %w", restarts, err)
			}
			m.note("the continue token expired (%v); restarting the listing from the beginning (rewrites are idempotent)", shortErr(err))
			token, firstPage = "", true
			continue
		}
		items := list.Items
		if firstPage {
			firstPage = false
			total := m.c.done() + int64(len(items))
			if rest := list.GetRemainingItemCount(); rest != nil {
				total += *rest
				m.c.total.Store(total)
			} else if list.GetContinue() == "" {
				m.c.total.Store(total)
			}
		}
		m.c.seen.Add(int64(len(items)))
		if m.opts.DryRun {
			m.c.rewritten.Add(int64(len(items)))
		} else {
			failedBefore := m.c.failed.Load()
			m.rewritePage(ctx, items)
			if ctx.Err() != nil {
				return m.interrupted(ctx, cp)
			}
			if m.c.failed.Load() > failedBefore {
				clean = false
			}
		}
		next := list.GetContinue()
		if clean && !m.opts.DryRun && m.opts.CheckpointFile != "" {
			cp.Pages++
			cp.Continue, cp.ListDone = next, next == ""
			cp.Total, cp.Rewritten = int(m.c.seen.Load()), int(m.c.rewritten.Load())
			cp.Skipped, cp.Conflicts = int(m.c.skipped.Load()), int(m.c.conflicts.Load())
			if err := cp.save(m.opts.CheckpointFile); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	if m.c.total.Load() != m.c.done() {
		m.c.total.Store(m.c.done())
	}
	m.rep.printf("%s", m.rep.line(time.Now()))
	return nil
}

func (m *migration) interrupted(ctx context.Context, cp *checkpoint) error {
	if m.opts.CheckpointFile != "" && !m.opts.DryRun {
		return fmt.Errorf("migrate: interrupted after %d Tasks; run again to resume from checkpoint %s: %w",
			m.c.done(), m.opts.CheckpointFile, context.Cause(ctx))
	}
	return fmt.Errorf("migrate: interrupted after %d Tasks: %w", m.c.done(), context.Cause(ctx))
}

// rewritePage rewrites the items with opts.Concurrency workers and returns when all are done
// or ctx is cancelled.
func (m *migration) rewritePage(ctx context.Context, items []unstructured.Unstructured) {
	jobs := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	for range min(m.opts.Concurrency, len(items)) {
		wg.Go(func() {
			for obj := range jobs {
				m.rewrite(ctx, obj)
			}
		})
	}
feed:
	for i := range items {
		select {
		case jobs <- &items[i]:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
}

// rewrite writes obj back unchanged so that the apiserver stores it at the storage version.
// The Update carries the resourceVersion obj was read at: if the Task changed since, it is read
// again and the fresh copy is written instead, so a concurrent change is never undone.
func (m *migration) rewrite(ctx context.Context, obj *unstructured.Unstructured) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
	conflicts, transient := 0, 0
	for {
		if m.limiter != nil {
			if err := m.limiter.Wait(ctx); err != nil {
				return // cancelled: the page is not checkpointed, a rerun repeats it
			}
		}
		_, err := m.store.Update(ctx, obj)
		switch {
		case err == nil:
			m.c.rewritten.Add(1)
			return
		case ctx.Err() != nil:
			return
		case apierrors.IsNotFound(err):
			m.c.skipped.Add(1)
			return
		case apierrors.IsConflict(err):
			m.c.conflicts.Add(1)
			conflicts++
			if conflicts > maxConflictRetries {
				m.fail(key, fmt.Errorf("still conflicting after %d attempts: %w", conflicts, err))
				return
			}
			fresh, err := m.get(ctx, obj.GetNamespace(), obj.GetName())
			switch {
			case ctx.Err() != nil:
				return
			case apierrors.IsNotFound(err):
				m.c.skipped.Add(1)
				return
			case err != nil:
				m.fail(key, fmt.Errorf("read after conflict: %w", err))
				return
			}
			obj = fresh
		default:
			delay, ok := retriable(err)
			transient++
			if !ok || transient > maxTransientRetries {
				m.fail(key, err)
				return
			}
			if !sleep(ctx, max(delay, backoff(transient))) {
				return
			}
		}
	}
}

// get reads one Task, retrying transient errors.
func (m *migration) get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		obj, err := m.store.Get(ctx, namespace, name)
		if err == nil {
			return obj, nil
		}
		delay, ok := retriable(err)
		if !ok || attempt > maxTransientRetries || !sleep(ctx, max(delay, backoff(attempt))) {
			return nil, err
		}
	}
}

func (m *migration) fail(key string, err error) {
	m.c.failed.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch n := m.c.failed.Load(); {
	case n <= maxFailureSamples:
		m.failures = append(m.failures, key+": "+err.Error())
		m.rep.printf("%s: rewrite of %s failed: %v", m.rep.name, key, err)
	case n == maxFailureSamples+1:
		m.rep.printf("%s: more rewrites failed; only the first %d failures are shown", m.rep.name, maxFailureSamples)
	}
}

func (m *migration) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	m.mu.Lock()
	m.notes = append(m.notes, msg)
	m.mu.Unlock()
	m.rep.printf("%s: %s", m.rep.name, msg)
}

// trim sets storedVersions to [v1] if the CRD is still the one the run started on: same UID,
// same generation (no spec change, so no other storage version was ever in effect), v1 storage.
// The UpdateStatus carries the resourceVersion of that check, so a change in between conflicts.
func (m *migration) trim(ctx context.Context, generation int64, uid types.UID) (after []string, trimmed bool, err error) {
	for attempt := 1; ; attempt++ {
		crd, err := m.crds.Get(ctx, m.opts.CRDName, metav1.GetOptions{})
		if err != nil {
			return nil, false, fmt.Errorf("migrate: re-read CRD %s: %w", m.opts.CRDName, err)
		}
		after = slices.Clone(crd.Status.StoredVersions)
		var why string
		switch storage := storageVersion(crd); {
		case crd.UID != uid:
			why = "the CRD was deleted and created again"
		case storage != TargetVersion:
			why = fmt.Sprintf("the storage version changed to %q", storage)
		case crd.Generation != generation:
			why = fmt.Sprintf("its generation changed from %d to %d", generation, crd.Generation)
		}
		if why != "" {
			m.note("storedVersions NOT trimmed: %s during the run; objects may have been written at another version, run the migration again", why)
			return after, false, fmt.Errorf("migrate: %w: %s; storedVersions left at %v", ErrCRDChanged, why, after)
		}
		if slices.Equal(after, []string{TargetVersion}) {
			m.note("storedVersions already was [%s]", TargetVersion)
			return after, false, nil
		}
		crd.Status.StoredVersions = []string{TargetVersion}
		updated, err := m.crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			return after, false, fmt.Errorf("migrate: set storedVersions of CRD %s: %w", m.opts.CRDName, err)
		}
		return slices.Clone(updated.Status.StoredVersions), true, nil
	}
}

func storageVersion(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func served(crd *apiextv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

// inconsistentContinue returns the continue token a 410 ResourceExpired answer to a paginated
// LIST offers for continuing at the latest revision, or "".
func inconsistentContinue(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Continue
	}
	return ""
}

// retriable reports whether err is worth retrying, and the delay the server asked for.
func retriable(err error) (time.Duration, bool) {
	if secs, ok := apierrors.SuggestsClientDelay(err); ok {
		return time.Duration(secs) * time.Second, true
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return 0, true
	case utilnet.IsConnectionReset(err), utilnet.IsConnectionRefused(err), utilnet.IsProbableEOF(err), errors.Is(err, io.ErrUnexpectedEOF):
		return 0, true
	}
	var netErr net.Error
	return 0, errors.As(err, &netErr) && netErr.Timeout()
}

func backoff(attempt int) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 5)
	return min(d, 5*time.Second)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func shortErr(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return fmt.Sprintf("%d %s", s.Code, s.Reason)
	}
	return err.Error()
}

func isUnreadable(err error) bool {
	return errors.Is(err, errUnreadableCheckpoint)
}
