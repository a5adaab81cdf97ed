package reconciler

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

func labelledJob(ns, name, task string) *cachedJob {
	c, _ := compactJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1.LabelTaskName: task}}})
	return c.(*cachedJob)
}

func syncedIndex() *jobIndex {
	x := newJobIndex()
	x.synced = func() bool { return true }
	return x
}

func listNames(t *testing.T, x *jobIndex, opts ...client.ListOption) []string {
	t.Helper()
	var list batchv1.JobList
	if err := x.list(&list, opts...); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Namespace+"/"+j.Name)
	}
	slices.Sort(names)
	return names
}

func TestJobIndexListsATasksJobsByItsLabel(t *testing.T) {
	x := syncedIndex()
	x.OnAdd(labelledJob("a", "t-1", "t"), true)
	x.OnAdd(labelledJob("a", "t-2", "t"), true)
	x.OnAdd(labelledJob("a", "u-1", "u"), true)
	x.OnAdd(labelledJob("b", "t-1", "t"), true)
	byTask := []client.ListOption{client.InNamespace("a"), client.MatchingLabels{v1.LabelTaskName: "t"}}
	if got, want := listNames(t, x, byTask...), []string{"a/t-1", "a/t-2"}; !slices.Equal(got, want) {
		t.Errorf("list = %v, want %v", got, want)
	}
	if got, want := listNames(t, x), []string{"a/t-1", "a/t-2", "a/u-1", "b/t-1"}; !slices.Equal(got, want) {
		t.Errorf("list everything = %v, want %v", got, want)
	}

	// A Job whose label changes (stripped, or edited) leaves its old Task's list.
	moved := labelledJob("a", "t-2", "u")
	x.OnUpdate(nil, moved)
	if got, want := listNames(t, x, byTask...), []string{"a/t-1"}; !slices.Equal(got, want) {
		t.Errorf("after relabel, list = %v, want %v", got, want)
	}
	// A deletion seen only as a tombstone removes it too.
	x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a/t-1", Obj: labelledJob("a", "t-1", "t")})
	if got := listNames(t, x, byTask...); len(got) != 0 {
		t.Errorf("after delete, list = %v, want none", got)
	}
	if len(x.byTask[taskJobs{"a", "t"}]) != 0 || len(x.byName) != 3 {
		t.Errorf("index left %d Jobs for a/t, %d in all; want 0 and 3", len(x.byTask[taskJobs{"a", "t"}]), len(x.byName))
	}
}

func TestJobIndexHandsOutCopies(t *testing.T) {
	x := syncedIndex()
	x.OnAdd(labelledJob("a", "t-1", "t"), true)
	var job batchv1.Job
	if err := x.get(client.ObjectKey{Namespace: "a", Name: "t-1"}, &job); err != nil {
		t.Fatal(err)
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Errorf("type = %s %s, want batch/v1 Job", job.APIVersion, job.Kind)
	}
	job.Labels[v1.LabelTaskName] = "changed"
	var again batchv1.Job
	if err := x.get(client.ObjectKey{Namespace: "a", Name: "t-1"}, &again); err != nil {
		t.Fatal(err)
	}
	if again.Labels[v1.LabelTaskName] != "t" {
		t.Errorf("a change to a Job read from the index reached the index: label %q", again.Labels[v1.LabelTaskName])
	}
	err := x.get(client.ObjectKey{Namespace: "a", Name: "missing"}, &again)
	if !apierrors.IsNotFound(err) {
		t.Errorf("get of a Job the index lacks = %v, want NotFound", err)
	}
}

func TestJobIndexRefusesReadsBeforeItSynced(t *testing.T) {
	x := newJobIndex()
	x.OnAdd(labelledJob("a", "t-1", "t"), true)
	var list batchv1.JobList
	if err := x.list(&list); err == nil {
		t.Error("list before sync: want an error, not an index that may lack Jobs")
	}
	if err := x.get(client.ObjectKey{Namespace: "a", Name: "t-1"}, &batchv1.Job{}); err == nil {
		t.Error("get before sync: want an error")
	}
}

