package conversion

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1beta1"
)

// v1beta1 already has the runner union and parallelism; it lacks environment variables, the
// HTTP body, timeout and accepted codes, the retry backoff, everything of a schedule but the
// cron expression, run timeouts and history limits, and most of the status.

var v1beta1Spoke = newSpoke(v1beta1.GroupVersion.Version, v1ToV1beta1, v1beta1ToV1, spokeRules{
	// A schedule removed at v1beta1 takes its time zone and policy with it.
	containers: []path{"spec.runner.shell", "spec.runner.http", "spec.schedule", "status.lastJob"},
	owners: []owner{
		// The body, timeout and accepted codes were meant for the URL they were written with.
		{value: "spec.runner.http.url", owns: "spec.runner.http"},
		{value: "status.lastJob.name", owns: "status.lastJob"},
	},
	defaults: map[string]any{"spec.parallelism": int64(1), "spec.maxRetries": int64(3), "spec.runner.http.method": "GET"},
})

// v1beta1Fields is the v1 fields each v1beta1 field is converted to by v1beta1ToV1 (see
// FieldMapping): what server-side apply ownership recorded at v1beta1 means at v1.
var v1beta1Fields = []FieldMapping{
	{Spoke: "spec.runner.type", Hub: []string{"spec.runner.type"}},
	{Spoke: "spec.runner.shell.script", Hub: []string{"spec.runner.shell.script"}},
	{Spoke: "spec.runner.shell.image", Hub: []string{"spec.runner.shell.image"}},
	{Spoke: "spec.runner.http.url", Hub: []string{"spec.runner.http.url"}},
	{Spoke: "spec.runner.http.method", Hub: []string{"spec.runner.http.method"}},
	// A list keyed by name at both versions, of the same name and value fields.
	{Spoke: "spec.runner.http.headers", Hub: []string{"spec.runner.http.headers"}, Same: true},
	{Spoke: "spec.parallelism", Hub: []string{"spec.parallelism"}},
	{Spoke: "spec.maxRetries", Hub: []string{"spec.retry.maxRetries"}},
	// The same name, but a string at v1beta1 and an object at v1.
	{Spoke: "spec.schedule", Hub: []string{"spec.schedule.cron"}},
	{Spoke: "spec.suspend", Hub: []string{"spec.suspend"}},
	{Spoke: "status.observedGeneration", Hub: []string{"status.observedGeneration"}},
	{Spoke: "status.phase", Hub: []string{"status.phase"}},
	{Spoke: "status.conditions", Hub: []string{"status.conditions"}, Same: true},
	{Spoke: "status.attempts", Hub: []string{"status.attempts"}},
	{Spoke: "status.lastJobName", Hub: []string{"status.lastJob.name"}},
	{Spoke: "status.lastError", Hub: []string{"status.lastError"}},
	{Spoke: "status.startTime", Hub: []string{"status.startTime"}},
	{Spoke: "status.completionTime", Hub: []string{"status.completionTime"}},
}

// v1beta1ToV1 says at v1 what a v1beta1 object says, and nothing more.
func v1beta1ToV1(src *v1beta1.Task, dst *taskv1.Task) error {
	spec := src.Spec
	dst.Spec = taskv1.TaskSpec{
		Runner:      taskv1.Runner{Type: taskv1.RunnerType(spec.Runner.Type)},
		Parallelism: spec.Parallelism,
		Retry:       &taskv1.RetryPolicy{MaxRetries: spec.MaxRetries},
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
		dst.Spec.Schedule = &taskv1.Schedule{Cron: spec.Schedule}
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
	return nil
}

func v1ToV1beta1(src *taskv1.Task, dst *v1beta1.Task) {
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
		Conditions:         settableConditions(st.Conditions),
		Attempts:           st.Attempts,
		LastError:          st.LastError,
		StartTime:          settableTime(st.StartTime),
		CompletionTime:     settableTime(st.CompletionTime),
	}
	if st.LastJob != nil {
		dst.Status.LastJobName = st.LastJob.Name
	}
}

// settableTime is t as an old version's object can carry it. Go writes a metav1.Time of the
// zero instant (0001-01-01T00:00:00Z, which v1's schema takes) as null, which the apiserver
// prunes, and one within its first second as the zero instant, which reads back as unset: the
// old version leaves such a time out, and the preserved annotation keeps it for v1.
func settableTime(t *metav1.Time) *metav1.Time {
	if t == nil || readsAsUnset(t.Time) {
		return nil
	}
	return t.DeepCopy()
}

// readsAsUnset says Go writes t (to the second) as a time it reads back as unset.
func readsAsUnset(t time.Time) bool {
	return t.UTC().Truncate(time.Second).IsZero()
}

// settableConditions are the conditions v1beta1 can carry: one whose lastTransitionTime reads
// as unset (readsAsUnset) would show it as null in a field v1beta1 requires, and every status
// write there would be refused. Such a condition is left out, and the preserved annotation
// keeps it for v1.
func settableConditions(in []metav1.Condition) []metav1.Condition {
	out := copyConditions(in)
	return slices.DeleteFunc(out, func(c metav1.Condition) bool { return readsAsUnset(c.LastTransitionTime.Time) })
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
