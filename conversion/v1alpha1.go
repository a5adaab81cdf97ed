package conversion

import (
	"context"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
)

// v1alpha1 was flat: a type string, a script or a URL, replicas and maxRetry. Everything v1
// added travels in the preserved annotation.

var v1alpha1Types = []struct {
	spoke v1alpha1.TaskType
	hub   taskv1.RunnerType
}{
	{"shell", taskv1.RunnerShell},
	{"http", taskv1.RunnerHTTP},
}

// ConvertV1alpha1ToV1 converts a v1alpha1 Task up to the hub.
func ConvertV1alpha1ToV1(_ context.Context, src *v1alpha1.Task, dst *taskv1.Task) error {
	v1alpha1ToV1(src, dst)
	if err := restore(dst); err != nil {
		return err
	}
	// The spoke decides which runner exists: preserved fields of a runner it dropped are stale.
	if src.Spec.Shell == "" {
		dst.Spec.Runner.Shell = nil
	}
	if src.Spec.URL == "" {
		dst.Spec.Runner.HTTP = nil
	}
	return nil
}

// ConvertV1ToV1alpha1 converts the hub down to v1alpha1. It never fails for a valid hub:
// what v1alpha1 cannot say is preserved in an annotation.
func ConvertV1ToV1alpha1(_ context.Context, src *taskv1.Task, dst *v1alpha1.Task) error {
	return convertDown(src, dst, v1ToV1alpha1, v1alpha1ToV1)
}

func v1alpha1ToV1(src *v1alpha1.Task, dst *taskv1.Task) {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec = taskv1.TaskSpec{
		Runner:      taskv1.Runner{Type: taskv1.RunnerType(src.Spec.Type)},
		Parallelism: src.Spec.Replicas,
		Retry:       &taskv1.RetryPolicy{MaxRetries: src.Spec.MaxRetry, Backoff: taskv1.DefaultBackoff()},
	}
	for _, t := range v1alpha1Types {
		if src.Spec.Type == t.spoke {
			dst.Spec.Runner.Type = t.hub
		}
	}
	if src.Spec.Shell != "" {
		dst.Spec.Runner.Shell = &taskv1.ShellRunner{Script: src.Spec.Shell}
	}
	if src.Spec.URL != "" {
		dst.Spec.Runner.HTTP = &taskv1.HTTPRunner{URL: src.Spec.URL, Method: "GET"}
	}

	st := src.Status
	dst.Status = taskv1.TaskStatus{
		Phase:                   taskv1.Phase(st.State),
		LastError:               st.LastError,
		LastPhaseTransitionTime: st.LastUpdateTime.DeepCopy(),
	}
	if st.LastJobName != "" {
		dst.Status.LastJob = &taskv1.JobReference{Name: st.LastJobName}
	}
	// retryCount counts retries; attempts counts runs, the first one included.
	if st.RetryCount > 0 || st.LastJobName != "" {
		dst.Status.Attempts = st.RetryCount + 1
	}
}

func v1ToV1alpha1(src *taskv1.Task, dst *v1alpha1.Task) {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	spec := src.Spec
	dst.Spec = v1alpha1.TaskSpec{
		Type:     v1alpha1.TaskType(spec.Runner.Type),
		Replicas: spec.Parallelism,
	}
	for _, t := range v1alpha1Types {
		if spec.Runner.Type == t.hub {
			dst.Spec.Type = t.spoke
		}
	}
	if spec.Runner.Shell != nil {
		dst.Spec.Shell = spec.Runner.Shell.Script
	}
	if spec.Runner.HTTP != nil {
		dst.Spec.URL = spec.Runner.HTTP.URL
	}
	if spec.Retry != nil {
		dst.Spec.MaxRetry = spec.Retry.MaxRetries
	}

	st := src.Status
	dst.Status = v1alpha1.TaskStatus{
		State:          string(st.Phase),
		LastError:      st.LastError,
		LastUpdateTime: st.LastPhaseTransitionTime.DeepCopy(),
	}
	if st.LastJob != nil {
		dst.Status.LastJobName = st.LastJob.Name
	}
	if st.Attempts > 1 {
		dst.Status.RetryCount = st.Attempts - 1
	}
}
