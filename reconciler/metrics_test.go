package reconciler

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "example.com/task-operator/apis/v1"
)

func TestCountPhases(t *testing.T) {
	tasks := []v1.Task{
		{Status: v1.TaskStatus{Phase: v1.PhaseRunning}},
		{Status: v1.TaskStatus{Phase: v1.PhaseRunning}},
		{Status: v1.TaskStatus{Phase: v1.PhaseFailed}},
		{}, // not reconciled yet
	}
	want := map[v1.Phase]int{
		v1.PhasePending: 1, v1.PhaseRunning: 2, v1.PhaseRetrying: 0, v1.PhaseScheduled: 0,
		v1.PhaseSuspended: 0, v1.PhaseSucceeded: 0, v1.PhaseFailed: 1,
	}
	if diff := cmp.Diff(want, countPhases(tasks)); diff != "" {
		t.Errorf("countPhases (-want +got):\n%s", diff)
	}
}

func TestPhaseCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	task := func(name string, phase v1.Phase) client.Object {
		return &v1.Task{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: v1.TaskStatus{Phase: phase}}
	}
	var reader client.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		task("a", v1.PhaseRunning), task("b", v1.PhaseSucceeded), task("c", v1.PhaseSucceeded),
	).Build()
	c := &phaseCollector{desc: tasksByPhase.desc}
	c.reader.Store(&reader)
	want := `
# HELP taskoperator_tasks Tasks by phase, counted from the controller's cache at scrape time.
# TYPE taskoperator_tasks gauge
taskoperator_tasks{phase="Failed"} 0
taskoperator_tasks{phase="Pending"} 0
taskoperator_tasks{phase="Retrying"} 0
taskoperator_tasks{phase="Running"} 1
taskoperator_tasks{phase="Scheduled"} 0
taskoperator_tasks{phase="Succeeded"} 2
taskoperator_tasks{phase="Suspended"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "taskoperator_tasks"); err != nil {
		t.Error(err)
	}
}
