package queues_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// podCPU is what each run's pod requests; a queue of n pods has n times as much quota.
const podCPU = "100m"

func quota(pods int) string { return fmt.Sprintf("%dm", 100*pods) }

// queuedTask is a one-shot Shell Task in queue whose pod requests podCPU and runs seconds.
func queuedTask(ns, name, queue, priority, seconds string, mut ...func(*v1.Task)) *v1.Task {
	task := &v1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{testenv.RunSecondsLabel: seconds}},
		Spec: v1.TaskSpec{
			Runner:            v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "true"}},
			QueueName:         queue,
			PriorityClassName: priority,
			Resources:         &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPU)}},
		},
	}
	for _, m := range mut {
		m(task)
	}
	return task
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kube.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// priorities makes the WorkloadPriorityClasses low (10) and high (1000).
func priorities(t *testing.T) {
	apply(t, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
`)
}

// span is when a pod ran.
type span struct {
	task          string
	start, finish time.Time
}

// podSpans reads when each finished pod of ns ran, from the times its status records.
func podSpans(ctx context.Context, ns string) ([]span, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []span
	for _, p := range pods.Items {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			continue
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		out = append(out, span{task: p.Labels[v1.LabelTaskName], start: term.StartedAt.Time, finish: term.FinishedAt.Time})
	}
	return out, nil
}

// maxConcurrent is the most spans running at one instant; a span runs from its start up to, not
// including, its finish.
func maxConcurrent(spans []span) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1}, edge{s.finish, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta // finishes first
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

func taskPhase(ctx context.Context, ns, name string) (*v1.Task, error) {
	var task v1.Task
	err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &task)
	return &task, err
}

// TestQueueLimitsConcurrency: 4N queued Tasks through a ClusterQueue with N pods' worth of CPU.
// At no instant do more than N pods run (judged from the pods' own start and finish times), all
// finish, and the N high-priority Tasks submitted last start before every low-priority Task
// still waiting when Kueue had them. The low Tasks run twice as long as the high ones, so some
// are still waiting when the high ones come.
func TestQueueLimitsConcurrency(t *testing.T) {
	ns := setUp(t)
	const n = 3
	queue := newQueue(t, ns, quota(n), "Never")
	priorities(t)
	began := time.Now()
	var low []client.Object
	for i := range 3 * n {
		low = append(low, queuedTask(ns, fmt.Sprintf("low-%d", i), queue, "low", "4"))
	}
	create(t, low...)
	testenv.Eventually(t, time.Minute, "the queue full: N low Tasks Running, the rest Queued", func(ctx context.Context) (bool, error) {
		var tasks v1.TaskList
		if err := kube.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
			return false, err
		}
		count := map[v1.Phase]int{}
		for _, task := range tasks.Items {
			count[task.Status.Phase]++
		}
		if count[v1.PhaseRunning] != n || count[v1.PhaseQueued] != 2*n {
			return false, fmt.Errorf("phases %v", count)
		}
		return true, nil
	})
	testenv.Eventually(t, 30*time.Second, "a queued Task says why it waits, in Kueue's words", func(ctx context.Context) (bool, error) {
		task, err := taskPhase(ctx, ns, "low-"+fmt.Sprint(3*n-1))
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionAdmitted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Pending" || !strings.Contains(c.Message, "insufficient unused quota") {
			return false, fmt.Errorf("phase %s, Admitted condition %+v", task.Status.Phase, c)
		}
		return true, nil
	})
	var high []client.Object
	for i := range n {
		high = append(high, queuedTask(ns, fmt.Sprintf("high-%d", i), queue, "high", "2"))
	}
	create(t, high...)
	waiting := lowTasksWaitingBehind(t, ns, n)
	testenv.Eventually(t, 3*time.Minute, "every Task Succeeded", func(ctx context.Context) (bool, error) {
		var tasks v1.TaskList
		if err := kube.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
			return false, err
		}
		done := 0
		for _, task := range tasks.Items {
			if task.Status.Phase == v1.PhaseSucceeded {
				done++
			}
		}
		if done != 4*n {
			return false, fmt.Errorf("%d of %d Succeeded", done, 4*n)
		}
		return true, nil
	})
	t.Logf("%d Tasks through a queue of %d in %s", 4*n, n, time.Since(began).Round(time.Second))
	spans, err := podSpans(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 4*n {
		t.Fatalf("%d finished pods, want %d", len(spans), 4*n)
	}
	if most := maxConcurrent(spans); most > n {
		t.Errorf("%d pods ran at once, the quota allows %d", most, n)
	}
	var lastHigh time.Time
	for _, s := range spans {
		if strings.HasPrefix(s.task, "high-") && s.start.After(lastHigh) {
			lastHigh = s.start
		}
	}
	for _, s := range spans {
		if waiting[s.task] && s.start.Before(lastHigh) {
			t.Errorf("low-priority Task %s, waiting when Kueue had every high one, started at %s, before the last high one (%s)", s.task, s.start, lastHigh)
		}
	}
}

// lowTasksWaitingBehind waits until Kueue's scheduler has considered the n high-priority Tasks'
// Workloads (each has a QuotaReserved condition, true or not) and returns the low-priority Tasks
// whose Workloads had no quota then: from that instant Kueue must admit every high one first.
// Judged from the Workloads, not from when pods started: a low Task admitted just before the
// high ones were queued may start after they were created.
func lowTasksWaitingBehind(t *testing.T, ns string, n int) map[string]bool {
	t.Helper()
	var waiting map[string]bool
	testenv.Eventually(t, time.Minute, "Kueue has considered every high-priority Workload", func(ctx context.Context) (bool, error) {
		workloads, err := workloadsByTask(ctx, ns)
		if err != nil {
			return false, err
		}
		for i := range n {
			name := fmt.Sprintf("high-%d", i)
			if wl := workloads[name]; wl == nil || conditionStatus(wl, "QuotaReserved") == "" {
				return false, fmt.Errorf("%s: no Workload, or one Kueue has not considered yet", name)
			}
		}
		waiting = map[string]bool{}
		for name, wl := range workloads {
			if strings.HasPrefix(name, "low-") && conditionStatus(wl, "QuotaReserved") != string(metav1.ConditionTrue) {
				waiting[name] = true
			}
		}
		return true, nil
	})
	if len(waiting) == 0 {
		t.Fatal("every low-priority Task had quota before Kueue had the high ones: the priority order goes untested")
	}
	t.Logf("%d low-priority Tasks waiting behind the high ones", len(waiting))
	return waiting
}

// workloadsByTask maps each Task of ns that has a Job to the Workload Kueue made for that Job.
func workloadsByTask(ctx context.Context, ns string) (map[string]*unstructured.Unstructured, error) {
	var jobs batchv1.JobList
	if err := kube.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	taskOfJob := map[string]string{}
	for _, j := range jobs.Items {
		taskOfJob[string(j.UID)] = j.Labels[v1.LabelTaskName]
	}
	list, err := dyn.Resource(testenv.KueueResource("workloads")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if task := taskOfJob[list.Items[i].GetLabels()["kueue.x-k8s.io/job-uid"]]; task != "" {
			out[task] = &list.Items[i]
		}
	}
	return out, nil
}

// blocker fills a queue of one pod with a plain Job that runs until deleted, and returns a
// function that deletes it.
func blocker(t *testing.T, ns, queue string) func() {
	t.Helper()
	job := plainJob(ns, "blocker", queue, podCPU, "600")
	create(t, job)
	testenv.Eventually(t, time.Minute, "the blocker admitted", func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, "blocker")
		if err != nil {
			return false, err
		}
		return !*j.Spec.Suspend, fmt.Errorf("blocker suspended=%s", suspended(j))
	})
	return func() {
		if err := kube.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Error(err)
		}
	}
}

// TestScheduledForbidOnFullQueue: a scheduled Task with concurrency policy Forbid whose run waits
// on a full queue holds its later schedule times back: one Job, Queued, however many times
// come due; once the queue frees up the run starts, and runs follow one at a time.
func TestScheduledForbidOnFullQueue(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "Never")
	release := blocker(t, ns, queue)
	task := queuedTask(ns, "every-2s", queue, "", "1", func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 2s", ConcurrencyPolicy: v1.ForbidConcurrent}
	})
	create(t, task)
	time.Sleep(8 * time.Second) // four schedule times
	jobs := taskJobs(t, ns, "every-2s")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs after 8s on a full queue, want 1 (Forbid)", len(jobs))
	}
	if got, _ := taskPhase(t.Context(), ns, "every-2s"); got.Status.Phase != v1.PhaseQueued {
		t.Errorf("phase %s, want Queued", got.Status.Phase)
	}
	release()
	testenv.Eventually(t, time.Minute, "two runs succeeded", func(ctx context.Context) (bool, error) {
		succeeded := 0
		for _, j := range taskJobs(t, ns, "every-2s") {
			if j.Status.Succeeded > 0 {
				succeeded++
			}
		}
		return succeeded >= 2, fmt.Errorf("%d runs succeeded", succeeded)
	})
	var spans []span
	all, err := podSpans(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.task == "every-2s" {
			spans = append(spans, s)
		}
	}
	if most := maxConcurrent(spans); most > 1 {
		t.Errorf("%d runs at once under Forbid", most)
	}
}

func taskJobs(t *testing.T, ns, task string) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := kube.List(t.Context(), &jobs, client.InNamespace(ns), client.MatchingLabels{v1.LabelTaskName: task}); err != nil {
		t.Fatal(err)
	}
	return jobs.Items
}

// TestDeleteWhileQueued: a Task deleted while its Job waits in the queue leaves no Job and no
// Workload behind.
func TestDeleteWhileQueued(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "Never")
	defer blocker(t, ns, queue)()
	task := queuedTask(ns, "doomed", queue, "", "1")
	create(t, task)
	var job batchv1.Job
	testenv.Eventually(t, time.Minute, "the Task Queued, its Workload made", func(ctx context.Context) (bool, error) {
		got, err := taskPhase(ctx, ns, "doomed")
		if err != nil || got.Status.Phase != v1.PhaseQueued || got.Status.LastJob == nil {
			return false, fmt.Errorf("phase %s: %v", got.Status.Phase, err)
		}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.LastJob.Name}, &job); err != nil {
			return false, err
		}
		return true, nil
	})
	workloadOf(t, ns, &job)
	if err := kube.Delete(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "no Task, Job or Workload left of it", func(ctx context.Context) (bool, error) {
		if _, err := taskPhase(ctx, ns, "doomed"); err == nil {
			return false, fmt.Errorf("the Task is still there")
		}
		if j, err := getJob(ctx, ns, job.Name); err == nil {
			return false, fmt.Errorf("job %s is still there (finalizers %v)", j.Name, j.Finalizers)
		} else if !apierrors.IsNotFound(err) {
			return false, err
		}
		list, err := dyn.Resource(testenv.KueueResource("workloads")).Namespace(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "kueue.x-k8s.io/job-uid=" + string(job.UID),
		})
		if err != nil || len(list.Items) > 0 {
			return false, fmt.Errorf("%d workloads left: %v", len(list.Items), err)
		}
		return true, nil
	})
}

// TestPreemptionKeepsRetries: a running low-priority Task with no retry left is preempted by a
// high-priority one; it waits again (Queued, Kueue's reason), runs again once admitted, and
// succeeds on its first attempt: preemption is not a failure. Its timeout counts from its
// admission, not from its creation.
func TestPreemptionKeepsRetries(t *testing.T) {
	ns := setUp(t)
	queue := newQueue(t, ns, quota(1), "LowerPriority")
	priorities(t)
	low := queuedTask(ns, "low", queue, "low", "6", func(t *v1.Task) {
		t.Spec.Retry = &v1.RetryPolicy{MaxRetries: 0}
		t.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Second}
	})
	create(t, low)
	testenv.Eventually(t, time.Minute, "the low Task admitted and Running", func(ctx context.Context) (bool, error) {
		got, err := taskPhase(ctx, ns, "low")
		if err != nil || got.Status.Phase != v1.PhaseRunning || got.Status.CurrentRun == nil || got.Status.CurrentRun.AdmittedTime == nil {
			return false, fmt.Errorf("phase %s: %v", got.Status.Phase, err)
		}
		return true, nil
	})
	time.Sleep(2 * time.Second)
	create(t, queuedTask(ns, "high", queue, "high", "8"))
	testenv.Eventually(t, time.Minute, "the low Task preempted: Queued again", func(ctx context.Context) (bool, error) {
		got, err := taskPhase(ctx, ns, "low")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionAdmitted)
		if got.Status.Phase != v1.PhaseQueued || c == nil || c.Status != metav1.ConditionFalse {
			return false, fmt.Errorf("phase %s, Admitted %+v", got.Status.Phase, c)
		}
		t.Logf("preempted: %s: %s", c.Reason, c.Message)
		return true, nil
	})
	// The high Task runs 8s: past the low one's creation + timeout, not past its admission + timeout.
	testenv.Eventually(t, time.Minute, "both Succeeded, the low one on attempt 1", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"low", "high"} {
			got, err := taskPhase(ctx, ns, name)
			if err != nil {
				return false, err
			}
			if got.Status.Phase == v1.PhaseFailed {
				return false, testenv.Permanent(fmt.Errorf("%s failed: %s", name, got.Status.LastError))
			}
			if got.Status.Phase != v1.PhaseSucceeded {
				return false, fmt.Errorf("%s is %s", name, got.Status.Phase)
			}
			if got.Status.Attempts != 1 {
				return false, testenv.Permanent(fmt.Errorf("%s took %d attempts", name, got.Status.Attempts))
			}
		}
		return true, nil
	})
}
