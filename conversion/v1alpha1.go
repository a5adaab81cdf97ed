package conversion

import (
	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
)

// v1alpha1 was flat: a type string, a script or a URL, replicas and maxRetry, and a status of a
// state, a retry count and the last Job's name. Everything v1 added is hidden from it.

var v1alpha1Spoke = newSpoke(v1alpha1.GroupVersion.Version, v1ToV1alpha1, v1alpha1ToV1, spokeRules{
	// The runner a v1alpha1 object names is the one that exists; a hidden field of the other
	// one is stale.
	containers: []path{"spec.runner.shell", "spec.runner.http", "status.lastJob"},
	owners: []owner{
		// The method, headers, body, timeout and accepted codes were meant for the URL they
		// were written with; a new URL starts from the defaults.
		{value: "spec.runner.http.url", owns: "spec.runner.http"},
		// The UID belongs to the Job it was read from.
		{value: "status.lastJob.name", owns: "status.lastJob"},
	},
})

var v1alpha1Types = []struct {
	spoke v1alpha1.TaskType
	hub   taskv1.RunnerType
}{
	{"shell", taskv1.RunnerShell},
	{"http", taskv1.RunnerHTTP},
}

// v1alpha1ToV1 says at v1 what a v1alpha1 object says, and nothing more: no defaults, no hidden
// fields.
func v1alpha1ToV1(src *v1alpha1.Task, dst *taskv1.Task) {
	dst.Spec = taskv1.TaskSpec{
		Runner:      taskv1.Runner{Type: taskv1.RunnerType(src.Spec.Type)},
		Parallelism: src.Spec.Replicas,
		Retry:       &taskv1.RetryPolicy{MaxRetries: src.Spec.MaxRetry},
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
		dst.Spec.Runner.HTTP = &taskv1.HTTPRunner{URL: src.Spec.URL}
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
