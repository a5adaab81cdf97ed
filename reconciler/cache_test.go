package reconciler

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// TestInternerKeepsSharingOnceFull: the controller writes condition messages that name
// a Job or a time ("Job t-17-0-1 succeeded", "next run at ..."), one or more per Task, and
// compactTask offers every one of them to the table. A fleet of a few thousand Tasks fills it
// with such one-off strings within its first list; from then on nothing new is ever shared,
// for the life of the process: a reason, a Kueue message or a namespace that first shows up
// later is held once per Task, which is what the table is for.
func TestInternerKeepsSharingOnceFull(t *testing.T) {
	in := newInterner(maxInternedStrings)
	for i := range 5000 {
		for _, s := range []string{"team-a", "Ready", "True", "Succeeded", fmt.Sprintf("Job t%d-0-1 succeeded", i)} {
			in.intern(strings.Clone(s))
		}
	}
	// Later, many Tasks in a new namespace wait in a queue with the same Kueue message.
	first := in.intern(strings.Clone("couldn't assign flavors to pod set main: insufficient quota"))
	second := in.intern(strings.Clone("couldn't assign flavors to pod set main: insufficient quota"))
	if unsafe.StringData(first) != unsafe.StringData(second) {
		t.Error("a message repeated by many Tasks after the table filled up is held once per Task, want one copy")
	}
	if len(in.values) > maxInternedStrings {
		t.Errorf("%d strings held, want at most %d", len(in.values), maxInternedStrings)
	}
}

// TestInternerDoesNotPinLongStrings: condition messages may be 32 KiB (the CRD's bound) and a
// Job's failure message is copied into them; the table keeps what it takes for the life of the
// process, after the Task is gone: 4096 such messages pin 128 MiB.
func TestInternerDoesNotPinLongStrings(t *testing.T) {
	in := newInterner(maxInternedStrings)
	for i := range 512 {
		in.intern(fmt.Sprintf("%d: %s", i, strings.Repeat("x", 32<<10)))
	}
	held := 0
	for s := range in.values {
		held += len(s)
	}
	if held > 1<<20 {
		t.Errorf("the table pins %d MiB of 32 KiB messages, want long one-off strings not held", held>>20)
	}
}

// TestCachedMetadataSharesRepeatedStrings: every Job the operator writes carries the same label
// keys, run and attempt numbers, owner API version and kind, and its Task's namespace; each
// decoded Job holds its own copy of all of them unless the transform shares them.
func TestCachedMetadataSharesRepeatedStrings(t *testing.T) {
	decoded := func(name string) *batchv1.Job { // every string its own allocation, as a decoder leaves it
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Namespace: strings.Clone("team-a"), Name: name,
			Labels:          map[string]string{strings.Clone(v1.LabelTaskName): name, strings.Clone(v1.LabelRun): strings.Clone("1")},
			Annotations:     map[string]string{strings.Clone(v1.AnnotationRunRequested): "2026-12-04T10:00:00Z"},
			Finalizers:      []string{strings.Clone(v1.FinalizerRunOutcome)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: strings.Clone("example.com/v1"), Kind: strings.Clone("Task"), Name: name}},
		}}
	}
	cached := func(job *batchv1.Job) *cachedJob {
		c, err := compactJob(job)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*cachedJob)
	}
	a, b := cached(decoded("a")), cached(decoded("b"))
	if want := decoded("a"); !equality.Semantic.DeepEqual(a.job().ObjectMeta, want.ObjectMeta) {
		t.Fatalf("compactJob changed the metadata:\n%s", cmp.Diff(want.ObjectMeta, a.job().ObjectMeta))
	}
	same := func(what, x, y string) {
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s %q is held once per Job, want one copy", what, x)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("run label's value", a.labels.Get(v1.LabelRun), b.labels.Get(v1.LabelRun))
	same("finalizer", a.Finalizers[0], b.Finalizers[0])
	same("owner's API version", a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion)
	same("owner's kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	for _, pairs := range [][2]stringPairs{{a.labels, b.labels}, {a.annotations, b.annotations}} {
		for i := 0; i < len(pairs[0]); i += 2 {
			for j := 0; j < len(pairs[1]); j += 2 {
				if pairs[0][i] == pairs[1][j] {
					same("key", pairs[0][i], pairs[1][j])
				}
			}
		}
	}
}

