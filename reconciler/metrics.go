package reconciler

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
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
	), perTask: newTaskSeries()}

	// runDuration has no Task label: a histogram's buckets per Task would multiply the
	// series; the per-Task view is taskoperator_task_last_run_duration_seconds.
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "run_duration_seconds",
		Help:    "Duration of finished Task runs (the latest attempt's Job, start to finish), by outcome.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600},
	}, []string{"outcome"})
)

// maxTaskSeries bounds the Tasks that get series of their own (taskoperator_task_*): a
// cluster with more Tasks than that would otherwise cost Prometheus a few series per Task
// forever. The Tasks beyond it, in namespace/name order, are left out of the per-Task gauges
// (taskoperator_task_series_omitted says how many) and their runs are counted under
// namespace="", task="" in taskoperator_task_runs_total. The series of a deleted Task are
// dropped at the next scrape.
var maxTaskSeries = 1000

var taskLabels = []string{"namespace", "task"}

var registerOnce sync.Once

// registerMetrics adds the controller's metrics to controller-runtime's registry, once per
// process. The phase gauge counts the Tasks of mgr's cache only while this replica leads: every
// replica is scraped, and the same cluster-wide count reported by each would be summed twice.
// The runnable that arms it needs leader election (it does not say otherwise), so the manager
// starts it only on the leader, or at once when leader election is off.
func registerMetrics(mgr manager.Manager) error {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(runsStarted, runsSucceeded, runsFailed, retries, jobCreationErrors, tasksByPhase, eventsDropped,
			runDuration, tasksByPhase.perTask.runs)
		for _, o := range runOutcomes {
			runDuration.WithLabelValues(string(o)) // present before the first run finishes
		}
	})
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		reader := client.Reader(mgr.GetCache())
		tasksByPhase.reader.Store(&reader)
		<-ctx.Done()
		tasksByPhase.reader.CompareAndSwap(&reader, nil)
		return nil
	}))
}

// phaseCollector counts Tasks by phase when scraped, and reports the per-Task gauges from the
// same list. Counting the cache at scrape time, rather than moving a gauge on each transition,
// cannot drift or count a Task twice, and it is right after a restart.
type phaseCollector struct {
	desc    *prometheus.Desc
	reader  atomic.Pointer[client.Reader]
	perTask *taskSeries
}

// allPhases is every value of the CRD's status.phase enum (TestAllPhasesAreTheCRDs).
var allPhases = []v1.Phase{
	v1.PhasePending, v1.PhaseQueued, v1.PhaseRunning, v1.PhaseRetrying, v1.PhaseScheduled,
	v1.PhaseSuspended, v1.PhaseSucceeded, v1.PhaseFailed,
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	c.perTask.describe(ch)
}

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
	c.perTask.collect(ch, tasks.Items)
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

// taskSeries are the per-Task series, bounded by maxTaskSeries: gauges computed from the
// Tasks' status at scrape time, and the run counter, fed by observeRunFinished.
type taskSeries struct {
	failing, nextRun, lastSuccess, lastDuration, omitted *prometheus.Desc
	runs                                                 *prometheus.CounterVec

	mu sync.Mutex
	// tracked are the Tasks that have series of their own in runs, by namespace/name: the
	// ones the last scrape showed (the first maxTaskSeries in namespace/name order), so that
	// counters and gauges name the same Tasks.
	tracked map[taskKey]bool
	// pending counts, by outcome, the runs of Tasks not tracked, until the next scrape says
	// whether they get series of their own (the counts go there) or not (to task="").
	pending map[taskKey]map[v1.RunOutcome]float64
	// lastDurations are the latest run durations observeRunFinished saw.
	lastDurations map[taskKey]float64
}

type taskKey struct{ namespace, name string }

func newTaskSeries() *taskSeries {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricsPrefix+name, help, labels, nil)
	}
	return &taskSeries{
		failing: desc("task_failing",
			"1 while the Task's current run has failed for good (no retry left), 0 otherwise.", taskLabels...),
		nextRun: desc("task_next_run_timestamp_seconds",
			"When the Task's next scheduled run or retry is due (Unix time); absent when none is, or while it is suspended.", taskLabels...),
		lastSuccess: desc("task_last_success_timestamp_seconds",
			"When the Task's latest successful attempt finished (Unix time, status.lastSuccessfulTime), kept through later failures; absent before the first success.", taskLabels...),
		lastDuration: desc("task_last_run_duration_seconds",
			"Duration of the Task's latest finished run seen by this process.", taskLabels...),
		omitted: desc("task_series_omitted",
			"Tasks left out of the per-Task series because there are more than the bound (maxTaskSeries)."),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "task_runs_total",
			Help: "Finished runs of each Task by outcome (Succeeded, Failed); Tasks beyond the per-Task bound are counted under namespace=\"\", task=\"\".",
		}, append(slices.Clone(taskLabels), "outcome")),
		tracked:       map[taskKey]bool{},
		pending:       map[taskKey]map[v1.RunOutcome]float64{},
		lastDurations: map[taskKey]float64{},
	}
}

