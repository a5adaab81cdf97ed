package conversion

import (
	"context"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1beta1"
)

// v1beta1 already has the runner union and parallelism; it lacks environment variables, the
// HTTP body, timeout and accepted codes, the retry backoff, everything of a schedule but the
// cron expression, run timeouts and history limits, and most of the status.

// ConvertV1beta1ToV1 converts a v1beta1 Task up to the hub.
func ConvertV1beta1ToV1(_ context.Context, src *v1beta1.Task, dst *taskv1.Task) error {
	v1beta1ToV1(src, dst)
	if err := restore(dst); err != nil {
		return err
	}
	// What the spoke removed stays removed, whatever the preserved fields still say about it.
	if src.Spec.Runner.Shell == nil {
		dst.Spec.Runner.Shell = nil
	}
	if src.Spec.Runner.HTTP == nil {
		dst.Spec.Runner.HTTP = nil
	}
	if src.Spec.Schedule == "" {
		dst.Spec.Schedule = nil
	}
	return nil
}

// ConvertV1ToV1beta1 converts the hub down to v1beta1, preserving what v1beta1 cannot say.
func ConvertV1ToV1beta1(_ context.Context, src *taskv1.Task, dst *v1beta1.Task) error {
	return convertDown(src, dst, v1ToV1beta1, v1beta1ToV1)
}

func v1beta1ToV1(src *v1beta1.Task, dst *taskv1.Task) {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	spec := src.Spec
	dst.Spec = taskv1.TaskSpec{
		Runner:      taskv1.Runner{Type: taskv1.RunnerType(spec.Runner.Type)},
		Parallelism: spec.Parallelism,
		Retry:       &taskv1.RetryPolicy{MaxRetries: spec.MaxRetries, Backoff: taskv1.DefaultBackoff()},
		Suspend:     spec.Suspend,
	}
	if s := spec.Runner.Shell; s != nil {
		dst.Spec.Runner.Shell = &taskv1.ShellRunner{Script: s.Script, Image: s.Image}
	}
	if h := spec.Runner.HTTP; h != nil {
		dst.Spec.Runner.HTTP = &taskv1.HTTPRunner{URL: h.URL, Method: h.Method}
		for _, header := range h.Headers {
			dst.Spec.Runner.HTTP.Headers = append(dst.Spec.Runner.HTTP.Headers, taskv1.HTTPHeader(header))
		}
	}
	if spec.Schedule != "" {
		dst.Spec.Schedule = &taskv1.Schedule{Cron: spec.Schedule, ConcurrencyPolicy: taskv1.AllowConcurrent}
	}

	st := src.Status
	dst.Status = taskv1.TaskStatus{
		ObservedGeneration: st.ObservedGeneration,
		Phase:              taskv1.Phase(st.Phase),
		Conditions:         copyConditions(st.Conditions),
		Attempts:           st.Attempts,
		LastError:          st.LastError,
		StartTime:          st.StartTime.DeepCopy(),
		CompletionTime:     st.CompletionTime.DeepCopy(),
	}
	if st.LastJobName != "" {
		dst.Status.LastJob = &taskv1.JobReference{Name: st.LastJobName}
	}
}

func v1ToV1beta1(src *taskv1.Task, dst *v1beta1.Task) {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	spec := src.Spec
	dst.Spec = v1beta1.TaskSpec{
		Runner:      v1beta1.Runner{Type: v1beta1.RunnerType(spec.Runner.Type)},
		Parallelism: spec.Parallelism,
		Suspend:     spec.Suspend,
	}
	if s := spec.Runner.Shell; s != nil {
		dst.Spec.Runner.Shell = &v1beta1.ShellRunner{Script: s.Script, Image: s.Image}
	}
	if h := spec.Runner.HTTP; h != nil {
		dst.Spec.Runner.HTTP = &v1beta1.HTTPRunner{URL: h.URL, Method: h.Method}
		for _, header := range h.Headers {
			dst.Spec.Runner.HTTP.Headers = append(dst.Spec.Runner.HTTP.Headers, v1beta1.HTTPHeader(header))
		}
	}
	if spec.Retry != nil {
		dst.Spec.MaxRetries = spec.Retry.MaxRetries
	}
	if spec.Schedule != nil {
		dst.Spec.Schedule = spec.Schedule.Cron
	}

	st := src.Status
	dst.Status = v1beta1.TaskStatus{
		ObservedGeneration: st.ObservedGeneration,
		Phase:              string(st.Phase),
		Conditions:         copyConditions(st.Conditions),
		Attempts:           st.Attempts,
		LastError:          st.LastError,
		StartTime:          st.StartTime.DeepCopy(),
		CompletionTime:     st.CompletionTime.DeepCopy(),
	}
	if st.LastJob != nil {
		dst.Status.LastJobName = st.LastJob.Name
	}
}
