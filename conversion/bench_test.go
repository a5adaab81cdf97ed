package conversion

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// withManagedFields gives obj the managedFields a Task written at v1alpha1 by a user and given
// a status by the previous release's operator carries: the apiserver sends them on every call.
func withManagedFields(obj map[string]any) map[string]any {
	obj = deepCopy(obj).(map[string]any)
	meta := obj["metadata"].(map[string]any)
	meta["managedFields"] = []any{
		map[string]any{"apiVersion": "example.com/v1alpha1", "fieldsType": "FieldsV1", "manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-30T10:00:00Z",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:kubectl.kubernetes.io/last-applied-configuration": map[string]any{}}, "f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}}},
				"f:spec": map[string]any{".": map[string]any{}, "f:maxRetry": map[string]any{}, "f:replicas": map[string]any{}, "f:shell": map[string]any{}, "f:type": map[string]any{}}}},
		map[string]any{"apiVersion": "example.com/v1alpha1", "fieldsType": "FieldsV1", "manager": "task-operator", "operation": "Update", "subresource": "status", "time": "2026-11-30T10:00:05Z",
			"fieldsV1": map[string]any{"f:status": map[string]any{".": map[string]any{}, "f:lastJobName": map[string]any{}, "f:lastUpdateTime": map[string]any{}, "f:retryCount": map[string]any{}, "f:state": map[string]any{}}}},
	}
	meta["labels"] = map[string]any{"app": "nightly"}
	meta["creationTimestamp"] = "2026-11-30T10:00:00Z"
	return obj
}

// BenchmarkHandler serves a ConversionReview of one object, as the apiserver sends most of them
// (a write, a watch event), through the whole handler: decode, convert, encode.
func BenchmarkHandler(b *testing.B) {
	hub := withManagedFields(hubObject(b, richHub("echo step")))
	spoke := mustConvert(b, hub, v1alpha1.GroupVersion.Version)
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		desired string
	}{
		{"v1-to-v1alpha1", hub, v1alpha1.GroupVersion.String()},
		{"v1alpha1-to-v1", spoke, taskv1.GroupVersion.String()},
	} {
		body := reviewOf(b, "uid-1", tc.desired, tc.obj)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			h := NewHandler()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"Success"`) {
					b.Fatalf("failed: %s", rec.Body)
				}
			}
		})
	}
}
