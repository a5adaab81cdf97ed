package conversion

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

var (
	t0       = metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	backoffs = taskv1.DefaultBackoff()
)

func TestV1alpha1FieldMapping(t *testing.T) {
	tests := []struct {
		name  string
		spoke v1alpha1.Task
		hub   taskv1.Task
	}{{
		name:  "shell: replicas is parallelism, maxRetry is retry.maxRetries",
		spoke: v1alpha1.Task{Spec: v1alpha1.TaskSpec{Type: "shell", Replicas: 3, Shell: "echo hi", MaxRetry: 2}},
		hub: taskv1.Task{Spec: taskv1.TaskSpec{
			Runner:      taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "echo hi"}},
			Parallelism: 3,
			Retry:       &taskv1.RetryPolicy{MaxRetries: 2, Backoff: backoffs},
		}},
	}, {
		name:  "http: url is a GET",
		spoke: v1alpha1.Task{Spec: v1alpha1.TaskSpec{Type: "http", Replicas: 1, URL: "https://example.com/ping"}},
		hub: taskv1.Task{Spec: taskv1.TaskSpec{
			Runner:      taskv1.Runner{Type: taskv1.RunnerHTTP, HTTP: &taskv1.HTTPRunner{URL: "https://example.com/ping", Method: "GET"}},
			Parallelism: 1,
			Retry:       &taskv1.RetryPolicy{Backoff: backoffs},
		}},
	}, {
		name: "status: state is phase, retryCount counts retries where attempts counts runs",
		spoke: v1alpha1.Task{
			Spec:   v1alpha1.TaskSpec{Type: "shell", Replicas: 1, Shell: "true"},
			Status: v1alpha1.TaskStatus{State: "Retrying", LastJobName: "t-2", RetryCount: 1, LastError: "exit 1", LastUpdateTime: &t0},
		},
		hub: taskv1.Task{
			Spec: taskv1.TaskSpec{
				Runner:      taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "true"}},
				Parallelism: 1,
				Retry:       &taskv1.RetryPolicy{Backoff: backoffs},
			},
			Status: taskv1.TaskStatus{Phase: taskv1.PhaseRetrying, LastJob: &taskv1.JobReference{Name: "t-2"}, Attempts: 2, LastError: "exit 1", LastPhaseTransitionTime: &t0},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hub taskv1.Task
			if err := ConvertV1alpha1ToV1(context.Background(), &tt.spoke, &hub); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.hub, hub); diff != "" {
				t.Errorf("up-conversion (-want +got):\n%s", diff)
			}
			var spoke v1alpha1.Task
			if err := ConvertV1ToV1alpha1(context.Background(), &tt.hub, &spoke); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.spoke, spoke); diff != "" {
				t.Errorf("down-conversion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestV1beta1FieldMapping(t *testing.T) {
	tests := []struct {
		name  string
		spoke v1beta1.Task
		hub   taskv1.Task
	}{{
		name: "maxRetries moves under retry, schedule string becomes schedule.cron",
		spoke: v1beta1.Task{Spec: v1beta1.TaskSpec{
			Runner:      v1beta1.Runner{Type: "Shell", Shell: &v1beta1.ShellRunner{Script: "date", Image: "alpine:3"}},
			Parallelism: 2, MaxRetries: 4, Schedule: "*/5 * * * *", Suspend: true,
		}},
		hub: taskv1.Task{Spec: taskv1.TaskSpec{
			Runner:      taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "date", Image: "alpine:3"}},
			Parallelism: 2,
			Retry:       &taskv1.RetryPolicy{MaxRetries: 4, Backoff: backoffs},
			Schedule:    &taskv1.Schedule{Cron: "*/5 * * * *", ConcurrencyPolicy: taskv1.AllowConcurrent},
			Suspend:     true,
		}},
	}, {
		name: "http headers and status",
		spoke: v1beta1.Task{
			Spec: v1beta1.TaskSpec{Runner: v1beta1.Runner{Type: "HTTP", HTTP: &v1beta1.HTTPRunner{
				URL: "http://svc/hook", Method: "POST", Headers: []v1beta1.HTTPHeader{{Name: "X-A", Value: "1"}},
			}}, Parallelism: 1},
			Status: v1beta1.TaskStatus{ObservedGeneration: 3, Phase: "Succeeded", Attempts: 1, LastJobName: "h-1", StartTime: &t0, CompletionTime: &t0,
				Conditions: []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "JobComplete", LastTransitionTime: t0}}},
		},
		hub: taskv1.Task{
			Spec: taskv1.TaskSpec{
				Runner: taskv1.Runner{Type: taskv1.RunnerHTTP, HTTP: &taskv1.HTTPRunner{
					URL: "http://svc/hook", Method: "POST", Headers: []taskv1.HTTPHeader{{Name: "X-A", Value: "1"}},
				}},
				Parallelism: 1,
				Retry:       &taskv1.RetryPolicy{Backoff: backoffs},
			},
			Status: taskv1.TaskStatus{ObservedGeneration: 3, Phase: taskv1.PhaseSucceeded, Attempts: 1, LastJob: &taskv1.JobReference{Name: "h-1"}, StartTime: &t0, CompletionTime: &t0,
				Conditions: []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "JobComplete", LastTransitionTime: t0}}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hub taskv1.Task
			if err := ConvertV1beta1ToV1(context.Background(), &tt.spoke, &hub); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.hub, hub); diff != "" {
				t.Errorf("up-conversion (-want +got):\n%s", diff)
			}
			var spoke v1beta1.Task
			if err := ConvertV1ToV1beta1(context.Background(), &tt.hub, &spoke); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.spoke, spoke); diff != "" {
				t.Errorf("down-conversion (-want +got):\n%s", diff)
			}
		})
	}
}

