package conversion

import (
	"math"

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
	defaults: map[string]any{"spec.replicas": int64(1), "spec.maxRetry": int64(0)},
}).withTemplate(v1alpha1InBytes)

// v1alpha1Fields is the v1 fields each v1alpha1 field is converted to by v1alpha1ToV1 (see
// FieldMapping): what server-side apply ownership recorded at v1alpha1 means at v1.
var v1alpha1Fields = []FieldMapping{
	{Spoke: "spec.type", Hub: []string{"spec.runner.type"}},
	{Spoke: "spec.replicas", Hub: []string{"spec.parallelism"}},
	{Spoke: "spec.shell", Hub: []string{"spec.runner.shell.script"}},
	{Spoke: "spec.url", Hub: []string{"spec.runner.http.url"}},
	{Spoke: "spec.maxRetry", Hub: []string{"spec.retry.maxRetries"}},
	{Spoke: "status.state", Hub: []string{"status.phase"}},
	// A last Job means at least one run: attempts is filled from either field.
	{Spoke: "status.lastJobName", Hub: []string{"status.lastJob.name", "status.attempts"}},
	{Spoke: "status.retryCount", Hub: []string{"status.attempts"}},
	{Spoke: "status.lastError", Hub: []string{"status.lastError"}},
	{Spoke: "status.lastUpdateTime", Hub: []string{"status.lastPhaseTransitionTime"}},
}

var v1alpha1Types = []struct {
	spoke v1alpha1.TaskType
	hub   taskv1.RunnerType
}{
	{"shell", taskv1.RunnerShell},
	{"http", taskv1.RunnerHTTP},
}

// v1alpha1ToV1 says at v1 what a v1alpha1 object says, and nothing more: no defaults, no hidden
// fields.
func v1alpha1ToV1(src *v1alpha1.Task, dst *taskv1.Task) error {
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
	// retryCount counts retries; attempts counts runs, the first one included. A count out of
	// the schema's range (an earlier release took any) goes across and back unchanged, so that
	// a write of it meets the schema's bounds, which see the object converted back, and a
	// stored one still reads: a negative one as itself, 2147483647 by int32 wrapping to
	// -2147483648 (which, as a negative count, is the one value that does not come back).
	switch r := st.RetryCount; {
	case r < 0:
		dst.Status.Attempts = r
	case r > 0 || st.LastJobName != "":
		dst.Status.Attempts = r + 1
	}
	return nil
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
		LastUpdateTime: settableTime(st.LastPhaseTransitionTime),
	}
	if st.LastJob != nil {
		dst.Status.LastJobName = st.LastJob.Name
	}
	switch a := st.Attempts; {
	case a == math.MinInt32:
		dst.Status.RetryCount = math.MaxInt32
	case a < 0:
		dst.Status.RetryCount = a
	case a > 1:
		dst.Status.RetryCount = a - 1
	}
}