func TestJobSourceEnqueuesAfterTheIndexShowsTheChange(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	x := syncedIndex()
	task := types.NamespacedName{Namespace: "a", Name: "t"}
	var indexedWhenMapped *cachedJob // what a reconcile started by the event would read
	src := &jobSource{
		cache: &jobCache{jobs: x},
		mapJob: func(_ context.Context, obj client.Object) []reconcile.Request {
			indexedWhenMapped = x.byName[client.ObjectKeyFromObject(obj)]
			return []reconcile.Request{{NamespacedName: task}}
		},
		changed: func(old, new *batchv1.Job) bool { return old.Status.Succeeded != new.Status.Succeeded },
	}
	x.onChange = func(e jobEvent) { src.enqueue(context.Background(), queue, e) }
	take := func() int {
		n := queue.Len()
		for range n {
			item, _ := queue.Get()
			queue.Done(item)
			queue.Forget(item)
		}
		return n
	}

	added := labelledJob("a", "t-1", "t")
	x.OnAdd(added, false)
	if n := take(); n != 1 || indexedWhenMapped != added {
		t.Errorf("a new Job enqueued %d Tasks (want 1), the index showing %v", n, indexedWhenMapped)
	}
	same := labelledJob("a", "t-1", "t")
	same.status.Active = 1 // a pod count: not a change the controller acts on
	x.OnUpdate(nil, same)
	if n := take(); n != 0 {
		t.Errorf("an update that changes nothing the controller reads enqueued %d, want 0", n)
	}
	done := labelledJob("a", "t-1", "t")
	done.status.Succeeded = 1
	x.OnUpdate(nil, done)
	if n := take(); n != 1 || indexedWhenMapped != done {
		t.Errorf("a finished Job enqueued %d Tasks (want 1), the index showing %v", n, indexedWhenMapped)
	}
	x.OnDelete(done)
	if n := take(); n != 1 || indexedWhenMapped != nil {
		t.Errorf("a deleted Job enqueued %d Tasks (want 1), the index still showing %v", n, indexedWhenMapped)
	}
}

// TestJobSourceEnqueuesTheInitialListAtLowPriority pins that jobSource enqueues as
// handler.EnqueueRequestsFromMapFunc (the Watches it replaced) does on controller-runtime's
// default priority queue: the Jobs of the informer's initial list at LowPriority, so that after a
// start or a leader change the backlog of every Task's Jobs does not hold back live events.
func TestJobSourceEnqueuesTheInitialListAtLowPriority(t *testing.T) {
	task := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "t"}}
	mapJob := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{task} }
	for _, initial := range []bool{true, false} {
		want := priorityOf(t, func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			handler.EnqueueRequestsFromMapFunc(mapJob).Create(context.Background(),
				event.CreateEvent{Object: labelledJob("a", "t-1", "t").job(), IsInInitialList: initial}, q)
		})
		got := priorityOf(t, func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			x := syncedIndex()
			src := &jobSource{cache: &jobCache{jobs: x}, mapJob: mapJob, changed: jobChanged}
			x.onChange = func(e jobEvent) { src.enqueue(context.Background(), q, e) }
			x.OnAdd(labelledJob("a", "t-1", "t"), initial)
		})
		if got != want {
			t.Errorf("a Job added (initial list %t) was enqueued at priority %d, want %d as the Watches it replaced", initial, got, want)
		}
	}
}

// priorityOf is the priority at which add puts its one item on a priority queue.
func priorityOf(t *testing.T, add func(workqueue.TypedRateLimitingInterface[reconcile.Request])) int {
	t.Helper()
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	add(q)
	if q.Len() != 1 {
		t.Fatalf("%d items queued, want 1", q.Len())
	}
	_, priority, _ := q.GetWithPriority()
	return priority
}

