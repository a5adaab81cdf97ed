package testenv_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"example.com/task-operator/internal/testenv"
)

func TestFullStartup(t *testing.T) {
	cp, cs, _ := fullCluster(t)
	t.Logf("full control plane startup took %s", cp.StartedIn)
	if err := cp.Alive(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{testenv.Etcd, testenv.KubeAPIServer, testenv.KubeControllerManager, testenv.KubeScheduler, testenv.KWOK, "watchdog"} {
		if cp.PIDs()[name] == 0 {
			t.Errorf("no pid recorded for %s: %v", name, cp.PIDs())
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Status.Allocatable.Pods().Value() != 250 {
		t.Errorf("want one fake node with room for 250 pods, got %+v", nodes.Items)
	}
}

func TestJobCompletes(t *testing.T) {
	t.Parallel()
	_, cs, ns := fullCluster(t)
	job := createJob(t, cs, ns, nil, nil)

	waitJobCondition(t, cs, job, batchv1.JobComplete)

	pod := onlyPod(t, cs, job)
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod phase = %s, want Succeeded", pod.Status.Phase)
	}
	if code := exitCode(pod); code != 0 {
		t.Errorf("container exit code = %d, want 0", code)
	}
	node, err := cs.CoreV1().Nodes().Get(t.Context(), pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod's node: %v", err)
	}
	if node.Labels[testenv.NodeTypeLabel] != testenv.NodeTypeKWOK {
		t.Errorf("pod ran on %s, not on a fake node", node.Name)
	}
}

func TestJobFailsAfterBackoffLimit(t *testing.T) {
	t.Parallel()
	_, cs, ns := fullCluster(t)
	job := createJob(t, cs, ns, map[string]string{testenv.OutcomeLabel: testenv.OutcomeFail}, func(j *batchv1.Job) {
		j.Spec.BackoffLimit = new(int32(1))
	})

	cond := waitJobCondition(t, cs, job, batchv1.JobFailed)

	if cond.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Failed reason = %q, want %q", cond.Reason, batchv1.JobReasonBackoffLimitExceeded)
	}
	got, err := cs.BatchV1().Jobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Failed != 2 {
		t.Errorf("failed pods = %d, want 2 (backoffLimit 1)", got.Status.Failed)
	}
	for _, pod := range jobPods(t, cs, job) {
		if pod.Status.Phase != corev1.PodFailed || exitCode(pod) != 1 || pod.Status.ContainerStatuses[0].State.Terminated.Reason != "Error" {
			t.Errorf("pod %s: phase %s, containers %+v; want Failed with exit code 1, reason Error",
				pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
		}
	}
}

// A hanging pod runs until the Job's deadline; the Job controller then
// deletes it, which exercises the terminate and remove stages.
func TestHangingJobHitsDeadline(t *testing.T) {
	t.Parallel()
	_, cs, ns := fullCluster(t)
	job := createJob(t, cs, ns, map[string]string{testenv.OutcomeLabel: testenv.OutcomeHang}, func(j *batchv1.Job) {
		j.Spec.ActiveDeadlineSeconds = new(int64(3))
	})

	testenv.Eventually(t, waitTimeout, "the pod to be Running", func(ctx context.Context) (bool, error) {
		pods := jobPods(t, cs, job)
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, fmt.Errorf("pods: %v", podPhases(pods))
	})
	cond := waitJobCondition(t, cs, job, batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("Failed reason = %q, want %q", cond.Reason, batchv1.JobReasonDeadlineExceeded)
	}
	testenv.Eventually(t, waitTimeout, "the deleted pod to be gone", func(ctx context.Context) (bool, error) {
		pods := jobPods(t, cs, job)
		return len(pods) == 0, fmt.Errorf("pods: %v", podPhases(pods))
	})
}

// A deleted pod carrying a foreign finalizer is still removed.
func TestDeletedPodIsRemoved(t *testing.T) {
	t.Parallel()
	_, cs, ns := fullCluster(t)
	pod, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:       "sleeper",
			Labels:     map[string]string{testenv.OutcomeLabel: testenv.OutcomeHang},
			Finalizers: []string{"e2e.example.com/test"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/sleeper"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods(ns)
	testenv.Eventually(t, waitTimeout, "the pod to be Running", func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("phase %s", p.Status.Phase)
	})
	if err := pods.Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "the pod to be gone", func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return false, fmt.Errorf("phase %s, finalizers %v", p.Status.Phase, p.Finalizers)
	})
}

func TestGarbageCollection(t *testing.T) {
	t.Parallel()
	_, cs, ns := fullCluster(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(t.Context(), owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "the dependent to be garbage-collected", func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func createJob(t *testing.T, cs kubernetes.Interface, ns string, podLabels map[string]string, mutate func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.invalid/worker"}},
				},
			},
		},
	}
	if mutate != nil {
		mutate(job)
	}
	created, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return created
}

func waitJobCondition(t *testing.T, cs kubernetes.Interface, job *batchv1.Job, want batchv1.JobConditionType) batchv1.JobCondition {
	t.Helper()
	var found batchv1.JobCondition
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("job %s/%s %s", job.Namespace, job.Name, want), func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == want && c.Status == corev1.ConditionTrue {
				found = c
				return true, nil
			}
		}
		return false, fmt.Errorf("status %+v", j.Status)
	})
	return found
}

func jobPods(t *testing.T, cs kubernetes.Interface, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	sel := labels.Set{batchv1.ControllerUidLabel: string(job.UID)}.String()
	pods, err := cs.CoreV1().Pods(job.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return pods.Items
}

func onlyPod(t *testing.T, cs kubernetes.Interface, job *batchv1.Job) corev1.Pod {
	t.Helper()
	pods := jobPods(t, cs, job)
	if len(pods) != 1 {
		t.Fatalf("job has %d pods, want 1: %v", len(pods), podPhases(pods))
	}
	return pods[0]
}

func exitCode(pod corev1.Pod) int32 {
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		return -1
	}
	return pod.Status.ContainerStatuses[0].State.Terminated.ExitCode
}

func podPhases(pods []corev1.Pod) map[string]corev1.PodPhase {
	phases := map[string]corev1.PodPhase{}
	for _, p := range pods {
		phases[p.Name] = p.Status.Phase
	}
	return phases
}

// A restarted kube-controller-manager is a new process with the same controllers: a Job
// created after the restart completes.
func TestRestartedControllerManagerRunsJobsAgain(t *testing.T) {
	cp, cs, ns := fullCluster(t)
	before := cp.PIDs()[testenv.KubeControllerManager]
	if err := cp.RestartComponent(testenv.KubeControllerManager); err != nil {
		t.Fatal(err)
	}
	if after := cp.PIDs()[testenv.KubeControllerManager]; after == before || after == 0 {
		t.Fatalf("kube-controller-manager pid %d before the restart, %d after", before, after)
	}
	kept, err := filepath.Glob(filepath.Join(cp.LogDir, testenv.KubeControllerManager+".log.*"))
	if err != nil || len(kept) == 0 {
		t.Errorf("the log before the restart was not kept: %v %v", kept, err)
	}
	if err := cp.RestartComponent("kube-proxy"); err == nil {
		t.Error("restarting a component the control plane never started succeeded")
	}
	waitJobCondition(t, cs, createJob(t, cs, ns, nil, nil), batchv1.JobComplete)
	if err := cp.Alive(); err != nil {
		t.Fatal(err)
	}
}
