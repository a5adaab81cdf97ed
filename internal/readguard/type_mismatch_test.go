package readguard_test

import (
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// The typed decoder (sigs.k8s.io/json, as encoding/json) records a member of the wrong type
// (an UnmarshalTypeError), skips it and goes on decoding: the quantities after or before it
// are parsed all the same. Shown here with a readable quantity, so the decoding returns.
func TestTheTypedDecoderParsesTheQuantitiesOfATaskWithAMemberOfTheWrongType(t *testing.T) {
	for name, in := range map[string]string{
		"annotations a string": `{"metadata":{"annotations":"x"},"spec":{"resources":{"limits":{"cpu":"2"}}}}`,
		"requests a number":    `{"spec":{"resources":{"limits":{"cpu":"2"},"requests":5}}}`,
		"metadata an array":    `{"metadata":[],"spec":{"resources":{"limits":{"cpu":"2"}}}}`,
	} {
		var task v1.Task
		err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(in), &task)
		if err == nil || task.Spec.Resources == nil || task.Spec.Resources.Limits.Cpu().String() != "2" {
			t.Errorf("%s: err %v, resources %+v", name, err, task.Spec.Resources)
		}
	}
}

// So the filter must take an unreadable quantity out of such a Task too: its typed decoding
// would parse it, and hang.
func TestATaskWithAMemberOfTheWrongTypeStillHasItsUnreadableQuantityTakenOut(t *testing.T) {
	for name, in := range map[string]string{
		"annotations a string": `{"metadata":{"annotations":"x"},"spec":{"resources":{"limits":{"cpu":"1e3000000000"}}}}`,
		"requests a number":    `{"spec":{"resources":{"limits":{"cpu":"1e3000000000"},"requests":5}}}`,
		"metadata an array":    `{"metadata":[],"spec":{"resources":{"limits":{"cpu":"1e3000000000"}}}}`,
		// with a key repeated as well
		"and a key repeated": `{"metadata":{"annotations":"x"},"spec":{"resources":{"limits":{"cpu":"1e3000000000","cpu":"1e3000000000"}}}}`,
	} {
		out, changed := readguard.Task([]byte(in))
		if holdsUnreadableCPU(t, out) {
			t.Errorf("%s: changed=%v, the typed decoder still parses the unreadable quantity:\n in  %s\n out %s", name, changed, in, out)
		}
	}
}

// The typed decoding of a TaskList parses the Tasks of every occurrence of a repeated "items"
// key (the last one wins): shown with a quantity that does not parse, whose error surfaces
// though the last "items" is empty.
func TestTheTypedDecoderParsesEveryItemsOfAList(t *testing.T) {
	var list v1.TaskList
	err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(`{"items":[{"spec":{"resources":{"limits":{"cpu":"x"}}}}],"items":[]}`), &list)
	if err == nil || !strings.Contains(err.Error(), "quantities must match") {
		t.Errorf("err %v: the first items was not parsed", err)
	}
}

func TestAListWithItsItemsKeyRepeatedStillHasItsUnreadableQuantityTakenOut(t *testing.T) {
	bad := taskJSON("bad", `{"limits":{"cpu":"1e3000000000"}}`, "")
	in := `{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{},"items":[` + bad + `],"items":[]}`
	if out := readguard.Document([]byte(in)); holdsUnreadableCPU(t, out) {
		t.Errorf("the typed decoder still parses the unreadable quantity:\n in  %s\n out %s", in, out)
	}
}
