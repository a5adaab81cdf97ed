package reconciler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

func TestBuildJob(t *testing.T) {
	opts := Options{}.withDefaults()
	task := newTask(func(t *v1.Task) {
		t.Labels = map[string]string{"team": "a", "e2e.example.com/outcome": "fail", v1.LabelRun: "spoofed",
			// The Job controller's own pod labels: the API server refuses a pod template with them.
			"job-name": "x", "controller-uid": "u", "batch.kubernetes.io/job-name": "x"}
		t.Spec.Parallelism = 3
		t.Spec.Timeout = dur(1500 * time.Millisecond)
		t.Spec.TTLSecondsAfterFinished = ptr.To[int32](30)
	})
	job := buildJob(task, opts, runID{Attempt: 2})

	if job.Name != "t-0-2" || job.Namespace != "ns" {
		t.Errorf("name = %s/%s, want ns/t-0-2", job.Namespace, job.Name)
	}
	if diff := cmp.Diff([]string{v1.FinalizerRunOutcome}, job.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{
		"team": "a", "e2e.example.com/outcome": "fail",
		v1.LabelTaskName: "t", v1.LabelRun: "2", v1.LabelAttempt: "2",
	}
	if diff := cmp.Diff(wantLabels, job.Labels); diff != "" {
		t.Errorf("job labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, job.Spec.Template.Labels); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{v1.AnnotationTaskUID: "task-uid"}, job.Annotations); diff != "" {
		t.Errorf("one-shot run's annotations (-want +got):\n%s", diff)
	}
	owner := metav1.GetControllerOf(job)
	if owner == nil || owner.UID != "task-uid" || owner.Kind != "Task" || owner.APIVersion != "example.com/v1" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
		t.Errorf("controller reference = %+v", owner)
	}
	spec := job.Spec
	if *spec.Parallelism != 3 || *spec.Completions != 3 || *spec.BackoffLimit != 0 {
		t.Errorf("parallelism/completions/backoffLimit = %d/%d/%d, want 3/3/0", *spec.Parallelism, *spec.Completions, *spec.BackoffLimit)
	}
	if ptr.Deref(spec.ActiveDeadlineSeconds, 0) != 2 {
		t.Errorf("activeDeadlineSeconds = %v, want 2 (1.5s rounded up)", spec.ActiveDeadlineSeconds)
	}
	if ptr.Deref(spec.TTLSecondsAfterFinished, 0) != 30 {
		t.Errorf("ttlSecondsAfterFinished = %v, want 30", spec.TTLSecondsAfterFinished)
	}
	if spec.Suspend != nil {
		t.Errorf("a new Job is created suspended=%v", *spec.Suspend)
	}
	// Evictions and preemptions do not fail the attempt; any other pod failure does, and one
	// whose container exited non-zero fails it by a rule, so the Job names the exit code.
	wantPolicy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}, {
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("task"), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0},
		},
	}}}
	if diff := cmp.Diff(wantPolicy, spec.PodFailurePolicy); diff != "" {
		t.Errorf("podFailurePolicy (-want +got):\n%s", diff)
	}
	pod := spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %s", pod.RestartPolicy)
	}
	if ptr.Deref(pod.AutomountServiceAccountToken, true) {
		t.Error("service account token is mounted")
	}
	psc := pod.SecurityContext
	if !ptr.Deref(psc.RunAsNonRoot, false) || ptr.Deref(psc.RunAsUser, 0) != 65532 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(pod.Containers))
	}
	csc := pod.Containers[0].SecurityContext
	if ptr.Deref(csc.AllowPrivilegeEscalation, true) || !ptr.Deref(csc.ReadOnlyRootFilesystem, false) ||
		!equality.Semantic.DeepEqual(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context = %+v", csc)
	}
	if got := buildJob(task, opts, runID{Attempt: 2}); !equality.Semantic.DeepEqual(got, job) {
		t.Error("buildJob is not deterministic")
	}
}

