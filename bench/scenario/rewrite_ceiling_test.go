package scenario

import (
	"testing"

	"example.com/task-operator/bench/harness"
)

// TestTheSameCallsFloorCountsEveryOtherCall: the floor's check is zero only for migrate.Run's
// two calls per write (up to 1 % of them), and counts a missing, an extra or a foreign call.
func TestTheSameCallsFloorCountsEveryOtherCall(t *testing.T) {
	const n = 1000
	calls := func(pairs map[string]float64) harness.Conversions {
		out := harness.Conversions{}
		for pair, count := range pairs {
			out[pair] = harness.Histogram{Count: count}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls harness.Conversions
		want  int
	}{
		{"migrate.Run's two per write", calls(map[string]float64{"v1→v1alpha1": n, "v1→v1beta1": n}), 0},
		{"a relist's few more", calls(map[string]float64{"v1→v1alpha1": n + 10, "v1→v1beta1": n + 10}), 0},
		{"a read from etcd per write", calls(map[string]float64{"v1→v1alpha1": n, "v1→v1beta1": n, "v1alpha1→v1": n}), n - 20},
		{"one watch cache silent", calls(map[string]float64{"v1→v1alpha1": n}), n - 20},
		{"no calls at all", calls(nil), 2*n - 20},
	} {
		if got := offMigrateRunCalls(tc.calls, n); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
