package reconciler

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestRateLimiter is issue #14 item 12: the per-Task exponential backoff is kept, and so is
// controller-runtime's overall bucket of 10 per second with bursts of 100.
func TestRateLimiter(t *testing.T) {
	rl := newRateLimiter(Options{}.withDefaults())
	req := func(i int) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("t%d", i)}}
	}

	// One Task failing again and again: 50ms, 100ms, 200ms, ... up to 1000s.
	if d := rl.When(req(0)); d != DefaultRateLimiterBaseDelay {
		t.Errorf("first failure waits %v, want %v", d, DefaultRateLimiterBaseDelay)
	}
	if d := rl.When(req(0)); d != 2*DefaultRateLimiterBaseDelay {
		t.Errorf("second failure waits %v, want %v", d, 2*DefaultRateLimiterBaseDelay)
	}
	for range 40 {
		rl.When(req(0))
	}
	if d := rl.When(req(0)); d != DefaultRateLimiterMaxDelay {
		t.Errorf("after many failures: %v, want the cap %v", d, DefaultRateLimiterMaxDelay)
	}
	rl.Forget(req(0))
	if d := rl.When(req(0)); d > time.Second {
		t.Errorf("forgotten Task waits %v, want a fresh start", d)
	}

	// Many Tasks failing once each: past the burst, the overall bucket spaces them at 10/s, so
	// the 200th waits about 10s although its own backoff is 50ms.
	var last time.Duration
	for i := 1; i <= 200; i++ {
		last = rl.When(req(i))
	}
	if last < 5*time.Second {
		t.Errorf("the 200th distinct failure waits %v: the overall 10 qps bucket is missing", last)
	}
}