func TestBuildJobScheduled(t *testing.T) {
	task := newTask(scheduled(v1.ForbidConcurrent))
	job := buildJob(task, Options{}.withDefaults(), runID{Scheduled: at(60), Attempt: 2})
	if job.Name != "t-1767225660-2" || job.Finalizers[0] != v1.FinalizerRunOutcome {
		t.Errorf("name = %s", job.Name)
	}
	if job.Labels[v1.LabelRun] != "1767225660" || job.Labels[v1.LabelAttempt] != "2" {
		t.Errorf("labels = %v", job.Labels)
	}
	if got := job.Annotations[v1.AnnotationScheduledTime]; got != "2026-01-01T00:01:00Z" {
		t.Errorf("scheduled-time annotation = %q", got)
	}
	// The Job reads back as the run it was built for.
	if got := observeJob(task.Name, job).Run; !got.Scheduled.Equal(at(60)) || got.Attempt != 2 {
		t.Errorf("observeJob(buildJob(run)).Run = %+v", got)
	}
}

func TestBuildJobRunners(t *testing.T) {
	opts := Options{ShellImage: "shell:1", RunnerImage: "op:2"}.withDefaults()
	tests := []struct {
		name    string
		runner  v1.Runner
		image   string
		command []string
		args    []string
		env     []corev1.EnvVar
	}{
		{
			name:    "shell with the default image",
			runner:  v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "echo hi; exit 3"}},
			image:   "shell:1",
			command: []string{"sh", "-c", "echo hi; exit 3"},
		},
		{
			name: "shell with its own image and env",
			runner: v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "env", Image: "alpine:3",
				Env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}}}},
			image:   "alpine:3",
			command: []string{"sh", "-c", "env"},
			env:     []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}},
		},
		{
			name:   "http minimal",
			runner: v1.Runner{Type: v1.RunnerHTTP, HTTP: &v1.HTTPRunner{URL: "https://example.com/x"}},
			image:  "op:2",
			args:   []string{"http", "--url=https://example.com/x"},
		},
		{
			name: "http full",
			runner: v1.Runner{Type: v1.RunnerHTTP, HTTP: &v1.HTTPRunner{
				URL: "http://svc/hook", Method: "POST", Body: `{"a": 1}`,
				Headers:             []v1.HTTPHeader{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Empty"}},
				Timeout:             dur(90 * time.Second),
				AcceptedStatusCodes: []int32{200, 204},
			}},
			image: "op:2",
			args: []string{"http", "--url=http://svc/hook", "--method=POST", "--header=Content-Type:application/json",
				"--header=X-Empty:", `--body={"a": 1}`, "--timeout=1m30s", "--accept=200,204"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(func(t *v1.Task) { t.Spec.Runner = tc.runner })
			c := buildJob(task, opts, runID{Attempt: 1}).Spec.Template.Spec.Containers[0]
			if c.Image != tc.image {
				t.Errorf("image = %q, want %q", c.Image, tc.image)
			}
			if diff := cmp.Diff(tc.command, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.args, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.env, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildJobDefaults(t *testing.T) {
	task := newTask(func(t *v1.Task) { t.Spec.Parallelism = 0 })
	job := buildJob(task, Options{}.withDefaults(), runID{Attempt: 1})
	if *job.Spec.Parallelism != 1 || *job.Spec.Completions != 1 {
		t.Errorf("parallelism 0 gave %d/%d, want 1/1", *job.Spec.Parallelism, *job.Spec.Completions)
	}
	if job.Spec.ActiveDeadlineSeconds != nil || job.Spec.TTLSecondsAfterFinished != nil {
		t.Error("deadline or TTL set without a spec for them")
	}
	if img := job.Spec.Template.Spec.Containers[0].Image; img != DefaultShellImage {
		t.Errorf("image = %q, want %q", img, DefaultShellImage)
	}
}
