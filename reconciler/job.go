package reconciler

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

const (
	// containerName is the one container of a run's pod.
	containerName = "task"
	// nonRootUID is the user and group runs execute as (the distroless "nonroot" user).
	nonRootUID int64 = 65532
	// tmpVolume is an emptyDir at /tmp so scripts can write there with a read-only root.
	tmpVolume = "tmp"
)

// buildJob returns the Job for one run of task. It is a pure function of its inputs, so the same
// run always yields the same Job (and the same name).
func buildJob(task *v1.Task, opts Options, run runID) *batchv1.Job {
	labels := jobLabels(task, run)
	parallelism := parallelismOf(task)
	objLabels := maps.Clone(labels)
	queueLabels(task, objLabels)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(task.Name, run),
			Namespace:       task.Namespace,
			Labels:          objLabels,
			Annotations:     jobAnnotations(task, run),
			OwnerReferences: []metav1.OwnerReference{ownerRef(task)},
			// Held until the Task's status records how this attempt ended.
			Finalizers: []string{v1.FinalizerRunOutcome},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism),
			Completions: ptr.To(parallelism),
			// Retries are the Task's: each is a new Job, spaced by the Task's backoff. So with
			// completions = parallelism, one failed pod fails the run.
			BackoffLimit:            ptr.To[int32](0),
			PodFailurePolicy:        ignoreDisruptions(),
			ActiveDeadlineSeconds:   deadlineSeconds(task.Spec.Timeout),
			TTLSecondsAfterFinished: task.Spec.TTLSecondsAfterFinished,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec:       podSpec(task, opts),
			},
		},
	}
	if task.Spec.QueueName != "" {
		// Kueue unsuspends it once admitted.
		job.Spec.Suspend = ptr.To(true)
	}
	return job
}

// jobLabels are the Task's own labels (tests and users steer pods with them) plus the
// controller's, which win on a clash. Kueue's labels are not copied: spec.queueName and
// spec.priorityClassName alone decide whether and where a run queues (queueLabels). Nor are
// the Job controller's own pod labels (v1.ReservedPodLabel): the API server would refuse every
// Job of a Task stored with one.
func jobLabels(task *v1.Task, run runID) map[string]string {
	labels := make(map[string]string, len(task.Labels)+3)
	for k, v := range task.Labels {
		if !strings.HasPrefix(k, kueueLabelPrefix) && !v1.ReservedPodLabel(k) {
			labels[k] = v
		}
	}
	labels[v1.LabelTaskName] = labelValue(task.Name)
	labels[v1.LabelRun] = run.runLabel()
	labels[v1.LabelAttempt] = strconv.Itoa(int(run.Attempt))
	return labels
}

// jobAnnotations say which Task incarnation the Job runs for (it outlives a removed
// ownerReference), the Task's name where its label cannot hold it whole, and, for a scheduled
// run, its schedule time.
func jobAnnotations(task *v1.Task, run runID) map[string]string {
	annotations := map[string]string{v1.AnnotationTaskUID: string(task.UID)}
	if labelValue(task.Name) != task.Name {
		annotations[v1.AnnotationTaskName] = task.Name
	}
	if run.isScheduled() {
		annotations[v1.AnnotationScheduledTime] = run.Scheduled.UTC().Format(time.RFC3339)
	}
	return annotations
}

// ignoreDisruptions is the Job's pod failure policy: a pod that failed because it was evicted,
// preempted or its node went away (the DisruptionTarget condition) is replaced by the Job
// controller and does not count against backoffLimit, so a disruption never costs the Task a
// retry. Any other failed pod fails the Job, and with it the attempt.
//
// The second rule changes no outcome (backoffLimit is 0, so such a pod fails the Job anyway)
// but what the Job says about it: matched by FailJob, the Failed condition has reason
// PodFailurePolicy and a message naming the container, the pod and its exit code, where
// backoffLimit would only say BackoffLimitExceeded. status.lastError copies that message. A pod
// that failed without a terminated container (deleted before it started) matches no rule and
// still reads BackoffLimitExceeded; an attempt past spec.timeout reads DeadlineExceeded, which
// the Job controller decides before it kills the pods.
func ignoreDisruptions() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
			Type:   corev1.DisruptionTarget,
			Status: corev1.ConditionTrue,
		}},
	}, {
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(containerName),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpNotIn,
			Values:        []int32{0},
		},
	}}}
}

func ownerRef(task *v1.Task) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1.GroupVersion.String(),
		Kind:               "Task",
		Name:               task.Name,
		UID:                task.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func parallelismOf(task *v1.Task) int32 {
	if task.Spec.Parallelism < 1 {
		return 1
	}
	return task.Spec.Parallelism
}

// deadlineSeconds rounds a timeout up to whole seconds (at least 1); nil means no deadline.
func deadlineSeconds(timeout *metav1.Duration) *int64 {
	if timeout == nil || timeout.Duration <= 0 {
		return nil
	}
	return ptr.To(max(1, int64(math.Ceil(timeout.Seconds()))))
}

func podSpec(task *v1.Task, opts Options) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// Runs talk to their own targets, never to the Kubernetes API.
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(nonRootUID),
			RunAsGroup:     ptr.To(nonRootUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{runnerContainer(task, opts)},
		Volumes: []corev1.Volume{{
			Name:         tmpVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		}},
	}
}

// runnerContainer is the container for the Task's runner, with a restricted security context.
func runnerContainer(task *v1.Task, opts Options) corev1.Container {
	c := corev1.Container{
		Name: containerName,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: tmpVolume, MountPath: "/tmp"}},
		Resources:                resourcesOf(task),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
	r := task.Spec.Runner
	switch {
	case r.Type == v1.RunnerShell && r.Shell != nil:
		c.Image = r.Shell.Image
		if c.Image == "" {
			c.Image = opts.ShellImage
		}
		c.Command = []string{"sh", "-c", r.Shell.Script}
		c.Env = envVars(r.Shell.Env)
	case r.Type == v1.RunnerHTTP && r.HTTP != nil:
		c.Image = opts.RunnerImage
		c.Args = httpArgs(r.HTTP)
	}
	return c
}

// resourcesOf is the container's requests and limits: spec.resources, without resource claims.
func resourcesOf(task *v1.Task) corev1.ResourceRequirements {
	r := task.Spec.Resources
	if r == nil {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: r.Limits.DeepCopy(), Requests: r.Requests.DeepCopy()}
}

func envVars(in []v1.EnvVar) []corev1.EnvVar {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, 0, len(in))
	for _, e := range in {
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return out
}

// httpArgs are the arguments of the operator image's http subcommand (package runner/http);
// empty settings are left out so the runner's defaults apply.
func httpArgs(h *v1.HTTPRunner) []string {
	args := []string{"http", "--url=" + h.URL}
	if h.Method != "" {
		args = append(args, "--method="+h.Method)
	}
	for _, hd := range h.Headers {
		args = append(args, fmt.Sprintf("--header=%s:%s", hd.Name, hd.Value))
	}
	if h.Body != "" {
		args = append(args, "--body="+h.Body)
	}
	if h.Timeout != nil && h.Timeout.Duration > 0 {
		args = append(args, "--timeout="+h.Timeout.Duration.String())
	}
	if len(h.AcceptedStatusCodes) > 0 {
		codes := make([]string, 0, len(h.AcceptedStatusCodes))
		for _, c := range h.AcceptedStatusCodes {
			codes = append(codes, strconv.Itoa(int(c)))
		}
		args = append(args, "--accept="+strings.Join(codes, ","))
	}
	return args
}
