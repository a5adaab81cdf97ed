package reconciler

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
)

// CacheOptions are the cache settings the controller needs; merge them into the manager's
// options. Only Jobs labelled with v1.LabelTaskName are cached (not every Job in the cluster),
// and every cached object keeps only what the controller reads (compactJob, compactTask): with
// 10,000 Tasks and as many Jobs the cache is most of the process's memory. The cache must be
// built by NewCache, which reads Jobs in the form compactJob leaves them.
func CacheOptions() cache.Options {
	hasTask, err := labels.NewRequirement(v1.LabelTaskName, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("label requirement on %s: %v", v1.LabelTaskName, err)) // a constant: cannot fail
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: labels.NewSelector().Add(*hasTask), Transform: compactJob},
			&v1.Task{}:     {Transform: compactTask},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// compactTask drops a Task's managed fields and every annotation the controller does not read
// (readTaskAnnotations), copies its slices into arrays of their length (the JSON decoder grows
// them by doubling: seven conditions sit in room for eight) and shares the strings many Tasks
// repeat: condition types, statuses, reasons and messages, and the metadata's (compactMeta).
// Tasks are written by patches computed against the cached copy (see patch.go): a merge patch
// names only what the controller changed, so what the cache leaves out is never written back.
func compactTask(obj any) (any, error) {
	task, ok := obj.(*v1.Task)
	if !ok {
		return obj, nil
	}
	task.Annotations = onlyReadAnnotations(task.Annotations)
	compactMeta(&task.ObjectMeta)
	task.Labels = cachedLabelSets.share(task.Labels)
	task.Status.ActiveJobs = exact(task.Status.ActiveJobs)
	task.Status.Conditions = exact(task.Status.Conditions)
	for i := range task.Status.Conditions {
		c := &task.Status.Conditions[i]
		c.Type, c.Status = cachedStrings.intern(c.Type), metav1.ConditionStatus(cachedStrings.intern(string(c.Status)))
		c.Reason, c.Message = cachedStrings.intern(c.Reason), cachedStrings.intern(c.Message)
	}
	return task, nil
}

// readTaskAnnotations are the annotations the controller reads on a Task: the run and cancel
// requests (request.go) and what its client could not read (analysis.go). The others are the users' and their tools', which the controller never
// reads, and they can be most of a Task: kubectl apply's last-applied-configuration is the whole
// manifest as applied, a second copy of the Task as a string, and an edit at an old API version
// leaves the conversion's task.example.com/preserved-v1-fields. A key read but not listed here
// would read as absent. AnnotationUnreadable is the operator's own client's, never stored.
var readTaskAnnotations = []string{v1.AnnotationRunRequested, v1.AnnotationCancelRequested, v1.AnnotationUnreadable}

// unreadableSpec is what the operator's client could not read of task's spec and left out of
// it (internal/readguard), "" when nothing.
func unreadableSpec(task *v1.Task) string { return task.Annotations[v1.AnnotationUnreadable] }

// onlyReadAnnotations is m with only readTaskAnnotations, nil if none is there.
func onlyReadAnnotations(m map[string]string) map[string]string {
	var kept map[string]string
	for _, key := range readTaskAnnotations {
		if value, ok := m[key]; ok {
			if kept == nil {
				kept = make(map[string]string, len(readTaskAnnotations))
			}
			kept[key] = value
		}
	}
	return kept
}

// compactMeta drops managed fields and shares the strings objects of one kind repeat: the
// namespace, annotation keys, finalizers, owners' API version and kind. Both decoders (JSON for
// Tasks, protobuf for Jobs) allocate every string on its own (about 150 bytes of a Job's
// metadata are such copies; about 1.5 MiB at 10,000 Jobs). Labels are each caller's: Tasks
// share whole label sets (cachedLabelSets), Jobs hold theirs as pairs (pairsOf).
func compactMeta(meta *metav1.ObjectMeta) {
	meta.ManagedFields = nil
	meta.Namespace = cachedStrings.intern(meta.Namespace)
	meta.Annotations = internedMap(meta.Annotations, false)
	meta.Finalizers = exact(meta.Finalizers)
	for i := range meta.Finalizers {
		meta.Finalizers[i] = cachedStrings.intern(meta.Finalizers[i])
	}
	meta.OwnerReferences = exact(meta.OwnerReferences)
	for i := range meta.OwnerReferences {
		ref := &meta.OwnerReferences[i]
		ref.APIVersion, ref.Kind = cachedStrings.intern(ref.APIVersion), cachedStrings.intern(ref.Kind)
	}
}

