package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
)

// A Task written at v1alpha1 runs exactly like the same Task written at v1: same Job spec,
// same outcome, and kubectl wait works at either version.
func TestTaskAtV1alpha1RunsLikeV1(t *testing.T) {
	ns := setUp(t)
	mustKubectl(t, `apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: old}
spec: {type: shell, replicas: 2, shell: "echo same", maxRetry: 1}
`, "apply", "-n", ns, "-f", "-")
	mustKubectl(t, `apiVersion: example.com/v1
kind: Task
metadata: {name: new}
spec:
  runner: {type: Shell, shell: {script: "echo same"}}
  parallelism: 2
  retry: {maxRetries: 1}
`, "apply", "-n", ns, "-f", "-")

	for _, name := range []string{"old", "new"} {
		mustKubectl(t, "", "wait", "-n", ns, "--for=condition=Succeeded", "--timeout=90s", "task/"+name)
	}
	jobOf := func(task string) batchv1.Job {
		var jobs batchv1.JobList
		if err := kube.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{taskv1.LabelTaskName: task}); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 {
			t.Fatalf("task %s has %d Jobs, want 1", task, len(jobs.Items))
		}
		return jobs.Items[0]
	}
	oldJob, newJob := jobOf("old"), jobOf("new")
	ignoreIdentity := cmp.Options{
		cmpopts.IgnoreFields(corev1.PodTemplateSpec{}, "ObjectMeta"),
		cmpopts.IgnoreFields(batchv1.JobSpec{}, "Selector"),
	}
	if diff := cmp.Diff(oldJob.Spec, newJob.Spec, ignoreIdentity); diff != "" {
		t.Errorf("Job of the v1alpha1 Task differs from the v1 Task's (-v1alpha1 +v1):\n%s", diff)
	}
	if got := *oldJob.Spec.Parallelism; got != 2 {
		t.Errorf("parallelism %d, want 2 (from replicas)", got)
	}
	if cmd := strings.Join(oldJob.Spec.Template.Spec.Containers[0].Command, " ") + " " + strings.Join(oldJob.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(cmd, "echo same") {
		t.Errorf("container does not run the script: %q", cmd)
	}

	var oldHub, newHub taskv1.Task
	get(t, ns, "old", &oldHub)
	get(t, ns, "new", &newHub)
	if oldHub.Status.Phase != taskv1.PhaseSucceeded || newHub.Status.Phase != taskv1.PhaseSucceeded || oldHub.Status.Attempts != newHub.Status.Attempts {
		t.Errorf("status differs: v1alpha1-written %+v, v1-written %+v", oldHub.Status, newHub.Status)
	}
	var oldSpoke v1alpha1.Task
	get(t, ns, "old", &oldSpoke)
	if oldSpoke.Status.State != "Succeeded" || oldSpoke.Status.LastJobName != oldJob.Name || oldSpoke.Status.RetryCount != 0 {
		t.Errorf("v1alpha1 status: %+v", oldSpoke.Status)
	}
	// v1alpha1 has no conditions; its users wait on the state string.
	mustKubectl(t, "", "wait", "-n", ns, "--for=jsonpath={.status.state}=Succeeded", "--timeout=10s", "tasks.v1alpha1.example.com/old")

	events := mustKubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=old", "-o", "custom-columns=REASON:.reason", "--no-headers")
	if strings.TrimSpace(events) == "" {
		t.Error("no events recorded on the Task")
	}
}

// A failing Task retried at v1alpha1 counts retries there and attempts at v1.
func TestRetriesVisibleAtEveryVersion(t *testing.T) {
	ns := setUp(t)
	mustKubectl(t, `apiVersion: example.com/v1
kind: Task
metadata: {name: flaky, labels: {e2e.example.com/outcome: fail}}
spec:
  runner: {type: Shell, shell: {script: "exit 1"}}
  retry: {maxRetries: 1, backoff: {initial: 1s, max: 2s}}
`, "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "-n", ns, "--for=condition=Failed", "--timeout=120s", "task/flaky")
	var hub taskv1.Task
	get(t, ns, "flaky", &hub)
	var spoke v1alpha1.Task
	get(t, ns, "flaky", &spoke)
	if hub.Status.Attempts != 2 || spoke.Status.RetryCount != 1 || spoke.Status.State != "Failed" || hub.Status.LastError == "" {
		t.Errorf("v1 status %+v; v1alpha1 status %+v; want 2 attempts, 1 retry, Failed with an error", hub.Status, spoke.Status)
	}
	out := mustKubectl(t, "", "get", "tasks.v1alpha1.example.com", "flaky", "-n", ns, "--no-headers")
	if fields := strings.Fields(out); len(fields) < 4 || fields[2] != "Failed" || fields[3] != "1" {
		t.Errorf("kubectl get at v1alpha1: %q, want state Failed and 1 retry", out)
	}
}
