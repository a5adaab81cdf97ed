package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/internal/testenv/invariants"
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
	if err := e.WaitNoJobs(ctx, rawNS, timeoutFor(n, time.Minute, 50*time.Millisecond)); err != nil {
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

	return checkInvariants(ctx, e, throughputNS, n, r)
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
	// The memory scenario counts every cached object: leave it an empty cluster.
	e.Logf("deleting the %d Tasks at rest and their Jobs", len(all.Items))
	if err := e.DeleteTasks(ctx, throughputNS, timeoutFor(len(all.Items), 2*time.Minute, 50*time.Millisecond)); err != nil {
		return err
	}
	return e.WaitNoJobs(ctx, throughputNS, timeoutFor(len(all.Items), 2*time.Minute, 50*time.Millisecond))
}

// memory, on a fresh operator, fills the cluster with s.Tasks suspended Tasks and as many Jobs
// labelled as the operator labels its own (suspended, owned by no Task: the cache holds them,
// nothing runs them), runs s.Reps Tasks to completion so that the operator's own Jobs are cached
// too, and reads the process's peak RSS once every Task has a status.
func memory(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns, jobsNS = "bench-memory", "bench-memory-jobs"
	for _, n := range []string{ns, jobsNS} {
		if err := e.EnsureNamespace(ctx, n); err != nil {
			return err
		}
	}
	op := e.Operators()[0]
	hwm0, _, err := op.Memory()
	if err != nil {
		return err
	}
	r.Addf("peak RSS after start-up", "VmHWM, before the scenario's objects", "%.1f MiB", mib(hwm0))
	cpu0, err := operatorCPU(ctx, op)
	if err != nil {
		return err
	}
	began := time.Now()
	e.Logf("creating %d suspended Tasks and %d labelled Jobs", s.Tasks, s.Tasks)
	suspend := func(_ int, t *taskv1.Task) {
		t.Spec.Suspend = true
		if s.Applied {
			lastApplied(t)
		}
	}
	if _, err := e.CreateTasks(ctx, ns, "rest", s.Tasks, e.Workers, true, suspend); err != nil {
		return err
	}
	if err := testenv.Parallel(ctx, s.Tasks, e.Workers, func(ctx context.Context, i int) error {
		job := restingJob(jobsNS, i)
		if err := e.Client.Create(ctx, job); err != nil {
			return err
		}
		if job.Spec.ManagedBy == nil {
			return fmt.Errorf("job %s: the apiserver dropped spec.managedBy (JobManagedBy disabled?): the Job controller would manage it", job.Name)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("create labelled Jobs: %w", err)
	}
	e.Logf("running %d Tasks", s.Reps)
	if err := runTasks(ctx, e, ns, "m", s.Reps); err != nil {
		return err
	}
	if err := waitStatuses(ctx, e, ns, s.Tasks+s.Reps, timeoutFor(s.Tasks, 2*time.Minute, 100*time.Millisecond)); err != nil {
		return err
	}
	settled := time.Since(began)
	time.Sleep(3 * time.Second)
	hwm, rss, err := op.Memory()
	if err != nil {
		return err
	}
	cpu, err := operatorCPU(ctx, op)
	if err != nil {
		return err
	}
	tasks, jobs, err := clusterCounts(ctx, e)
	if err != nil {
		return err
	}
	r.Addf("Tasks / Jobs in the cluster", fmt.Sprintf("all cached by the operator; %d suspended Tasks and %d labelled Jobs created, %d Tasks run; every Task had a status after %s",
		s.Tasks, s.Tasks, s.Reps, secs(settled)), "%d / %d", tasks, jobs)
	r.Addf("peak RSS (VmHWM)", fmt.Sprintf("pid %d, /proc/<pid>/status; goal ≤ 150 MiB at 10,000 Tasks + 10,000 Jobs", op.PID()), "%.1f MiB", mib(hwm))
	r.Addf("RSS now (VmRSS)", "", "%.1f MiB", mib(rss))
	if objects := tasks + jobs; objects > 0 {
		r.Addf("peak RSS above start-up per 1,000 cached objects", "(VmHWM − start-up VmHWM) ÷ (Tasks + Jobs in the cluster) × 1,000; goal ≤ 4 MiB", "%.2f MiB",
			mib(hwm-hwm0)*1000/float64(objects))
	}
	r.Addf("operator CPU", "process_cpu_seconds_total from the start of the scenario to the peak's reading: what the garbage collector's setting costs", "%.1f s", cpu-cpu0)
	if err := liveHeap(ctx, op, r); err != nil {
		return err
	}
	// The suspended Tasks never settle: judged as they are, duplicates and Jobs counted only.
	rep, err := e.Check(ctx, ns, invariants.Options{})
	if err != nil {
		return err
	}
	r.Violation("duplicate Jobs", rep.Counts[invariants.Duplicates], "")
	r.Violation("Jobs of suspended Tasks", rep.Jobs-s.Reps, fmt.Sprintf("%d Jobs in %s for %d Tasks run", rep.Jobs, ns, s.Reps))
	e.Logf("deleting the scenario's Tasks and Jobs")
	// One by one: a DELETE of the collection of 10,000 outlasts the apiserver's request timeout.
	if err := testenv.Parallel(ctx, s.Tasks, e.Workers, func(ctx context.Context, i int) error {
		err := e.Client.Delete(ctx, restingJob(jobsNS, i), client.PropagationPolicy(metav1.DeletePropagationBackground))
		return client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("delete labelled Jobs: %w", err)
	}
	return e.DeleteTasks(ctx, ns, timeoutFor(s.Tasks, 2*time.Minute, 50*time.Millisecond))
}

// restingJob is the i-th Job labelled as the operator labels its own, with a pod template of
// the same shape, suspended and owned by no Task. Its spec.managedBy names another controller,
// so kube-controller-manager's Job controller leaves it alone: otherwise writing the Suspended
// condition of 10,000 such Jobs, at its client rate limit, stalls the Jobs that do run for
// minutes.
func restingJob(ns string, i int) *batchv1.Job {
	name := fmt.Sprintf("resting-%05d", i)
	labels := map[string]string{taskv1.LabelTaskName: name, taskv1.LabelRun: "1", taskv1.LabelAttempt: "1", harness.BenchLabel: "true"}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr(restingJobsManager),
			Suspend:   ptr(true), Parallelism: ptr(int32(1)), Completions: ptr(int32(1)), BackoffLimit: ptr(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "task", Image: "busybox:1.37", Command: []string{"/bin/sh", "-c", fmt.Sprintf("echo resting job %d && sleep 1", i)},
						Env: []corev1.EnvVar{{Name: "TASK_NAME", Value: name}, {Name: "TASK_ATTEMPT", Value: "1"}},
					}},
				},
			},
		},
	}
}

