package reconciler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// A Task whose spec its client could not read whole (internal/readguard left a quantity out
// and named it) starts no run, one-shot or scheduled, and its conditions say which field and
// why; a Job already running is left to finish.
func TestATaskWithAnUnreadableSpecStartsNoRunAndSaysWhichField(t *testing.T) {
	const unreadable = `spec.resources.limits.cpu: Invalid value: "1e3000000000": a quantity must be at most 64 characters long`
	markUnreadable := func(task *v1.Task) {
		task.Annotations = map[string]string{v1.AnnotationUnreadable: unreadable}
	}
	for _, tc := range []struct {
		name string
		task *v1.Task
		jobs []observedJob
	}{
		{"one-shot, never run", newTask(markUnreadable), nil},
		{"scheduled, a run due", newTask(scheduled(v1.AllowConcurrent), markUnreadable), nil},
		{"a run requested", newTask(markUnreadable, func(task *v1.Task) {
			task.Annotations[v1.AnnotationRunRequested] = at(5).Format("2006-01-02T15:04:05Z07:00")
		}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(3600)
			a := analyzeIn(tc.task, tc.jobs, now, true)
			if p := planRuns(tc.task, a, tc.jobs, now); p.create != nil {
				t.Errorf("a run starts: %+v", *p.create)
			}
			st := computeStatusIn(tc.task, tc.jobs, now, true)
			stalled := meta.FindStatusCondition(st.Conditions, v1.ConditionStalled)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1.ReasonInvalidSpec || !strings.HasPrefix(stalled.Message, unreadable) {
				t.Errorf("Stalled %+v", stalled)
			}
			if ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1.ReasonInvalidSpec {
				t.Errorf("Ready %+v", ready)
			}
		})
	}

	// Without the annotation the same Tasks run.
	if p := planRuns(newTask(), analyzeIn(newTask(), nil, at(1), true), nil, at(1)); p.create == nil {
		t.Error("a readable Task does not run")
	}
}