// richHub uses every v1-only field, with a script far larger than anything worth copying.
func richHub(script string) *taskv1.Task {
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
			Schedule:                   &taskv1.Schedule{Cron: "0 * * * *", TimeZone: "Europe/Paris", ConcurrencyPolicy: taskv1.ForbidConcurrent, StartingDeadlineSeconds: &deadline},
			Timeout:                    &metav1.Duration{Duration: 10 * time.Minute},
			TTLSecondsAfterFinished:    &ttl,
			SuccessfulJobsHistoryLimit: &keep,
			FailedJobsHistoryLimit:     &keep,
		},
		Status: taskv1.TaskStatus{
			ObservedGeneration: 2, Phase: taskv1.PhaseScheduled, Attempts: 1,
			ActiveJobs:       []taskv1.JobReference{{Name: "rich-1", UID: "u1"}},
			LastJob:          &taskv1.JobReference{Name: "rich-1", UID: "u1"},
			LastScheduleTime: &t0, NextRunTime: &t0, MissedRuns: 2,
		},
	}
}

func TestPreservedFieldsStayOffTheHubAndSmall(t *testing.T) {
	script := strings.Repeat("echo line\n", 6000) // 60 KB, near the schema's maximum
	hub := richHub(script)
	for _, tc := range []struct {
		name string
		down func() (map[string]string, error)
		up   func() (*taskv1.Task, error)
	}{{
		name: "v1alpha1",
		down: func() (map[string]string, error) {
			var s v1alpha1.Task
			err := ConvertV1ToV1alpha1(context.Background(), hub, &s)
			return s.Annotations, err
		},
	}, {
		name: "v1beta1",
		down: func() (map[string]string, error) {
			var s v1beta1.Task
			err := ConvertV1ToV1beta1(context.Background(), hub, &s)
			return s.Annotations, err
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			annotations, err := tc.down()
			if err != nil {
				t.Fatal(err)
			}
			preserved := annotations[PreservedAnnotation]
			if preserved == "" {
				t.Fatal("no preserved annotation although the hub uses v1-only fields")
			}
			if strings.Contains(preserved, "echo line") {
				t.Error("the script, which the spoke expresses, was copied into the preserved annotation")
			}
			if len(preserved) > 2048 {
				t.Errorf("preserved annotation is %d bytes, want it to hold only the v1-only fields", len(preserved))
			}
			if annotations["team"] != "a" {
				t.Error("user annotations were not carried over")
			}
			if _, ok := hub.Annotations[PreservedAnnotation]; ok {
				t.Error("down-conversion wrote into the hub's annotations")
			}
		})
	}
}

// A user who edits a field the old version has must win over what was preserved.
func TestSpokeEditsWinOverPreservedFields(t *testing.T) {
	ctx := context.Background()
	var spoke v1alpha1.Task
	if err := ConvertV1ToV1alpha1(ctx, richHub("date"), &spoke); err != nil {
		t.Fatal(err)
	}
	spoke.Spec.MaxRetry = 9
	spoke.Spec.Shell = "uptime"
	var hub taskv1.Task
	if err := ConvertV1alpha1ToV1(ctx, &spoke, &hub); err != nil {
		t.Fatal(err)
	}
	want := richHub("uptime")
	want.Spec.Retry.MaxRetries = 9
	if diff := cmp.Diff(want.Spec, hub.Spec); diff != "" {
		t.Errorf("spec after an edit at v1alpha1 (-want +got):\n%s", diff)
	}
	if _, ok := hub.Annotations[PreservedAnnotation]; ok {
		t.Error("preserved annotation reached the hub")
	}

	// Switching the runner at the old version drops the preserved parts of the old runner.
	spoke.Spec.Type, spoke.Spec.Shell, spoke.Spec.URL = "http", "", "http://svc/"
	hub = taskv1.Task{}
	if err := ConvertV1alpha1ToV1(ctx, &spoke, &hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Runner.Shell != nil || hub.Spec.Runner.HTTP == nil || hub.Spec.Runner.Type != taskv1.RunnerHTTP {
		t.Errorf("runner after switching to http at v1alpha1: %+v", hub.Spec.Runner)
	}
}

func TestMalformedPreservedAnnotationIsAnError(t *testing.T) {
	spoke := v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{PreservedAnnotation: "{not json"}},
		Spec:       v1alpha1.TaskSpec{Type: "shell", Shell: "true", Replicas: 1},
	}
	var hub taskv1.Task
	err := ConvertV1alpha1ToV1(context.Background(), &spoke, &hub)
	if err == nil || !strings.Contains(err.Error(), PreservedAnnotation) {
		t.Fatalf("want an error naming %s, got %v", PreservedAnnotation, err)
	}
}
