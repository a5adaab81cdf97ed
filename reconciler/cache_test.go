package reconciler

import (
	"fmt"
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
	if len(in.strings) > maxInternedStrings {
		t.Errorf("%d strings held, want at most %d", len(in.strings), maxInternedStrings)
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
	for s := range in.strings {
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
	if want := decoded("a"); !equality.Semantic.DeepEqual(a.ObjectMeta, want.ObjectMeta) {
		t.Fatalf("compactJob changed the metadata:\n%s", cmp.Diff(want.ObjectMeta, a.ObjectMeta))
	}
	same := func(what, x, y string) {
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s %q is held once per Job, want one copy", what, x)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("run label's value", a.Labels[v1.LabelRun], b.Labels[v1.LabelRun])
	same("finalizer", a.Finalizers[0], b.Finalizers[0])
	same("owner's API version", a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion)
	same("owner's kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	for _, keys := range [][2]map[string]string{{a.Labels, b.Labels}, {a.Annotations, b.Annotations}} {
		for k := range keys[0] {
			for l := range keys[1] {
				if k == l {
					same("key", k, l)
				}
			}
		}
	}
}