// restingJobsManager is the controller resting Jobs claim to be managed by: none runs.
const restingJobsManager = "example.com/bench-resting"

// waitStatuses waits until n Tasks in ns have a status for their current generation.
func waitStatuses(ctx context.Context, e *harness.Env, ns string, n int, timeout time.Duration) error {
	return testenv.Poll(ctx, timeout, 2*time.Second, fmt.Sprintf("%d Tasks in %s to have a status", n, ns), func(ctx context.Context) (bool, error) {
		var tasks taskv1.TaskList
		if err := e.Client.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
			return false, err
		}
		done := 0
		for _, t := range tasks.Items {
			if t.Status.ObservedGeneration == t.Generation {
				done++
			}
		}
		return done >= n, nil
	})
}

// clusterCounts counts every Task and every Job in the cluster.
func clusterCounts(ctx context.Context, e *harness.Env) (tasks, jobs int, err error) {
	var tl metav1.PartialObjectMetadataList
	tl.SetGroupVersionKind(taskv1.GroupVersion.WithKind("TaskList"))
	if err := e.Client.List(ctx, &tl); err != nil {
		return 0, 0, err
	}
	var jl metav1.PartialObjectMetadataList
	jl.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := e.Client.List(ctx, &jl); err != nil {
		return 0, 0, err
	}
	return len(tl.Items), len(jl.Items), nil
}

// operatorCPU reads the CPU seconds the operator process has used.
func operatorCPU(ctx context.Context, op *testenv.Operator) (float64, error) {
	samples, err := op.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return harness.SampleSum(samples, "process_cpu_seconds_total"), nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// liveHeap saves the operator's heap profile (taken after a forced GC, so it shows what is
// live) and reports the live heap and the heap the runtime holds from the OS, which together
// with the peak RSS tell what is cached from what is garbage waiting for a collection.
func liveHeap(ctx context.Context, op *testenv.Operator, r *Result) error {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("task-operator-bench-profiles-%d", time.Now().Unix()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "operator.heap.pprof")
	if err := op.WriteHeapProfile(ctx, file); err != nil {
		return err
	}
	samples, err := op.Metrics(ctx)
	if err != nil {
		return err
	}
	value := func(name string) float64 { return harness.SampleSum(samples, name) }
	r.Addf("live heap after a GC / heap held from the OS", "go_memstats_heap_alloc_bytes / go_memstats_heap_sys_bytes - heap_released; heap profile: "+file,
		"%.1f MiB / %.1f MiB", mib(int64(value("go_memstats_heap_alloc_bytes"))),
		mib(int64(value("go_memstats_heap_sys_bytes")-value("go_memstats_heap_released_bytes"))))
	r.Addf("runtime memory beside the heap: stacks / GC metadata / spans and other", "go_memstats_stack_sys_bytes / gc_sys_bytes / mspan_sys_bytes + mcache_sys_bytes + buck_hash_sys_bytes + other_sys_bytes; the rest of the RSS is the binary's mapped code and data",
		"%.1f / %.1f / %.1f MiB", mib(int64(value("go_memstats_stack_sys_bytes"))), mib(int64(value("go_memstats_gc_sys_bytes"))),
		mib(int64(value("go_memstats_mspan_sys_bytes")+value("go_memstats_mcache_sys_bytes")+value("go_memstats_buck_hash_sys_bytes")+value("go_memstats_other_sys_bytes"))))
	return nil
}

// lastApplied annotates t as `kubectl apply` does a Task it creates: the manifest as applied
// (kind, apiVersion, metadata and spec, no status), as compact JSON with a trailing newline.
func lastApplied(t *taskv1.Task) {
	manifest := map[string]any{
		"apiVersion": taskv1.GroupVersion.String(), "kind": "Task",
		"metadata": map[string]any{"name": t.Name, "namespace": t.Namespace, "labels": t.Labels},
		"spec":     t.Spec,
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		panic(fmt.Sprintf("encode the manifest of task %s: %v", t.Name, err)) // plain maps and a typed spec: cannot fail
	}
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[corev1.LastAppliedConfigAnnotation] = string(data) + "\n"
}