// TestJobSourceFeedsOneControllerOnly pins that a second jobSource on the same cache (a second
// SetupWithManager on one manager) is refused rather than silently taking every Job event from
// the first controller's queue and feeding the index each event twice.
func TestJobSourceFeedsOneControllerOnly(t *testing.T) {
	informers := &informertest.FakeInformers{}
	jobs := &jobCache{Cache: informers, jobs: newJobIndex()}
	task := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "t"}}
	mapJob := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{task} }
	first := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer first.ShutDown()
	second := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer second.ShutDown()
	if err := (&jobSource{cache: jobs, mapJob: mapJob, changed: jobChanged}).Start(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if err := (&jobSource{cache: jobs, mapJob: mapJob, changed: jobChanged}).Start(context.Background(), second); err == nil {
		t.Error("a second jobSource on the same cache started; want an error")
	}
	informer, err := informers.FakeInformerFor(context.Background(), &batchv1.Job{})
	if err != nil {
		t.Fatal(err)
	}
	informer.Add(labelledJob("a", "t-1", "t"))
	if first.Len() != 1 {
		t.Errorf("the first controller's queue holds %d Tasks after a Job was added, want 1", first.Len())
	}
}

// TestJobIndexLeavesAnInformersJobAsItIs: fed by an informer without compactJob as its
// transform, the index is handed the very Job that informer's store holds and shares with its
// other handlers and readers; taking it in must not write to it (not even the same strings from
// the shared table), or every read of that Job elsewhere races with the index.
func TestJobIndexLeavesAnInformersJobAsItIs(t *testing.T) {
	held := func() *batchv1.Job { // as a decoder leaves it: each slice at its length, each string its own
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Namespace: strings.Clone("a"), Name: "t-1",
			Labels:          map[string]string{strings.Clone(v1.LabelTaskName): strings.Clone("t")},
			Finalizers:      []string{strings.Clone(v1.FinalizerRunOutcome)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: strings.Clone("example.com/v1"), Kind: strings.Clone("Task"), Name: "t"}},
		}}
	}
	x := syncedIndex()
	x.OnAdd(held(), true) // an earlier Job: the table now holds these strings
	job := held()
	finalizer, apiVersion, kind := unsafe.StringData(job.Finalizers[0]), unsafe.StringData(job.OwnerReferences[0].APIVersion), unsafe.StringData(job.OwnerReferences[0].Kind)
	x.OnAdd(job, false)
	x.OnUpdate(job, job)
	x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a/t-1", Obj: job})
	if unsafe.StringData(job.Finalizers[0]) != finalizer || unsafe.StringData(job.OwnerReferences[0].APIVersion) != apiVersion ||
		unsafe.StringData(job.OwnerReferences[0].Kind) != kind {
		t.Error("the index wrote to the informer's Job (its finalizers or owner references), want it left as it is")
	}
}

