package v1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/config"
)

func shellTask(mutate func(*TaskSpec)) *Task {
	task := &Task{Spec: TaskSpec{Runner: Runner{Type: RunnerShell, Shell: &ShellRunner{Script: "true"}}}}
	if mutate != nil {
		mutate(&task.Spec)
	}
	return task
}

func TestSetDefaults(t *testing.T) {
	keep := int32(7)
	tests := []struct {
		name                      string
		task                      *Task
		wantSucceeded, wantFailed *int32
		wantHTTPTimeout           time.Duration
	}{
		{"one-shot Task keeps no history limits", shellTask(nil), nil, nil, 0},
		{"scheduled Task gets CronJob-like limits", shellTask(func(s *TaskSpec) { s.Schedule = &Schedule{Cron: "@daily"} }), ptrTo[int32](3), ptrTo[int32](1), 0},
		{"explicit limits stay", shellTask(func(s *TaskSpec) {
			s.Schedule = &Schedule{Cron: "@daily"}
			s.SuccessfulJobsHistoryLimit, s.FailedJobsHistoryLimit = &keep, &keep
		}), &keep, &keep, 0},
		{"HTTP runner gets a timeout", &Task{Spec: TaskSpec{Runner: Runner{Type: RunnerHTTP, HTTP: &HTTPRunner{URL: "http://a"}}}}, nil, nil, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDefaults(tt.task)
			s := tt.task.Spec
			if diff := cmp.Diff(tt.wantSucceeded, s.SuccessfulJobsHistoryLimit); diff != "" {
				t.Errorf("successfulJobsHistoryLimit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFailed, s.FailedJobsHistoryLimit); diff != "" {
				t.Errorf("failedJobsHistoryLimit (-want +got):\n%s", diff)
			}
			if h := s.Runner.HTTP; h != nil && (h.Timeout == nil || h.Timeout.Duration != tt.wantHTTPTimeout) {
				t.Errorf("http timeout %v, want %v", h.Timeout, tt.wantHTTPTimeout)
			}
			if s.Parallelism != DefaultParallelism || s.Retry == nil || s.Retry.MaxRetries != DefaultMaxRetries {
				t.Errorf("schema defaults not applied: parallelism %d, retry %+v", s.Parallelism, s.Retry)
			}
			if diff := cmp.Diff(DefaultBackoff(), s.Retry.Backoff); diff != "" {
				t.Errorf("backoff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsKeepsWhatIsSet(t *testing.T) {
	task := shellTask(func(s *TaskSpec) {
		s.Parallelism = 4
		s.Retry = &RetryPolicy{MaxRetries: 0, Backoff: &Backoff{Factor: 3}}
		s.Schedule = &Schedule{Cron: "@daily", ConcurrencyPolicy: ForbidConcurrent}
	})
	want := task.DeepCopy()
	want.Spec.Retry.Backoff.Initial = &metav1.Duration{Duration: DefaultBackoffInitial}
	want.Spec.Retry.Backoff.Max = &metav1.Duration{Duration: DefaultBackoffMax}
	want.Spec.SuccessfulJobsHistoryLimit = ptrTo[int32](DefaultSuccessfulJobsHistoryLimit)
	want.Spec.FailedJobsHistoryLimit = ptrTo[int32](DefaultFailedJobsHistoryLimit)
	SetDefaults(task)
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
}

// TestSchemaDefaultsMatchConstants holds the +kubebuilder:default markers, as generated into the
// CRD, to the Go constants every other package uses.
func TestSchemaDefaultsMatchConstants(t *testing.T) {
	var crd apix.CustomResourceDefinition
	if err := yaml.Unmarshal(config.CRD, &crd); err != nil {
		t.Fatalf("decode CRD: %v", err)
	}
	var schema *apix.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == GroupVersion.Version {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		t.Fatalf("CRD has no %s schema", GroupVersion.Version)
	}
	defaultAt := func(path string) any {
		p := schema
		for _, name := range strings.Split(path, ".") {
			child, ok := p.Properties[name]
			if !ok {
				t.Fatalf("schema has no %s", path)
			}
			p = &child
		}
		if p.Default == nil {
			t.Fatalf("schema gives %s no default", path)
		}
		var v any
		if err := json.Unmarshal(p.Default.Raw, &v); err != nil {
			t.Fatalf("default of %s: %v", path, err)
		}
		return v
	}
	duration := func(v any) any {
		d, err := time.ParseDuration(v.(string))
		if err != nil {
			t.Fatalf("default %v is no duration: %v", v, err)
		}
		return d
	}
	number := func(v any) any { return int(v.(float64)) }
	text := func(v any) any { return v }
	for _, tc := range []struct {
		path  string
		parse func(any) any
		want  any
	}{
		{"spec.parallelism", number, DefaultParallelism},
		{"spec.retry.maxRetries", number, DefaultMaxRetries},
		{"spec.retry.backoff.initial", duration, DefaultBackoffInitial},
		{"spec.retry.backoff.factor", number, DefaultBackoffFactor},
		{"spec.retry.backoff.max", duration, DefaultBackoffMax},
		{"spec.runner.http.method", text, DefaultHTTPMethod},
		{"spec.schedule.concurrencyPolicy", text, string(DefaultConcurrencyPolicy)},
	} {
		if got := tc.parse(defaultAt(tc.path)); got != tc.want {
			t.Errorf("schema default of %s = %v, the constant says %v", tc.path, got, tc.want)
		}
	}
}
