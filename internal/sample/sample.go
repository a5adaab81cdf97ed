// Package sample holds the Tasks every suite converts, admits and runs, so that the converter,
// the webhook handlers and their benchmarks are tested on the same objects.
package sample

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

// SimpleTask is a Task as most are: a script and the defaults.
func SimpleTask() *taskv1.Task {
	task := &taskv1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "simple", Namespace: "ns", UID: "8c2b7a3e-1d3f-4f63-9a4c-0d2cf4d5b6a7", ResourceVersion: "123", Generation: 1},
		Spec:       taskv1.TaskSpec{Runner: taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "echo hello"}}},
	}
	taskv1.SetDefaults(task)
	return task
}

// RichTask uses every v1-only field of a shell Task, with the given script (a large one
// measures what copying costs).
func RichTask(script string) *taskv1.Task {
	deadline := int64(30)
	ttl, keep := int32(60), int32(2)
	return &taskv1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "rich", Namespace: "ns", Annotations: map[string]string{"team": "a"}},
		Spec: taskv1.TaskSpec{
			Runner: taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{
				Script: script, Image: "alpine:3", Env: []taskv1.EnvVar{{Name: "MODE", Value: "full"}},
			}},
			Parallelism: 2,
			Retry: &taskv1.RetryPolicy{MaxRetries: 5, Backoff: &taskv1.Backoff{
				Initial: &metav1.Duration{Duration: time.Second}, Factor: 3, Max: &metav1.Duration{Duration: time.Minute},
			}},
			Schedule:                   &taskv1.Schedule{Cron: "0 2 * * *", TimeZone: "Europe/Paris", ConcurrencyPolicy: taskv1.ForbidConcurrent, StartingDeadlineSeconds: &deadline},
			Timeout:                    &metav1.Duration{Duration: 30 * time.Minute},
			TTLSecondsAfterFinished:    &ttl,
			SuccessfulJobsHistoryLimit: &keep,
			FailedJobsHistoryLimit:     &keep,
		},
		Status: taskv1.TaskStatus{
			Phase: taskv1.PhaseScheduled, Attempts: 1, MissedRuns: 2,
			LastJob:    &taskv1.JobReference{Name: "rich-1", UID: "u-1"},
			ActiveJobs: []taskv1.JobReference{{Name: "rich-2", UID: "u-2"}},
			Conditions: []metav1.Condition{{Type: taskv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: metav1.Now()}},
		},
	}
}

// HTTPTask is RichTask with an HTTP runner that uses every v1-only field of it.
func HTTPTask() *taskv1.Task {
	task := RichTask("unused")
	task.Spec.Runner = taskv1.Runner{Type: taskv1.RunnerHTTP, HTTP: &taskv1.HTTPRunner{
		URL: "https://hooks.internal/rebuild", Method: "POST",
		Headers:             []taskv1.HTTPHeader{{Name: "Authorization", Value: "Bearer secret"}},
		Body:                `{"full": true}`,
		Timeout:             &metav1.Duration{Duration: 5 * time.Second},
		AcceptedStatusCodes: []int32{202},
	}}
	return task
}
