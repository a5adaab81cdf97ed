package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

const (
	throughputNS = "bench-throughput"
	rawNS        = "bench-raw-jobs"
)

// throughput measures the raw rate of creating Jobs with the benchmark client, then creates
// Tasks at v1 and times them to Running and to Succeeded, counting the operator's writes.
func throughput(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	for _, ns := range []string{throughputNS, rawNS} {
		if err := e.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	n := s.Tasks
	if err := startBurst(ctx, e, n, r); err != nil {
		return fmt.Errorf("start burst: %w", err)
	}

	// The client's raw write rate: n suspended Jobs (no pods, so the Job controller has
	// little to do), created exactly as the Tasks will be.
	e.Logf("creating %d raw Jobs", n)
	began := time.Now()
	err := testenv.Parallel(ctx, n, e.Workers, func(ctx context.Context, i int) error {
		return e.Client.Create(ctx, rawJob(i))
	})
	rawDur := time.Since(began)
	if err != nil {
		return fmt.Errorf("raw jobs: %w", err)
	}
	rawRate := rate(n, rawDur)
	r.Addf("raw Job creates/s", fmt.Sprintf("%d suspended Jobs, %d workers, client QPS %g", n, e.Workers, e.Cfg.QPS), "%.0f", rawRate)
	if err := e.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(rawNS), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return fmt.Errorf("delete raw jobs: %w", err)
	}
	if err := testenv.Poll(ctx, timeoutFor(n, time.Minute, 50*time.Millisecond), 0, "raw Job deletion", func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		err := e.Client.List(ctx, &jobs, client.InNamespace(rawNS), client.Limit(1))
		return err == nil && len(jobs.Items) == 0, err
	}); err != nil {
		return err
	}

	op := e.Operators()[0]
	before, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	tr := e.Track(ctx, throughputNS)
	defer tr.Stop()
	e.Logf("creating %d Tasks", n)
	began = time.Now()
	if _, err := e.CreateTasks(ctx, throughputNS, "t", n, e.Workers, false, nil); err != nil {
		return err
	}
	createDur := time.Since(began)
	r.Addf("Tasks created", fmt.Sprintf("in %s (%.0f/s)", secs(createDur), rate(n, createDur)), "%d", n)
	waitErr := tr.WaitTerminal(ctx, n, timeoutFor(n, 2*time.Minute, time.Second))
	lastStarted, lastTerminal := tr.Last()
	started, terminal, _ := tr.Counts()
	r.Addf("all Running after", fmt.Sprintf("%d/%d started; from the first create", started, n), "%s", secs(lastStarted))
	r.Addf("all Succeeded after", fmt.Sprintf("%d/%d terminal; p50 %s, p90 %s", terminal, n,
		secs(tr.Percentile(50)), secs(tr.Percentile(90))), "%s", secs(lastTerminal))
	if waitErr != nil {
		return waitErr
	}
	tasksPerSec := rate(n, lastTerminal)
	r.Addf("Tasks/s", "created to Succeeded", "%.1f", tasksPerSec)

	// Events are sent asynchronously; give the last ones a moment to land.
	time.Sleep(3 * time.Second)
	after, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	written := after.since(before)
	opWrites := written.operator
	perTask := harness.Sum(opWrites) / float64(n)
	r.Addf("operator API writes per Task", "operator's rest_client_requests_total: "+methods(opWrites), "%.2f", perTask)
	events, eventWrites, byType, err := harness.EventWrites(ctx, e.Client, throughputNS)
	if err != nil {
		return err
	}
	dropped, err := harness.OperatorCounter(ctx, op, "taskoperator_events_dropped_total")
	if err != nil {
		return err
	}
	r.Addf("Event writes per Task", fmt.Sprintf("%d Events (%v); Normal Events dropped by the budget so far: %.0f", events, byType, dropped), "%.2f", float64(eventWrites)/float64(n))
	r.Addf("operator API writes per Task, without Events", "the above less the Event writes", "%.2f", perTask-float64(eventWrites)/float64(n))
	api := written.apiserver
	r.Addf("apiserver writes per Task, tasks", "all clients, bench's own creates included: "+pick(api, "example.com/tasks"), "%.2f", sumPrefix(api, "example.com/tasks")/float64(n))
	r.Addf("apiserver writes per Task, jobs", "all clients (Job controller too): "+pick(api, "batch/jobs"), "%.2f", sumPrefix(api, "batch/jobs")/float64(n))
	r.Addf("write-rate utilisation", "(Tasks/s × writes per Task) ÷ raw Job creates/s", "%.3f", tasksPerSec*perTask/rawRate)

	c, err := e.Check(ctx, throughputNS)
	if err != nil {
		return err
	}
	r.consistency(c)
	return nil
}

