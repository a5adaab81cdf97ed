package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "example.com/task-operator/apis/v1"
)

// TestTaskSeriesBoundKeepsCountersWithGauges: beyond maxTaskSeries, the Tasks that keep
// series are the first ones in namespace/name order (metrics.go), so that an alert on
// taskoperator_task_runs_total and one on taskoperator_task_failing see the same Tasks. Runs
// that finish before the first scrape (every start-up) or a Task created with a name that
// sorts first must not leave a Task with gauges whose runs are counted under task="" while
// a Task without gauges keeps counters of its own.
func TestTaskSeriesBoundKeepsCountersWithGauges(t *testing.T) {
	defer func(old int) { maxTaskSeries = old }(maxTaskSeries)
	maxTaskSeries = 2
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	task := func(name string) client.Object {
		return &v1.Task{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: v1.TaskStatus{Phase: v1.PhaseScheduled}}
	}
	reader := client.Reader(fake.NewClientBuilder().WithScheme(scheme).WithObjects(task("a"), task("b"), task("c"), task("d")).Build())
	c := &phaseCollector{desc: tasksByPhase.desc, perTask: newTaskSeries()}
	c.reader.Store(&reader)

	// Before the first scrape, c and d finish runs.
	c.perTask.observe(taskKey{"ns", "c"}, v1.RunFailed, time.Second)
	c.perTask.observe(taskKey{"ns", "d"}, v1.RunFailed, time.Second)
	testutil.CollectAndCount(c) // a scrape: a and b get the gauges
	c.perTask.observe(taskKey{"ns", "a"}, v1.RunFailed, time.Second)

	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP taskoperator_task_failing 1 while the Task's current run has failed for good (no retry left), 0 otherwise.
# TYPE taskoperator_task_failing gauge
taskoperator_task_failing{namespace="ns",task="a"} 0
taskoperator_task_failing{namespace="ns",task="b"} 0
`), "taskoperator_task_failing"); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(c.perTask.runs.WithLabelValues("ns", "a", "Failed")); v != 1 {
		t.Errorf("task a has gauges but its run is not counted under its name: runs_total{task=a,outcome=Failed} = %v, overflow = %v",
			v, testutil.ToFloat64(c.perTask.runs.WithLabelValues("", "", "Failed")))
	}
	c.perTask.mu.Lock()
	tracked := len(c.perTask.tracked)
	hasC := c.perTask.tracked[taskKey{"ns", "c"}]
	c.perTask.mu.Unlock()
	if hasC {
		t.Errorf("task c has no gauges (beyond the bound in name order) but keeps run counters of its own (%d tracked)", tracked)
	}
}
