package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	kjson "sigs.k8s.io/json"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// conditionMessageMaxLength is the CRD's maxLength of status.conditions[].message (metav1.Condition):
// the apiserver refuses a status write with a longer one.
const conditionMessageMaxLength = 32768

// A Task stored with many quantities out of bounds (300 extended resources, each "1e3000000000")
// is read through the filter, which names every one in AnnotationUnreadable. The Stalled and
// Ready conditions the operator writes must still fit the CRD's maxLength, or the status write
// is refused and the Task never says why it does not run.
func TestTheInvalidSpecConditionOfManyUnreadableQuantitiesFitsTheCRDsMessageLimit(t *testing.T) {
	var limits []string
	for i := range 300 {
		limits = append(limits, fmt.Sprintf(`"example.com/gpu-%03d":"1e3000000000"`, i))
	}
	stored := `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns","uid":"u","resourceVersion":"7"},` +
		`"spec":{"runner":{"type":"Shell","shell":{"script":"true"}},"resources":{"limits":{` + strings.Join(limits, ",") + `}}}}`
	filtered, changed := readguard.Task([]byte(stored))
	if !changed {
		t.Fatal("the filter left the Task as it was")
	}
	task := newTask()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(filtered, task); err != nil {
		t.Fatal(err)
	}
	st := computeStatusIn(task, nil, at(3600), true)
	for _, typ := range []string{v1.ConditionStalled, v1.ConditionReady} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.Reason != v1.ReasonInvalidSpec {
			t.Fatalf("%s: %+v", typ, c)
		}
		if n := len(c.Message); n > conditionMessageMaxLength {
			t.Errorf("%s's message is %d bytes, over the CRD's maxLength %d: the apiserver refuses the status write", typ, n, conditionMessageMaxLength)
		}
	}
}

// Any condition message the operator writes fits the CRD's bound, cut at a character's start.
func TestAConditionMessageIsCutToTheCRDsBound(t *testing.T) {
	for _, msg := range []string{"short", strings.Repeat("a", 40000), strings.Repeat("é", 20000)} {
		got := fitConditionMessage(msg)
		if len(got) > conditionMessageMaxLength || !strings.HasPrefix(msg, strings.TrimSuffix(got, "...")) || !utf8.ValidString(got) {
			t.Errorf("a message of %d bytes cut to %d bytes: %q...", len(msg), len(got), got[:min(len(got), 20)])
		}
		if len(msg) <= conditionMessageMaxLength && got != msg {
			t.Errorf("a message within the bound changed: %q", got)
		}
	}
}
