package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// ErrUnsupported says a scenario cannot run on this machine; the tests skip it.
var ErrUnsupported = errors.New("not supported here")

const (
	queueTasksNS = "bench-queue-tasks"
	queueJobsNS  = "bench-queue-jobs"
	queueName    = "bench"
	// queuePodCPU is what each pod requests; the ClusterQueue has Reps times as much.
	queuePodCPU = 100
)

// queue runs s.Tasks plain Jobs straight into a Kueue ClusterQueue with room for s.Reps pods,
// then as many queued Tasks through the same ClusterQueue, and compares the two: the operator
// must not be the queue's bottleneck. Pods run about a second.
func queue(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	if err := harness.KueueSupported(e.CP); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	installed, err := e.EnsureKueue(ctx)
	if err != nil {
		return err
	}
	if installed {
		// A fresh operator sees Kueue's API from its start, and watches Workloads.
		if err := e.EnsureOperators(ctx, 1, false, true); err != nil {
			return err
		}
	}
	for _, ns := range []string{queueTasksNS, queueJobsNS} {
		if err := e.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if err := applyQueue(ctx, e, s.Reps); err != nil {
		return err
	}
	n := s.Tasks
	timeout := timeoutFor(n, 2*time.Minute, 2*time.Second)

	e.Logf("creating %d queued Jobs", n)
	began := time.Now()
	if err := testenv.Parallel(ctx, n, e.Workers, func(ctx context.Context, i int) error {
		return e.Client.Create(ctx, queuedJob(i))
	}); err != nil {
		return fmt.Errorf("queued jobs: %w", err)
	}
	if err := waitJobsComplete(ctx, e, queueJobsNS, n, timeout); err != nil {
		return err
	}
	jobsTook := time.Since(began)
	r.Addf("plain Jobs through the queue", fmt.Sprintf("%d Jobs, queue of %d pods, created to all complete", n, s.Reps), "%s", secs(jobsTook))

	tr := e.Track(ctx, queueTasksNS)
	defer tr.Stop()
	e.Logf("creating %d queued Tasks", n)
	began = time.Now()
	if _, err := e.CreateTasks(ctx, queueTasksNS, "q", n, e.Workers, false, func(_ int, t *taskv1.Task) {
		t.Spec.QueueName = queueName
		t.Spec.Resources = &corev1.ResourceRequirements{Requests: podRequests()}
	}); err != nil {
		return err
	}
	waitErr := tr.WaitTerminal(ctx, n, timeout)
	tasksTook := time.Since(began)
	_, terminal, _ := tr.Counts()
	r.Addf("queued Tasks through the queue", fmt.Sprintf("%d/%d terminal, created to all Succeeded; p50 %s", terminal, n, secs(tr.Percentile(50))), "%s", secs(tasksTook))
	if waitErr != nil {
		return waitErr
	}
	r.Addf("ratio", "Jobs' time ÷ Tasks' time (1 = the operator adds nothing)", "%.2f", jobsTook.Seconds()/tasksTook.Seconds())
	if err := checkInvariants(ctx, e, queueTasksNS, n, r); err != nil {
		return err
	}
	// Free the queue's Jobs for the scenarios after.
	return e.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(queueJobsNS), client.PropagationPolicy(metav1.DeletePropagationBackground))
}

func podRequests() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(queuePodCPU, resource.DecimalSI)}
}

// applyQueue makes the ClusterQueue with room for pods pods and a LocalQueue on it in both
// namespaces.
func applyQueue(ctx context.Context, e *harness.Env, pods int) error {
	manifest := fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: bench-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: bench}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: bench-flavor
      resources:
      - {name: cpu, nominalQuota: "%dm"}
`, pods*queuePodCPU)
	for _, ns := range []string{queueTasksNS, queueJobsNS} {
		manifest += fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %s, namespace: %s}
spec: {clusterQueue: bench}
`, queueName, ns)
	}
	if _, _, err := testenv.Kubectl(ctx, e.CP.KubeconfigPath, []byte(manifest), "apply", "--server-side", "--field-manager=bench", "-f", "-"); err != nil {
		return err
	}
	return testenv.Poll(ctx, time.Minute, time.Second, "the bench ClusterQueue active", func(ctx context.Context) (bool, error) {
		cq, err := e.Dyn.Resource(testenv.KueueResource("clusterqueues")).Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds := unstructuredConditions(cq.Object)
		return conds["Active"] == "True", fmt.Errorf("ClusterQueue conditions %v", conds)
	})
}

// unstructuredConditions are an object's status conditions, type to status.
func unstructuredConditions(obj map[string]any) map[string]string {
	out := map[string]string{}
	status, _ := obj["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		t, _ := m["type"].(string)
		st, _ := m["status"].(string)
		out[t] = st
	}
	return out
}

// queuedJob is the i-th plain Job of the comparison: what a Task's Job is, without the Task.
func queuedJob(i int) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: queueJobsNS, Name: fmt.Sprintf("job-%05d", i),
			Labels: map[string]string{harness.BenchLabel: "true", "kueue.x-k8s.io/queue-name": queueName},
		},
		Spec: batchv1.JobSpec{
			Suspend:      ptr(true),
			BackoffLimit: ptr[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "busybox:1.37", Command: []string{"sh", "-c", "true"},
					Resources: corev1.ResourceRequirements{Requests: podRequests()},
				}},
			}},
		},
	}
}

// waitJobsComplete waits until n Jobs of ns finished (Complete or Failed, as a Task's Job
// counts).
func waitJobsComplete(ctx context.Context, e *harness.Env, ns string, n int, timeout time.Duration) error {
	return testenv.Poll(ctx, timeout, time.Second, fmt.Sprintf("%d Jobs complete in %s", n, ns), func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		if err := e.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		done := 0
		for _, j := range jobs.Items {
			for _, c := range j.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					done++
				}
			}
		}
		return done >= n, fmt.Errorf("%d of %d complete", done, n)
	})
}
