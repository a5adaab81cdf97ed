package conversion

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
)

// simpleHub is a Task as most are: a script and the defaults.
func simpleHub() *taskv1.Task {
	task := &taskv1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "simple", Namespace: "ns", UID: "8c2b7a3e-1d3f-4f63-9a4c-0d2cf4d5b6a7", ResourceVersion: "123", Generation: 1},
		Spec:       taskv1.TaskSpec{Runner: taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "echo hello"}}},
	}
	taskv1.SetDefaults(task)
	return task
}

// richHub uses every v1-only field, with a script far larger than anything worth copying.
func richHub(script string) *taskv1.Task {
	deadline := int64(30)
	ttl, keep := int32(60), int32(2)
	task := &taskv1.Task{
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
	return task
}

func BenchmarkConvert(b *testing.B) {
	for _, tc := range []struct {
		name string
		hub  *taskv1.Task
	}{
		{"simple", simpleHub()},
		{"rich", richHub(strings.Repeat("echo step; ", 100))},
	} {
		hub := hubObject(b, tc.hub)
		data, _ := json.Marshal(hub)
		b.Run(tc.name+"/v1-to-v1alpha1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _ := decodeJSON(data)
				if _, err := Convert(obj, v1alpha1.GroupVersion.Version); err != nil {
					b.Fatal(err)
				}
			}
		})
		spoke := mustConvert(b, hub, v1alpha1.GroupVersion.Version)
		spokeData, _ := json.Marshal(spoke)
		b.Run(tc.name+"/v1alpha1-to-v1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _ := decodeJSON(spokeData)
				if _, err := Convert(obj, hubVersion); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
