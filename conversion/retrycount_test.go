package conversion

import (
	"math"
	"testing"
)

// TestARetryCountOutOfRangeGoesAcrossAndBackUnchanged: v1alpha1's status.retryCount is v1's
// status.attempts less one. A count the schema refuses (negative, or one past what int32
// attempts hold), which an earlier release stored, converts to v1 and back unchanged: a stored
// one still reads at every version, and a write of one meets the v1alpha1 schema's bounds,
// which the apiserver checks on the object converted back. Counts in range convert to the
// attempts they say.
func TestARetryCountOutOfRangeGoesAcrossAndBackUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name         string
		retryCount   int64
		wantAttempts int64
	}{
		{"negative", -5, -5},
		{"minus one", -1, -1},
		{"one past what v1 counts", math.MaxInt32, math.MinInt32},
		{"the most v1 counts", math.MaxInt32 - 1, math.MaxInt32},
		{"none, with a Job", 0, 1},
		{"two retries", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "Task", "metadata": map[string]any{"name": "r", "namespace": "ns"},
				"spec":   map[string]any{"type": "shell", "shell": "x"},
				"status": map[string]any{"state": "Running", "lastJobName": "r-0-1", "retryCount": tc.retryCount}}
			hub, err := Convert(obj, "v1")
			if err != nil {
				t.Fatalf("retryCount %d refused: %v", tc.retryCount, err)
			}
			if got := hub["status"].(map[string]any)["attempts"]; got != tc.wantAttempts {
				t.Fatalf("retryCount %d converted to attempts %v (%T), want %d", tc.retryCount, got, got, tc.wantAttempts)
			}
			back, err := Convert(hub, "v1alpha1")
			if err != nil {
				t.Fatalf("back to v1alpha1: %v", err)
			}
			if got := back["status"].(map[string]any)["retryCount"]; got != tc.retryCount && tc.retryCount != 0 {
				t.Fatalf("retryCount %d came back as %v", tc.retryCount, got)
			}
		})
	}
}
