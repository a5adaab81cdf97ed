package conversion

import (
	"math"
	"strings"
	"testing"
)

// TestARetryCountV1CannotCountIsRefused: v1alpha1's status.retryCount is v1's status.attempts
// less one; a count v1 cannot hold (negative, or one past int32 once the first attempt is added)
// is refused naming the field, where converting it would wrap or drop it. Counts in range
// convert to the attempts they say.
func TestARetryCountV1CannotCountIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retryCount   int64
		wantAttempts int64 // 0 for a refusal
	}{
		{"negative", -5, 0},
		{"one past what v1 counts", math.MaxInt32, 0},
		{"the most v1 counts", math.MaxInt32 - 1, math.MaxInt32},
		{"none, with a Job", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "Task", "metadata": map[string]any{"name": "r", "namespace": "ns"},
				"spec":   map[string]any{"type": "shell", "shell": "x"},
				"status": map[string]any{"state": "Running", "lastJobName": "r-0-1", "retryCount": tc.retryCount}}
			out, err := Convert(obj, "v1")
			if tc.wantAttempts == 0 {
				if err == nil || !strings.Contains(err.Error(), "status.retryCount: Invalid value") {
					t.Fatalf("retryCount %d converted (%v), error %v; want a refusal naming status.retryCount", tc.retryCount, out["status"], err)
				}
				return
			}
			if err != nil {
				t.Fatalf("retryCount %d refused: %v", tc.retryCount, err)
			}
			if got := out["status"].(map[string]any)["attempts"]; got != tc.wantAttempts {
				t.Fatalf("retryCount %d converted to attempts %v (%T), want %d", tc.retryCount, got, got, tc.wantAttempts)
			}
		})
	}
}
