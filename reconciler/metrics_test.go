package reconciler

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

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
		v1.PhasePending: 1, v1.PhaseQueued: 0, v1.PhaseRunning: 2, v1.PhaseRetrying: 0, v1.PhaseScheduled: 0,
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
	c := &phaseCollector{desc: tasksByPhase.desc, perTask: newTaskSeries()}
	c.reader.Store(&reader)
	want := `
# HELP taskoperator_tasks Tasks by phase, counted from the controller's cache at scrape time.
# TYPE taskoperator_tasks gauge
taskoperator_tasks{phase="Failed"} 0
taskoperator_tasks{phase="Pending"} 0
taskoperator_tasks{phase="Queued"} 0
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

// TestAllPhasesAreTheCRDs: the phase gauge reports every phase the CRD's status.phase admits,
// so that a phase added to the API is not missing from taskoperator_tasks.
func TestAllPhasesAreTheCRDs(t *testing.T) {
	data, err := os.ReadFile("../config/crd/bases/example.com_tasks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Status struct {
								Properties struct {
									Phase struct{ Enum []string }
								}
							}
						}
					} `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" {
			enum = v.Schema.OpenAPIV3Schema.Properties.Status.Properties.Phase.Enum
		}
	}
	var have []string
	for _, p := range allPhases {
		have = append(have, string(p))
	}
	slices.Sort(enum)
	slices.Sort(have)
	if len(enum) == 0 || !slices.Equal(enum, have) {
		t.Errorf("allPhases = %v, the CRD's v1 status.phase enum = %v", have, enum)
	}
}

