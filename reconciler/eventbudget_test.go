package reconciler

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	v1 "example.com/task-operator/apis/v1"
)

// TestEventBudget: past the burst, Normal Events are dropped and counted; Warnings all pass.
func TestEventBudget(t *testing.T) {
	fake := events.NewFakeRecorder(100)
	rec := newBudgetedRecorder(fake, 0.000001, 3) // a refill too slow to matter here
	task := &v1.Task{}
	dropped := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventSucceeded))
	for range 5 {
		rec.Eventf(task, nil, corev1.EventTypeNormal, v1.EventSucceeded, "Complete", "ok")
		rec.Eventf(task, nil, corev1.EventTypeWarning, v1.EventRunFailed, "Fail", "bad")
	}
	close(fake.Events)
	var normal, warning int
	for e := range fake.Events {
		switch {
		case strings.HasPrefix(e, corev1.EventTypeNormal):
			normal++
		case strings.HasPrefix(e, corev1.EventTypeWarning):
			warning++
		}
	}
	if normal != 3 || warning != 5 {
		t.Errorf("recorded %d Normal and %d Warning Events, want the burst of 3 and all 5", normal, warning)
	}
	if got := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventSucceeded)) - dropped; got != 2 {
		t.Errorf("events_dropped_total{reason=Succeeded} grew by %v, want 2", got)
	}

	fake = events.NewFakeRecorder(100)
	rec = newBudgetedRecorder(fake, -1, 0)
	for range 50 {
		rec.Eventf(task, nil, corev1.EventTypeNormal, v1.EventJobCreated, "Create", "made")
	}
	if len(fake.Events) != 50 {
		t.Errorf("a negative QPS recorded %d of 50 Normal Events, want all", len(fake.Events))
	}
}
