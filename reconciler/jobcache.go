package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// The cache keeps Jobs as cachedJobs: a batch/v1 Job struct is 1,320 bytes even with its pod
// template emptied (the template is held by value), and at 10,000 Jobs those structs were the
// largest item of the operator's heap. A controller-runtime cache can only hand out the type
// it stores, so Jobs are read through jobCache, which serves them from jobIndex, and the
// controller learns of Job events from jobSource, which enqueues only after jobIndex has taken
// the event in: a reconcile never reads an index older than the event that started it.

// cachedJob is what the controller reads of a Job (observeJob, ownership, finalizers): its
// metadata but for managed fields and annotations not the project's own, spec.suspend and
// spec.completions, and its status but for the UIDs of uncounted pods. The labels and
// annotations are held as stringPairs, not in ObjectMeta's maps (which are nil): a Go map
// costs at least 336 bytes, twice what a Job's few entries take as pairs. Read them through
// GetLabels and GetAnnotations, or job().
type cachedJob struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	labels      stringPairs
	annotations stringPairs
	suspend     *bool
	completions *int32
	status      batchv1.JobStatus
}

// compactJob is the Job informer's transform. Like any transform it owns the Job it is given:
// the cachedJob keeps the Job's metadata slices and writes shared strings into them.
func compactJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	labels, annotations := pairsOf(job.Labels, true), pairsOf(projectAnnotations(job.Annotations), false)
	job.Labels, job.Annotations = nil, nil
	c := &cachedJob{ObjectMeta: job.ObjectMeta, labels: labels, annotations: annotations,
		suspend: job.Spec.Suspend, completions: job.Spec.Completions, status: job.Status}
	compactMeta(&c.ObjectMeta)
	c.status.UncountedTerminatedPods = nil
	return c, nil
}

// projectAnnotations is m without the annotations of other tools (whatever is not under
// task.example.com/): the controller reads only its own on a Job, and writes a Job by merge
// patches computed against the cached copy, which never name what the cache left out.
func projectAnnotations(m map[string]string) map[string]string {
	for k := range m {
		if !strings.HasPrefix(k, v1.AnnotationPrefix) {
			m = maps.Clone(m)
			maps.DeleteFunc(m, func(k, _ string) bool { return !strings.HasPrefix(k, v1.AnnotationPrefix) })
			return m
		}
	}
	return m
}

// GetLabels is the Job's labels as a map of its own.
func (c *cachedJob) GetLabels() map[string]string { return c.labels.asMap() }

// GetAnnotations is the Job's annotations (the project's own) as a map of its own.
func (c *cachedJob) GetAnnotations() map[string]string { return c.annotations.asMap() }

// SetLabels and SetAnnotations write the pairs GetLabels and GetAnnotations read; nothing in
// the controller writes to a cached Job, but ObjectMeta's own would write maps nobody reads.
func (c *cachedJob) SetLabels(m map[string]string) { c.labels = pairsOf(m, true) }

func (c *cachedJob) SetAnnotations(m map[string]string) {
	c.annotations = pairsOf(projectAnnotations(m), false)
}

// GetObjectMeta is c itself, whose metadata reads include its labels and annotations (the
// embedded ObjectMeta's are nil).
func (c *cachedJob) GetObjectMeta() metav1.Object { return c }

// job is c as a batch/v1 Job of its own: nothing of it is shared with c.
func (c *cachedJob) job() *batchv1.Job {
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"}}
	c.ObjectMeta.DeepCopyInto(&job.ObjectMeta)
	job.Labels, job.Annotations = c.labels.asMap(), c.annotations.asMap()
	job.Spec.Suspend = copyOf(c.suspend)
	job.Spec.Completions = copyOf(c.completions)
	c.status.DeepCopyInto(&job.Status)
	return job
}

func (c *cachedJob) DeepCopyObject() runtime.Object {
	out := &cachedJob{TypeMeta: c.TypeMeta, suspend: copyOf(c.suspend), completions: copyOf(c.completions)}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.labels, out.annotations = slices.Clone(c.labels), slices.Clone(c.annotations)
	c.status.DeepCopyInto(&out.status)
	return out
}

// stringPairs is a small map held as a slice, keys and values in turn, sorted by key; it reads
// as labels.Labels. Never written after it is made.
type stringPairs []string