// internedMap is m with its keys (and, if values, its values) shared through cachedStrings: a
// map's key cannot be replaced in place, so the map is built again.
func internedMap(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = cachedStrings.intern(v)
		}
		out[cachedStrings.intern(k)] = v
	}
	return out
}

// exact copies s into an array of its length, letting the larger one go.
func exact[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	return slices.Clone(s)
}

// cachedStrings holds one copy of strings that many cached objects repeat.
var cachedStrings = newInterner(maxInternedStrings)

// maxInternedStrings bounds the table: condition types, statuses and reasons, label and
// annotation keys are a closed set, and the messages of resting Tasks repeat; messages naming a
// Job or a time, and label values naming a Task, each do not, and they fill the table within a
// large fleet's first list (every 1,000-odd Jobs). A full table is emptied and fills
// again with what comes next: what repeats is soon back in it, what was offered once goes, and
// a string that first shows up late (a new namespace, a Kueue message shared by a queue's
// waiting Tasks) is still shared.
const maxInternedStrings = 4096

// maxInternedLen bounds the strings the table takes (a condition's reason may be 1 KiB): longer
// ones are one Job's failure message or the like, unlikely to repeat, and the table would keep
// them after their Task is gone (a message may be 32 KiB).
const maxInternedLen = 1024

// boundedTable holds one value per key, at most max keys: a full table is emptied and fills
// again (values handed out stay shared by whoever holds them).
type boundedTable[V any] struct {
	mu     sync.Mutex
	max    int
	values map[string]V
}

// get is the value the table holds for key, made by build and held if there is none.
func (t *boundedTable[V]) get(key string, build func() V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.values[key]; ok {
		return v
	}
	if len(t.values) >= t.max {
		clear(t.values)
	}
	v := build()
	t.values[key] = v
	return v
}

type interner struct{ boundedTable[string] }

func newInterner(max int) *interner {
	return &interner{boundedTable[string]{max: max, values: map[string]string{}}}
}

func (in *interner) intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	return in.get(s, func() string { return s })
}

// cachedLabelSets holds one copy of each set of labels Tasks repeat: Tasks made from one
// template (a chart, a generator, a script's loop) carry the same labels, and a Go map costs at
// least 336 bytes however few its entries.
// Cached Tasks may share a map because nothing writes to a cached object: controller-runtime's
// reader hands out deep copies, and the controller's event handlers and its Job index only
// read.
var cachedLabelSets = newMapInterner(maxSharedLabelSets)

// maxSharedLabelSets bounds the table as maxInternedStrings bounds cachedStrings, and for the
// same reason: Tasks labelled with something of their own (their name, a run ID) share nothing
// and fill it; a full table is emptied and fills again. A set's key is at most
// maxSharedLabelSetKey bytes, so the table pins at most 1 MiB of keys besides its maps.
const (
	maxSharedLabelSets   = 512
	maxSharedLabelSetKey = 2048
)

type mapInterner struct {
	boundedTable[map[string]string]
}

func newMapInterner(max int) *mapInterner {
	return &mapInterner{boundedTable[map[string]string]{max: max, values: map[string]map[string]string{}}}
}

// share is a map equal to m that other equal maps given to share are also given (m itself if
// empty). m itself is not kept: the shared map is built from cachedStrings.
func (in *mapInterner) share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key, ok := labelSetKey(m)
	if !ok {
		return internedMap(m, true)
	}
	return in.get(key, func() map[string]string { return internedMap(m, true) })
}

// labelSetKey spells m's entries in key order, each string after its length, so that no two
// different maps spell alike; false if that is longer than maxSharedLabelSetKey.
func labelSetKey(m map[string]string) (string, bool) {
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 8
	}
	if size > maxSharedLabelSetKey {
		return "", false
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for _, k := range keys {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
		b = strconv.AppendInt(b, int64(len(m[k])), 10)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	return string(b), len(b) <= maxSharedLabelSetKey
}
