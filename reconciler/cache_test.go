package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
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