// pairsOf is m as stringPairs with its keys (and, if values, its values) shared through
// cachedStrings; nil for an empty m.
func pairsOf(m map[string]string, values bool) stringPairs {
	if len(m) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	p := make(stringPairs, 0, 2*len(keys))
	for _, k := range keys {
		v := m[k]
		if values {
			v = cachedStrings.intern(v)
		}
		p = append(p, cachedStrings.intern(k), v)
	}
	return p
}

func (p stringPairs) Lookup(key string) (string, bool) {
	lo, hi := 0, len(p)/2
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch k := p[2*mid]; {
		case k == key:
			return p[2*mid+1], true
		case k < key:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return "", false
}

func (p stringPairs) Has(key string) bool {
	_, ok := p.Lookup(key)
	return ok
}

func (p stringPairs) Get(key string) string {
	v, _ := p.Lookup(key)
	return v
}

// asMap is p as a map of its own, nil when p is empty (as a decoded Job's absent labels are).
func (p stringPairs) asMap() map[string]string {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// taskJobs names the Jobs labelled for one Task: its namespace and LabelTaskName's value.
type taskJobs struct{ namespace, label string }

// jobIndex holds the cached Jobs by name and by the Task their label names, fed by the Job
// informer's events.
type jobIndex struct {
	mu       sync.RWMutex
	byName   map[types.NamespacedName]*cachedJob
	byTask   map[taskJobs][]*cachedJob // a Task has a few Jobs: a slice costs less than a map
	synced   func() bool
	onChange func(e jobEvent)
}

// jobEvent is a change the index took in: old is nil for a new Job, new is nil for a deleted one;
// initial marks an add of the informer's initial list.
type jobEvent struct {
	old, new *cachedJob
	initial  bool
}

func newJobIndex() *jobIndex {
	return &jobIndex{byName: map[types.NamespacedName]*cachedJob{}, byTask: map[taskJobs][]*cachedJob{}}
}

func (x *jobIndex) OnAdd(obj any, initial bool) { x.put(asCachedJob(obj), initial) }

func (x *jobIndex) OnUpdate(_, obj any) { x.put(asCachedJob(obj), false) }

func (x *jobIndex) OnDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	job := asCachedJob(obj)
	if job == nil {
		return
	}
	x.mu.Lock()
	old := x.drop(types.NamespacedName{Namespace: job.Namespace, Name: job.Name})
	notify := x.onChange
	x.mu.Unlock()
	if old == nil {
		old = job // the tombstone of a Job the index never held
	}
	if notify != nil {
		notify(jobEvent{old: old})
	}
}

func asCachedJob(obj any) *cachedJob {
	switch o := obj.(type) {
	case *cachedJob:
		return o
	case *batchv1.Job: // an informer without compactJob as its transform
		// That informer's store holds o and shares it with its other readers, while compactJob
		// writes to the Job it is given (compactMeta shares its strings in place): it gets a copy.
		c, _ := compactJob(o.DeepCopy())
		return c.(*cachedJob)
	}
	return nil
}

func (x *jobIndex) put(job *cachedJob, initial bool) {
	if job == nil {
		return
	}
	x.mu.Lock()
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	old := x.drop(key)
	x.byName[key] = job
	if label, ok := job.labels.Lookup(v1.LabelTaskName); ok {
		tk := taskJobs{job.Namespace, label}
		x.byTask[tk] = append(x.byTask[tk], job)
	}
	notify := x.onChange
	x.mu.Unlock()
	if notify != nil {
		notify(jobEvent{old: old, new: job, initial: initial})
	}
}

// drop removes the Job called key and returns it; x.mu is held.
func (x *jobIndex) drop(key types.NamespacedName) *cachedJob {
	old, ok := x.byName[key]
	if !ok {
		return nil
	}
	delete(x.byName, key)
	if label, ok := old.labels.Lookup(v1.LabelTaskName); ok {
		tk := taskJobs{old.Namespace, label}
		if rest := slices.DeleteFunc(x.byTask[tk], func(j *cachedJob) bool { return j == old }); len(rest) > 0 {
			x.byTask[tk] = slices.Clip(rest)
		} else {
			delete(x.byTask, tk)
		}
	}
	return old
}

// errJobIndexNotSynced is returned for reads before jobSource has filled the index.
var errJobIndexNotSynced = errors.New("the Job index has not synced yet (jobSource starts it with the controller)")

func (x *jobIndex) ready() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.synced != nil && x.synced()
}