// TestACachedJobReadsAsTheJobItCameFrom: the cache holds a Job's labels and annotations as
// sorted pairs, not maps; read back (job(), GetLabels, GetAnnotations, a label selector) they
// must be the Job's own, but for annotations of other tools, which the controller never reads.
func TestACachedJobReadsAsTheJobItCameFrom(t *testing.T) {
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		wantAnnotations     map[string]string
	}{
		{"the operator's own", map[string]string{v1.LabelTaskName: "t", v1.LabelRun: "1", v1.LabelAttempt: "2", "app": "nightly"},
			map[string]string{v1.AnnotationTaskUID: "u", v1.AnnotationScheduledTime: "2026-12-07T10:00:00Z"},
			map[string]string{v1.AnnotationTaskUID: "u", v1.AnnotationScheduledTime: "2026-12-07T10:00:00Z"}},
		{"other tools' annotations", map[string]string{v1.LabelTaskName: "t"},
			map[string]string{v1.AnnotationTaskUID: "u", "kueue.x-k8s.io/workload": "w", "task.example.com": "not ours", "task.example.comx/y": "z"},
			map[string]string{v1.AnnotationTaskUID: "u"}},
		{"only other tools' annotations", map[string]string{v1.LabelTaskName: "t"}, map[string]string{"a": "b"}, map[string]string{}},
		{"keys that sort close", map[string]string{v1.LabelTaskName: "t", "a": "1", "a.b": "2", "a/b": "3", "a-b": "4", "A": "5", "b": ""}, nil, nil},
		{"no labels", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decoded := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "t-1", Labels: maps.Clone(tc.labels), Annotations: maps.Clone(tc.annotations)}}
			want := decoded.DeepCopy()
			want.Annotations = tc.wantAnnotations
			if len(want.Annotations) == 0 {
				want.Annotations = nil
			}
			out, err := compactJob(decoded)
			if err != nil {
				t.Fatal(err)
			}
			c := out.(*cachedJob)
			if diff := cmp.Diff(want.ObjectMeta, c.job().ObjectMeta); diff != "" {
				t.Errorf("job() metadata (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Labels, c.GetLabels()); diff != "" {
				t.Errorf("GetLabels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Annotations, c.GetAnnotations()); diff != "" {
				t.Errorf("GetAnnotations (-want +got):\n%s", diff)
			}
			copied := c.DeepCopyObject().(*cachedJob)
			if diff := cmp.Diff(want.ObjectMeta, copied.job().ObjectMeta); diff != "" {
				t.Errorf("a deep copy's metadata (-want +got):\n%s", diff)
			}
			set := labels.Set(tc.labels)
			for _, key := range []string{v1.LabelTaskName, "a", "a.b", "a/b", "a-b", "A", "b", "", "zz", "task"} {
				gotValue, gotOK := c.labels.Lookup(key)
				wantValue, wantOK := set.Lookup(key)
				if gotValue != wantValue || gotOK != wantOK || c.labels.Has(key) != set.Has(key) || c.labels.Get(key) != set.Get(key) {
					t.Errorf("label %q reads %q, %v from the cache, want %q, %v", key, gotValue, gotOK, wantValue, wantOK)
				}
			}
			for _, s := range []string{"task.example.com/name=t", "a", "!a", "a in (1,2)", "a notin (1)", "b=", "app=nightly,a.b=2", "zz"} {
				selector, err := labels.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := selector.Matches(c.labels), selector.Matches(set); got != want {
					t.Errorf("selector %q matches the cached Job: %v, the Job: %v", s, got, want)
				}
			}
		})
	}
}

// TestACachedJobsMetadataReadsTheSameByEveryAccessor: the embedded ObjectMeta's labels and
// annotations are nil; whichever way a reader of metav1.Object comes at a cached Job
// (GetObjectMeta, meta.Accessor), it must see the Job's, and a write must be what is read.
func TestACachedJobsMetadataReadsTheSameByEveryAccessor(t *testing.T) {
	out, err := compactJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "t-1",
		Labels: map[string]string{v1.LabelTaskName: "t"}, Annotations: map[string]string{v1.AnnotationTaskUID: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*cachedJob)
	var accessor metav1.ObjectMetaAccessor = c
	if got := accessor.GetObjectMeta().GetLabels(); got[v1.LabelTaskName] != "t" {
		t.Errorf("GetObjectMeta().GetLabels() = %v, want the Job's labels", got)
	}
	if got := accessor.GetObjectMeta().GetAnnotations(); got[v1.AnnotationTaskUID] != "u" {
		t.Errorf("GetObjectMeta().GetAnnotations() = %v, want the Job's annotations", got)
	}
	o, err := meta.Accessor(c)
	if err != nil {
		t.Fatal(err)
	}
	o.SetLabels(map[string]string{v1.LabelTaskName: "moved"})
	o.SetAnnotations(map[string]string{v1.AnnotationTaskUID: "v", "other": "x"})
	if got := c.GetLabels(); !maps.Equal(got, map[string]string{v1.LabelTaskName: "moved"}) {
		t.Errorf("after SetLabels, GetLabels() = %v", got)
	}
	if got := c.GetAnnotations(); !maps.Equal(got, map[string]string{v1.AnnotationTaskUID: "v"}) {
		t.Errorf("after SetAnnotations, GetAnnotations() = %v, want the project's alone", got)
	}
}