// TestTaskSeries: the per-Task gauges say what the status says, at most maxTaskSeries Tasks
// get them (the rest are counted as omitted), and a deleted Task's run counts go away.
func TestTaskSeries(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	at := func(sec int64) *metav1.Time { tm := metav1.NewTime(time.Unix(sec, 0)); return &tm }
	task := func(name string, spec v1.TaskSpec, status v1.TaskStatus) *v1.Task {
		return &v1.Task{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: spec, Status: status}
	}
	tasks := []client.Object{
		task("a-ok", v1.TaskSpec{}, v1.TaskStatus{Phase: v1.PhaseScheduled, NextRunTime: at(2000), LastSuccessfulTime: at(1000),
			CurrentRun: &v1.RunRecord{Attempt: 1, Outcome: v1.RunSucceeded, FinishTime: at(1000)}}),
		task("b-failed", v1.TaskSpec{}, v1.TaskStatus{Phase: v1.PhaseFailed, LastSuccessfulTime: at(800),
			CurrentRun: &v1.RunRecord{Attempt: 3, Outcome: v1.RunFailed, FinishTime: at(1500)}}),
		task("c-retrying", v1.TaskSpec{}, v1.TaskStatus{Phase: v1.PhaseRetrying, NextRunTime: at(1600),
			CurrentRun: &v1.RunRecord{Attempt: 1, Outcome: v1.RunFailed, RetryTime: at(1600)}}),
		task("d-suspended", v1.TaskSpec{Suspend: true}, v1.TaskStatus{Phase: v1.PhaseSuspended, NextRunTime: at(3000)}),
	}
	reader := client.Reader(fake.NewClientBuilder().WithScheme(scheme).WithObjects(tasks...).Build())
	c := &phaseCollector{desc: tasksByPhase.desc, perTask: newTaskSeries()}
	c.reader.Store(&reader)

	c.perTask.observe(taskKey{"ns", "a-ok"}, v1.RunSucceeded, 90*time.Second)
	c.perTask.observe(taskKey{"ns", "gone"}, v1.RunFailed, time.Second)
	want := `
# HELP taskoperator_task_failing 1 while the Task's current run has failed for good (no retry left), 0 otherwise.
# TYPE taskoperator_task_failing gauge
taskoperator_task_failing{namespace="ns",task="a-ok"} 0
taskoperator_task_failing{namespace="ns",task="b-failed"} 1
taskoperator_task_failing{namespace="ns",task="c-retrying"} 0
taskoperator_task_failing{namespace="ns",task="d-suspended"} 0
# HELP taskoperator_task_last_run_duration_seconds Duration of the Task's latest finished run seen by this process.
# TYPE taskoperator_task_last_run_duration_seconds gauge
taskoperator_task_last_run_duration_seconds{namespace="ns",task="a-ok"} 90
# HELP taskoperator_task_last_success_timestamp_seconds When the Task's latest successful attempt finished (Unix time, status.lastSuccessfulTime), kept through later failures; absent before the first success.
# TYPE taskoperator_task_last_success_timestamp_seconds gauge
taskoperator_task_last_success_timestamp_seconds{namespace="ns",task="a-ok"} 1000
taskoperator_task_last_success_timestamp_seconds{namespace="ns",task="b-failed"} 800
# HELP taskoperator_task_next_run_timestamp_seconds When the Task's next scheduled run or retry is due (Unix time); absent when none is, or while it is suspended.
# TYPE taskoperator_task_next_run_timestamp_seconds gauge
taskoperator_task_next_run_timestamp_seconds{namespace="ns",task="a-ok"} 2000
taskoperator_task_next_run_timestamp_seconds{namespace="ns",task="c-retrying"} 1600
# HELP taskoperator_task_series_omitted Tasks left out of the per-Task series because there are more than the bound (maxTaskSeries).
# TYPE taskoperator_task_series_omitted gauge
taskoperator_task_series_omitted 0
`
	names := []string{"taskoperator_task_failing", "taskoperator_task_last_run_duration_seconds", "taskoperator_task_last_success_timestamp_seconds",
		"taskoperator_task_next_run_timestamp_seconds", "taskoperator_task_series_omitted"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The scrape above forgot the deleted Task's runs; the existing one's stay.
	runs := `
# HELP taskoperator_task_runs_total Finished runs of each Task by outcome (Succeeded, Failed); Tasks beyond the per-Task bound are counted under namespace="", task="".
# TYPE taskoperator_task_runs_total counter
taskoperator_task_runs_total{namespace="ns",outcome="Failed",task="a-ok"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Failed",task="b-failed"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Failed",task="c-retrying"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Failed",task="d-suspended"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Succeeded",task="a-ok"} 1
taskoperator_task_runs_total{namespace="ns",outcome="Succeeded",task="b-failed"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Succeeded",task="c-retrying"} 0
taskoperator_task_runs_total{namespace="ns",outcome="Succeeded",task="d-suspended"} 0
`
	if err := testutil.CollectAndCompare(c.perTask.runs, strings.NewReader(runs)); err != nil {
		t.Error(err)
	}

	t.Run("bounded", func(t *testing.T) {
		defer func(old int) { maxTaskSeries = old }(maxTaskSeries)
		maxTaskSeries = 2
		c.perTask = newTaskSeries()
		c.perTask.observe(taskKey{"ns", "b-failed"}, v1.RunFailed, time.Second)
		// Beyond the bound: in namespace/name order a-ok and b-failed get series of their own.
		c.perTask.observe(taskKey{"ns", "c-retrying"}, v1.RunFailed, time.Second)
		c.perTask.observe(taskKey{"ns", "d-suspended"}, v1.RunFailed, time.Second)
		if n := testutil.CollectAndCount(c, "taskoperator_task_failing"); n != 2 {
			t.Errorf("%d taskoperator_task_failing series, want maxTaskSeries = 2", n)
		}
		if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP taskoperator_task_series_omitted Tasks left out of the per-Task series because there are more than the bound (maxTaskSeries).
# TYPE taskoperator_task_series_omitted gauge
taskoperator_task_series_omitted 2
`), "taskoperator_task_series_omitted"); err != nil {
			t.Error(err)
		}
		if n := testutil.CollectAndCount(c.perTask.runs); n != 2*2+1 {
			t.Errorf("%d run counter series, want 2 outcomes of 2 Tasks and the overflow", n)
		}
		if v := testutil.ToFloat64(c.perTask.runs.WithLabelValues("", "", "Failed")); v != 2 {
			t.Errorf("runs beyond the bound = %v, want 2 under namespace=\"\", task=\"\"", v)
		}
		if v := testutil.ToFloat64(c.perTask.runs.WithLabelValues("ns", "b-failed", "Failed")); v != 1 {
			t.Errorf("runs of b-failed, shown = %v, want 1 under its own name", v)
		}
	})
}