func (x *jobIndex) get(key client.ObjectKey, out *batchv1.Job) error {
	if !x.ready() {
		return errJobIndexNotSynced
	}
	x.mu.RLock()
	job, ok := x.byName[key]
	x.mu.RUnlock()
	if !ok {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
	}
	*out = *job.job()
	return nil
}

func (x *jobIndex) list(out *batchv1.JobList, opts ...client.ListOption) error {
	if !x.ready() {
		return errJobIndexNotSynced
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return fmt.Errorf("list jobs: field selectors are not supported by the Job index")
	}
	selector := o.LabelSelector
	if selector == nil {
		selector = labels.Everything()
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	out.Items = nil
	add := func(job *cachedJob) {
		if (o.Namespace == "" || job.Namespace == o.Namespace) && selector.Matches(job.labels) {
			out.Items = append(out.Items, *job.job())
		}
	}
	if label, ok := selector.RequiresExactMatch(v1.LabelTaskName); ok && o.Namespace != "" {
		for _, job := range x.byTask[taskJobs{o.Namespace, label}] {
			add(job)
		}
		return nil
	}
	for _, job := range x.byName {
		add(job)
	}
	return nil
}

// jobCache is the manager's cache with Jobs read from the Job index.
type jobCache struct {
	cache.Cache
	jobs *jobIndex
}

// NewCache builds the manager's cache for the controller (manager.Options.NewCache): Jobs as
// CacheOptions transforms them are read from the controller's Job index, everything else from
// controller-runtime's cache.
func NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &jobCache{Cache: c, jobs: newJobIndex()}, nil
}

func (c *jobCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if job, ok := obj.(*batchv1.Job); ok {
		return c.jobs.get(key, job)
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

func (c *jobCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if jobs, ok := list.(*batchv1.JobList); ok {
		return c.jobs.list(jobs, opts...)
	}
	return c.Cache.List(ctx, list, opts...)
}

// jobSource feeds the Job index from the cache's Job informer and enqueues the Tasks a Job
// event concerns (mapJob) once the index shows it; updates only when changed says so.
type jobSource struct {
	cache   *jobCache
	mapJob  func(context.Context, client.Object) []reconcile.Request
	changed func(old, new *batchv1.Job) bool
}

func (s *jobSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	informer, err := s.cache.Cache.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return fmt.Errorf("job informer: %w", err)
	}
	// The index has one subscriber: a second controller would take the first one's Job events
	// and, with a second handler, feed the index every event twice, out of order between them.
	index := s.cache.jobs
	index.mu.Lock()
	taken := index.onChange != nil
	if !taken {
		index.onChange = func(e jobEvent) { s.enqueue(ctx, queue, e) }
	}
	index.mu.Unlock()
	if taken {
		return errors.New("job index: another controller already reads Jobs from this cache (one Task controller per manager)")
	}
	reg, err := informer.AddEventHandler(index)
	if err != nil {
		return fmt.Errorf("job index handler: %w", err)
	}
	index.mu.Lock()
	index.synced = reg.HasSynced
	index.mu.Unlock()
	return nil
}

// enqueue adds the Tasks a Job event concerns, as handler.EnqueueRequestsFromMapFunc would for
// the old and the new Job; an update only if changed says it matters. On a priority queue (the
// controller's default) the initial list and resyncs go in at handler.LowPriority, as that
// handler puts them: after a start the backlog of every Task's Jobs must not hold back live events.
func (s *jobSource) enqueue(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request], e jobEvent) {
	if e.old != nil && e.new != nil && !s.changed(e.old.job(), e.new.job()) {
		return
	}
	add := queue.Add
	unchanged := e.old != nil && e.new != nil && e.old.ResourceVersion == e.new.ResourceVersion
	if pq, ok := queue.(priorityqueue.PriorityQueue[reconcile.Request]); ok && (e.initial || unchanged) {
		add = func(req reconcile.Request) {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
		}
	}
	seen := map[reconcile.Request]bool{}
	for _, job := range []*cachedJob{e.old, e.new} {
		if job == nil {
			continue
		}
		for _, req := range s.mapJob(ctx, job) {
			if !seen[req] {
				seen[req] = true
				add(req)
			}
		}
	}
}

// WaitForSync holds the controller's workers until the index holds every cached Job.
func (s *jobSource) WaitForSync(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return s.cache.jobs.ready(), nil
	})
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("waiting for the Job index to sync: %w", err)
	}
	return nil
}

func (s *jobSource) String() string { return "Jobs through the controller's Job index" }