func rawJob(i int) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: rawNS, Name: fmt.Sprintf("raw-%05d", i), Labels: map[string]string{harness.BenchLabel: "true"}},
		Spec: batchv1.JobSpec{
			Suspend: ptr(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.37", Command: []string{"sh", "-c", "true"}}},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func sumPrefix(m map[string]float64, prefix string) float64 {
	var t float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix+" ") || strings.HasPrefix(k, prefix+"/") {
			t += v
		}
	}
	return t
}

func pick(m map[string]float64, prefix string) string {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix+" ") || strings.HasPrefix(k, prefix+"/") {
			out[k] = v
		}
	}
	return methods(out)
}

// idle counts the operator's writes while the throughput run's Tasks rest, finished.
func idle(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	if err := e.EnsureNamespace(ctx, throughputNS); err != nil {
		return err
	}
	// Standalone runs have no throughput Tasks yet: make them (creates tolerate existing ones).
	var tasks taskv1.TaskList
	if err := e.Client.List(ctx, &tasks, client.InNamespace(throughputNS)); err != nil {
		return err
	}
	if len(tasks.Items) < s.Tasks {
		if err := runTasks(ctx, e, throughputNS, "t", s.Tasks); err != nil {
			return err
		}
	}
	var all taskv1.TaskList
	if err := e.Client.List(ctx, &all); err != nil {
		return err
	}
	finished := 0
	for _, t := range all.Items {
		if t.Status.Phase == taskv1.PhaseSucceeded || t.Status.Phase == taskv1.PhaseFailed {
			finished++
		}
	}
	time.Sleep(5 * time.Second) // let trailing Events land
	op := e.Operators()[0]
	before, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	e.Logf("counting writes at rest for %s (%d Tasks, %d finished)", s.Gap, len(all.Items), finished)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.Gap):
	}
	after, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	written := after.since(before)
	r.Addf("Tasks at rest", "cluster-wide, finished", "%d (%d finished)", len(all.Items), finished)
	r.Addf("window", "", "%s", s.Gap)
	opWrites := written.operator
	r.Violation("operator writes at rest", int(harness.Sum(opWrites)), "operator's rest_client_requests_total: "+methods(opWrites))
	api := written.apiserver
	r.Addf("apiserver writes to tasks/jobs at rest", "all clients: "+pick(api, "example.com/tasks")+"; "+pick(api, "batch/jobs"),
		"%.0f", sumPrefix(api, "example.com/tasks")+sumPrefix(api, "batch/jobs"))
	return nil
}

// memory, on a fresh operator, runs s.Tasks Tasks to completion and reads the process's
// peak RSS, with every Task and Job of the cluster in its cache.
func memory(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns = "bench-memory"
	if err := e.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	op := e.Operators()[0]
	hwm0, _, err := op.Memory()
	if err != nil {
		return err
	}
	r.Addf("peak RSS after start-up", "VmHWM, before the scenario's Tasks", "%.1f MiB", mib(hwm0))
	tr := e.Track(ctx, ns)
	defer tr.Stop()
	e.Logf("creating %d Tasks", s.Tasks)
	if _, err := e.CreateTasks(ctx, ns, "m", s.Tasks, e.Workers, false, nil); err != nil {
		return err
	}
	if err := tr.WaitTerminal(ctx, s.Tasks, timeoutFor(s.Tasks, 2*time.Minute, time.Second)); err != nil {
		return err
	}
	_, last := tr.Last()
	time.Sleep(3 * time.Second)
	hwm, rss, err := op.Memory()
	if err != nil {
		return err
	}
	var tasks metav1.PartialObjectMetadataList
	tasks.SetGroupVersionKind(taskv1.GroupVersion.WithKind("TaskList"))
	if err := e.Client.List(ctx, &tasks); err != nil {
		return err
	}
	var jobs metav1.PartialObjectMetadataList
	jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := e.Client.List(ctx, &jobs); err != nil {
		return err
	}
	r.Addf("Tasks run", fmt.Sprintf("all Succeeded after %s", secs(last)), "%d", s.Tasks)
	r.Addf("Tasks / Jobs in the cluster", "all cached by the operator", "%d / %d", len(tasks.Items), len(jobs.Items))
	r.Addf("peak RSS (VmHWM)", fmt.Sprintf("pid %d, /proc/<pid>/status", op.PID()), "%.1f MiB", mib(hwm))
	r.Addf("RSS now (VmRSS)", "", "%.1f MiB", mib(rss))
	if len(tasks.Items) > 0 {
		r.Addf("peak RSS above start-up per Task", "(VmHWM − start-up VmHWM) ÷ Tasks in cluster", "%.1f KiB", float64(hwm-hwm0)/1024/float64(len(tasks.Items)))
	}
	c, err := e.Check(ctx, ns)
	if err != nil {
		return err
	}
	r.Violation("duplicate Jobs", c.Duplicates, "")
	r.Violation("non-terminal Tasks", c.NonTerminal, "")
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
