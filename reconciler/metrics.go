package reconciler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "example.com/task-operator/apis/v1"
)

const metricsPrefix = "taskoperator_"

// Counters of what the controller did. They are counted where the matching Event is recorded,
// after the status that reflects it is stored, so a retried reconcile does not count twice.
var (
	runsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "runs_started_total",
		Help: "Jobs created for Task runs, retries included.",
	})
	runsSucceeded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "runs_succeeded_total",
		Help: "Task runs whose Job succeeded.",
	})
	runsFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "runs_failed_total",
		Help: "Task runs whose Job failed, timed out or vanished.",
	})
	retries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "retries_total",
		Help: "Jobs created to retry a failed run.",
	})
	jobCreationErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "job_creation_errors_total",
		Help: "Failed attempts to create a Job for a Task run.",
	})
	tasksByPhase = &phaseCollector{desc: prometheus.NewDesc(
		metricsPrefix+"tasks",
		"Tasks by phase, counted from the controller's cache at scrape time.",
		[]string{"phase"}, nil,
	)}
)

var registerOnce sync.Once

// registerMetrics adds the controller's metrics to controller-runtime's registry, once per
// process. The phase gauge counts the Tasks of mgr's cache only while this replica leads: every
// replica is scraped, and the same cluster-wide count reported by each would be summed twice.
// The runnable that arms it needs leader election (it does not say otherwise), so the manager
// starts it only on the leader, or at once when leader election is off.
func registerMetrics(mgr manager.Manager) error {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(runsStarted, runsSucceeded, runsFailed, retries, jobCreationErrors, tasksByPhase, eventsDropped)
	})
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		reader := client.Reader(mgr.GetCache())
		tasksByPhase.reader.Store(&reader)
		<-ctx.Done()
		tasksByPhase.reader.CompareAndSwap(&reader, nil)
		return nil
	}))
}

// phaseCollector counts Tasks by phase when scraped. Counting the cache at scrape time, rather
// than moving a gauge on each transition, cannot drift or count a Task twice, and it is right
// after a restart.
type phaseCollector struct {
	desc   *prometheus.Desc
	reader atomic.Pointer[client.Reader]
}

var allPhases = []v1.Phase{
	v1.PhasePending, v1.PhaseRunning, v1.PhaseRetrying, v1.PhaseScheduled,
	v1.PhaseSuspended, v1.PhaseSucceeded, v1.PhaseFailed,
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.reader.Load()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var tasks v1.TaskList
	if err := (*r).List(ctx, &tasks); err != nil {
		return // the cache is not started yet; report nothing rather than zeros
	}
	for phase, n := range countPhases(tasks.Items) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// countPhases counts tasks by phase, with every phase present; a Task not yet reconciled
// counts as Pending.
func countPhases(tasks []v1.Task) map[v1.Phase]int {
	counts := make(map[v1.Phase]int, len(allPhases))
	for _, p := range allPhases {
		counts[p] = 0
	}
	for i := range tasks {
		p := tasks[i].Status.Phase
		if p == "" {
			p = v1.PhasePending
		}
		counts[p]++
	}
	return counts
}