// observeRunFinished counts a run of task that finished with outcome (v1.RunSucceeded or
// v1.RunFailed) after taking duration. The reconciler calls it once per run, where it records
// the run's Succeeded or RunFailed Event (after the status that says so is stored).
func observeRunFinished(task *v1.Task, outcome v1.RunOutcome, duration time.Duration) {
	tasksByPhase.perTask.observe(taskKey{task.Namespace, task.Name}, outcome, duration)
	if duration >= 0 {
		runDuration.WithLabelValues(string(outcome)).Observe(duration.Seconds())
	}
}

func (s *taskSeries) observe(k taskKey, outcome v1.RunOutcome, duration time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if duration >= 0 {
		s.lastDurations[k] = duration.Seconds()
	}
	if s.tracked[k] {
		s.runs.WithLabelValues(k.namespace, k.name, string(outcome)).Inc()
		return
	}
	if s.pending[k] == nil {
		s.pending[k] = map[v1.RunOutcome]float64{}
	}
	s.pending[k][outcome]++
}

func (s *taskSeries) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.failing, s.nextRun, s.lastSuccess, s.lastDuration, s.omitted} {
		ch <- d
	}
}

// collect reports the gauges of the first maxTaskSeries tasks in namespace/name order, and
// forgets the run counts of Tasks that no longer exist.
func (s *taskSeries) collect(ch chan<- prometheus.Metric, tasks []v1.Task) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b v1.Task) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	shown := sorted[:min(len(sorted), maxTaskSeries)]
	ch <- prometheus.MustNewConstMetric(s.omitted, prometheus.GaugeValue, float64(len(sorted)-len(shown)))
	exists := make(map[taskKey]bool, len(sorted))
	for i := range sorted {
		exists[taskKey{sorted[i].Namespace, sorted[i].Name}] = true
	}
	s.track(shown, exists)

	s.mu.Lock()
	durations := maps.Clone(s.lastDurations)
	s.mu.Unlock()
	for i := range shown {
		t := &shown[i]
		k := taskKey{t.Namespace, t.Name}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, t.Namespace, t.Name)
		}
		gauge(s.failing, boolValue(failedForGood(t)))
		if at, ok := dueRunTime(t); ok {
			gauge(s.nextRun, unixSeconds(at))
		}
		if at, ok := lastSuccessTime(t); ok {
			gauge(s.lastSuccess, unixSeconds(at))
		}
		if d, ok := durations[k]; ok {
			gauge(s.lastDuration, d)
		}
	}
}

// track gives exactly the shown Tasks run counters of their own, at zero for each outcome (a
// counter that exists from the start makes rate() and increase() see its first run), and
// settles the pending counts: into the Task's own series when it is shown, to task="" when it
// exists beyond the bound, nowhere when it is gone. A Task that stops being shown (deleted, or
// pushed past the bound by names that sort first) loses its series.
func (s *taskSeries) track(shown []v1.Task, exists map[taskKey]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	show := make(map[taskKey]bool, len(shown))
	for i := range shown {
		show[taskKey{shown[i].Namespace, shown[i].Name}] = true
	}
	for k := range s.tracked {
		if !show[k] {
			s.runs.DeletePartialMatch(prometheus.Labels{"namespace": k.namespace, "task": k.name})
			delete(s.tracked, k)
		}
	}
	for k := range show {
		s.trackLocked(k)
	}
	for k, counts := range s.pending {
		for outcome, n := range counts {
			switch {
			case show[k]:
				s.runs.WithLabelValues(k.namespace, k.name, string(outcome)).Add(n)
			case exists[k]:
				s.runs.WithLabelValues("", "", string(outcome)).Add(n)
			}
		}
		delete(s.pending, k)
	}
	for k := range s.lastDurations {
		if !exists[k] {
			delete(s.lastDurations, k)
		}
	}
}

// trackLocked gives k its counters, at zero for each outcome, unless it has them; s.mu is held.
func (s *taskSeries) trackLocked(k taskKey) {
	if s.tracked[k] {
		return
	}
	s.tracked[k] = true
	for _, o := range runOutcomes {
		s.runs.WithLabelValues(k.namespace, k.name, string(o))
	}
}

// runOutcomes are the outcomes a finished run has.
var runOutcomes = []v1.RunOutcome{v1.RunSucceeded, v1.RunFailed}

// failedForGood: a one-shot Task failed, or the current run failed and no retry is due; for a
// scheduled Task, its latest finished run failed (the Failed condition, kept while the next run
// runs, as Ready=False is).
func failedForGood(t *v1.Task) bool {
	if t.Status.Phase == v1.PhaseFailed {
		return true
	}
	if t.Spec.Schedule != nil && meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionFailed) {
		return true
	}
	r := t.Status.CurrentRun
	return r != nil && r.Outcome == v1.RunFailed && r.RetryTime == nil
}

func dueRunTime(t *v1.Task) (time.Time, bool) {
	if t.Spec.Suspend || t.Status.NextRunTime == nil {
		return time.Time{}, false
	}
	return t.Status.NextRunTime.Time, true
}

// lastSuccessTime is status.lastSuccessfulTime: later failures keep it, so an alert on its age
// sees a scheduled Task that has not succeeded for a while, whatever its latest run did.
func lastSuccessTime(t *v1.Task) (time.Time, bool) {
	if t.Status.LastSuccessfulTime == nil {
		return time.Time{}, false
	}
	return t.Status.LastSuccessfulTime.Time, true
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
