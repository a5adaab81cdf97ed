package queues_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/testenv"
)

// TestKueueAdmitsPlainJob checks the infrastructure alone: a plain suspended batch/v1 Job with
// Kueue's queue label waits while its ClusterQueue is full (a first Job that runs until deleted
// holds the quota), and Kueue admits and unsuspends it once that Job is gone.
func TestKueueAdmitsPlainJob(t *testing.T) {
	ns := setUp(t)
	ctx := t.Context()
	queue := newQueue(t, ns, quota(1), "Never")

	first := plainJob(ns, "first", queue, podCPU, "600")
	second := plainJob(ns, "second", queue, podCPU, "1")
	// One at a time: the first holds the whole quota before the second asks for it. (Created
	// together right after Kueue started, both were sometimes admitted at once, in 4 of 7 runs;
	// the Task tests, which check the running count from pod times, never saw it.)
	if err := kube.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the first Job admitted and unsuspended", func(ctx context.Context) (bool, error) {
		a, err := getJob(ctx, ns, "first")
		if err != nil {
			return false, err
		}
		return !*a.Spec.Suspend, fmt.Errorf("first suspended=%v", suspended(a))
	})
	if err := kube.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the second Job waiting while the first runs", func(ctx context.Context) (bool, error) {
		a, errA := getJob(ctx, ns, "first")
		b, errB := getJob(ctx, ns, "second")
		if errA != nil || errB != nil {
			return false, errors.Join(errA, errB)
		}
		if *a.Spec.Suspend || !*b.Spec.Suspend {
			return false, testenv.Permanent(fmt.Errorf("first suspended=%v (succeeded %d, failed %d), second suspended=%v (succeeded %d, failed %d)",
				suspended(a), a.Status.Succeeded, a.Status.Failed, suspended(b), b.Status.Succeeded, b.Status.Failed))
		}
		return true, nil
	})
	testenv.Eventually(t, 30*time.Second, "the second Job's Workload waits for quota", func(ctx context.Context) (bool, error) {
		wl := workloadOf(t, ns, second)
		reason := conditionReason(wl, "QuotaReserved")
		return reason == "Pending", fmt.Errorf("QuotaReserved reason %q, want Pending", reason)
	})
	if err := kube.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the second Job admitted and complete", func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, "second")
		if err != nil {
			return false, err
		}
		return j.Status.Succeeded == 1, fmt.Errorf("second suspended=%s, %d succeeded", suspended(j), j.Status.Succeeded)
	})
}

// newQueue makes a ClusterQueue with cpu quota (cores) and preemption policy within it (Never,
// LowerPriority), named after ns, and a LocalQueue "queue" for it in ns; it returns the
// LocalQueue's name. The ClusterQueue is deleted with the test.
func newQueue(t *testing.T, ns, cpu, preemption string) string {
	t.Helper()
	return newNamedQueue(t, ns, "queue", cpu, preemption)
}

// newNamedQueue is newQueue with a LocalQueue called name; a name other than "queue" gets a
// ClusterQueue of its own, named ns-name.
func newNamedQueue(t *testing.T, ns, name, cpu, preemption string) string {
	t.Helper()
	cluster := ns
	if name != "queue" {
		cluster = ns + "-" + name
	}
	apply(t, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[4]s}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: %[3]s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "%[2]s"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[5]s, namespace: %[1]s}
spec: {clusterQueue: %[4]s}
`, ns, cpu, preemption, cluster, name))
	t.Cleanup(func() {
		_ = dyn.Resource(testenv.KueueResource("clusterqueues")).Delete(context.Background(), cluster, metav1.DeleteOptions{})
	})
	testenv.Eventually(t, time.Minute, "ClusterQueue active", func(ctx context.Context) (bool, error) {
		cq, err := dyn.Resource(testenv.KueueResource("clusterqueues")).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if conditionReason(cq, "Active") != "Ready" {
			return false, fmt.Errorf("ClusterQueue conditions: %v", cq.Object["status"])
		}
		return true, nil
	})
	return name
}

func apply(t *testing.T, manifest string) {
	t.Helper()
	if _, _, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// plainJob is a suspended Job in queue whose one pod requests cpu and runs seconds.
func plainJob(ns, name, queue, cpu, seconds string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": queue}},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{testenv.RunSecondsLabel: seconds}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "c", Image: "busybox",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
					}},
				},
			},
		},
	}
}

// getJob is the Job, or nil with the error that kept it from being read.
func getJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	var j batchv1.Job
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

func suspended(j *batchv1.Job) string {
	if j == nil {
		return "(no job)"
	}
	return fmt.Sprint(j.Spec.Suspend != nil && *j.Spec.Suspend)
}

// workloadOf is the Workload Kueue made for job.
func workloadOf(t *testing.T, ns string, job *batchv1.Job) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, "the Workload of Job "+job.Name, func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, job.Name)
		if err != nil {
			return false, err
		}
		list, err := dyn.Resource(testenv.KueueResource("workloads")).Namespace(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "kueue.x-k8s.io/job-uid=" + string(j.UID),
		})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Errorf("%d workloads: %v", len(list.Items), err)
		}
		wl = &list.Items[0]
		return true, nil
	})
	return wl
}

// conditionReason is the reason of an object's status condition of type typ ("" if none).
func conditionReason(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "reason")
}

// conditionStatus is the status (True, False, Unknown) of an object's status condition of type
// typ ("" if none).
func conditionStatus(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "status")
}

func conditionField(u *unstructured.Unstructured, typ, field string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			v, _ := m[field].(string)
			return v
		}
	}
	return ""
}
