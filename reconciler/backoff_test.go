package reconciler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestNextRetryDelay(t *testing.T) {
	tests := []struct {
		name    string
		backoff *v1.Backoff
		retry   int32
		want    time.Duration
	}{
		{"defaults first retry", nil, 1, 10 * time.Second},
		{"defaults second retry", nil, 2, 20 * time.Second},
		{"defaults fifth retry", nil, 5, 160 * time.Second},
		{"defaults capped at 5m", nil, 6, 5 * time.Minute},
		{"defaults far out stays capped", nil, 100, 5 * time.Minute},
		{"custom", &v1.Backoff{Initial: dur(time.Second), Factor: 3, Max: dur(time.Hour)}, 3, 9 * time.Second},
		{"factor 1 is constant", &v1.Backoff{Initial: dur(2 * time.Second), Factor: 1, Max: dur(time.Hour)}, 50, 2 * time.Second},
		{"zero factor means default 2", &v1.Backoff{Initial: dur(time.Second)}, 3, 4 * time.Second},
		{"only max set", &v1.Backoff{Max: dur(15 * time.Second)}, 2, 15 * time.Second},
		{"initial zero means no wait", &v1.Backoff{Initial: dur(0), Factor: 2, Max: dur(time.Minute)}, 4, 0},
		{"max below initial caps", &v1.Backoff{Initial: dur(time.Minute), Factor: 2, Max: dur(10 * time.Second)}, 1, 10 * time.Second},
		{"no overflow with huge factor", &v1.Backoff{Initial: dur(24 * time.Hour), Factor: 10, Max: dur(24 * time.Hour)}, 100, 24 * time.Hour},
		{"sub-second truncated", &v1.Backoff{Initial: dur(1500 * time.Millisecond), Factor: 1, Max: dur(time.Minute)}, 1, time.Second},
		{"retry zero treated as first", &v1.Backoff{Initial: dur(time.Second), Factor: 2, Max: dur(time.Minute)}, 0, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRetryDelay(tc.backoff, tc.retry); got != tc.want {
				t.Errorf("nextRetryDelay(%d) = %v, want %v", tc.retry, got, tc.want)
			}
		})
	}
}

func TestCanRetry(t *testing.T) {
	withRetries := func(n int32) *v1.Task {
		return &v1.Task{Spec: v1.TaskSpec{Retry: &v1.RetryPolicy{MaxRetries: n}}}
	}
	tests := []struct {
		name    string
		task    *v1.Task
		attempt int32
		want    bool
	}{
		{"no retries", withRetries(0), 1, false},
		{"two retries after first", withRetries(2), 1, true},
		{"two retries after second", withRetries(2), 2, true},
		{"two retries after third", withRetries(2), 3, false},
		{"default policy allows three", &v1.Task{}, 3, true},
		{"default policy exhausted after four", &v1.Task{}, 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canRetry(tc.task, tc.attempt); got != tc.want {
				t.Errorf("canRetry(attempt %d) = %v, want %v", tc.attempt, got, tc.want)
			}
		})
	}
}