// TestTheCachedTaskKeepsOnlyTheAnnotationsTheControllerReads: kubectl apply's
// last-applied-configuration is a second copy of the whole Task, as a string, on every Task a
// user applied; the controller reads only the run and cancel requests. The requests read from
// the cached Task must be the ones read from the Task as stored.
func TestTheCachedTaskKeepsOnlyTheAnnotationsTheControllerReads(t *testing.T) {
	stored := func() *v1.Task {
		return &v1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"example.com/v1","kind":"Task"}`,
			"task.example.com/preserved-v1-fields":             `{"spec":{}}`,
			"team.example.org/owner":                           "alice",
			v1.AnnotationRunRequested:                          "2026-12-07T10:00:00Z",
			v1.AnnotationCancelRequested:                       "2026-12-07T10:00:05Z",
		}}}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        map[string]string
	}{
		{"both requests among others", stored().Annotations, map[string]string{
			v1.AnnotationRunRequested: "2026-12-07T10:00:00Z", v1.AnnotationCancelRequested: "2026-12-07T10:00:05Z"}},
		{"an empty request is kept as it is", map[string]string{v1.AnnotationRunRequested: "", "x": "y"}, map[string]string{v1.AnnotationRunRequested: ""}},
		{"what the operator's client could not read", map[string]string{v1.AnnotationUnreadable: "spec.resources.limits.cpu: Invalid value", "x": "y"},
			map[string]string{v1.AnnotationUnreadable: "spec.resources.limits.cpu: Invalid value"}},
		{"none the controller reads", map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}, nil},
		{"no annotations", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := stored()
			task.Annotations = tc.annotations
			want := task.DeepCopy()
			got, err := compactTask(task)
			if err != nil {
				t.Fatal(err)
			}
			cached := got.(*v1.Task)
			if diff := cmp.Diff(tc.want, cached.Annotations); diff != "" {
				t.Errorf("cached annotations (-want +got):\n%s", diff)
			}
			now := at(100)
			if diff := cmp.Diff(readRequests(want, nil, now), readRequests(cached, nil, now), cmp.AllowUnexported(requests{}),
				cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })); diff != "" {
				t.Errorf("requests read from the cached Task differ from the stored Task's (-stored +cached):\n%s", diff)
			}
		})
	}
}

// TestTheControllerReadsTaskAnnotationsOnlyThroughRequestTime: the cache drops every Task
// annotation but readTaskAnnotations, so a read of any other key elsewhere in the controller
// would find it absent however the Task is annotated. Every read of an object's annotations in
// the controller is on a Job (a variable named for one), in the cache's own transforms, or in
// requestTime; any other read fails here until it is looked at.
func TestTheControllerReadsTaskAnnotationsOnlyThroughRequestTime(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\.ObjectMeta)?\.(Annotations\b|GetAnnotations\(\))|HasAnnotation\(`)
	allowed := map[string]bool{"cache.go": true, "request.go": true} // the filter and compactMeta; requestTime
	reads := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range read.FindAllStringSubmatch(line, -1) {
				reads++
				if allowed[f] || strings.Contains(strings.ToLower(m[1]), "job") {
					continue
				}
				t.Errorf("%s:%d reads annotations of what may be a Task (read a Task's in requestTime, its key in readTaskAnnotations): %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if reads == 0 {
		t.Error("found no read of annotations at all: the pattern no longer matches the code")
	}
}

// TestTasksWithTheSameLabelsShareOneCachedMap: a Go map costs at least 336 bytes however few
// its entries; Tasks made from one template carry the same labels, and the cache holds one
// map for them all. Different sets, however they would spell run together, are not shared.
func TestTasksWithTheSameLabelsShareOneCachedMap(t *testing.T) {
	in := newMapInterner(maxSharedLabelSets)
	decoded := func(kv ...string) map[string]string { // every string its own, as a decoder leaves it
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[strings.Clone(kv[i])] = strings.Clone(kv[i+1])
		}
		return m
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a := in.share(decoded("app", "nightly", "team", "a"))
	b := in.share(decoded("team", "a", "app", "nightly"))
	if !same(a, b) {
		t.Error("two Tasks with the same labels hold a map each, want one shared")
	}
	if diff := cmp.Diff(map[string]string{"app": "nightly", "team": "a"}, a); diff != "" {
		t.Errorf("shared labels (-want +got):\n%s", diff)
	}
	for _, pair := range [][2]map[string]string{
		{decoded("a", "bc"), decoded("ab", "c")},
		{decoded("a", ""), decoded("a", "", "b", "")},
		{decoded("a:1", "b"), decoded("a", "1:b")},
		{decoded("app", "nightly"), decoded("app", "Nightly")},
	} {
		x, y := in.share(pair[0]), in.share(pair[1])
		if same(x, y) || !maps.Equal(x, pair[0]) || !maps.Equal(y, pair[1]) {
			t.Errorf("labels %v and %v came back as %v and %v, want each its own, unchanged", pair[0], pair[1], x, y)
		}
	}
	long := decoded("note", strings.Repeat("x", maxSharedLabelSetKey))
	if x, y := in.share(long), in.share(decoded("note", strings.Repeat("x", maxSharedLabelSetKey))); same(x, y) || !maps.Equal(x, long) {
		t.Error("a set too long to key was shared or changed, want it kept whole and not pinned by the table")
	}
	for i := range 3 * maxSharedLabelSets { // Tasks labelled with their own names fill the table
		in.share(decoded("name", fmt.Sprint(i)))
	}
	if len(in.values) > maxSharedLabelSets {
		t.Errorf("the table holds %d sets, want at most %d", len(in.values), maxSharedLabelSets)
	}
	if !same(in.share(decoded("team", "b")), in.share(decoded("team", "b"))) {
		t.Error("a set first seen after the table filled is not shared")
	}
}
