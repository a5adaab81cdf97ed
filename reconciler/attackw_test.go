package reconciler

import (
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	v1 "example.com/task-operator/apis/v1"
)

func countNormal(t *testing.T, qps float64, burst, n int) int {
	t.Helper()
	fake := events.NewFakeRecorder(n + 1)
	var rec *budgetedRecorder
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("qps=%v burst=%d: panic %v", qps, burst, p)
			}
		}()
		rec = newBudgetedRecorder(fake, qps, burst)
		for range n {
			rec.Eventf(&v1.Task{}, nil, corev1.EventTypeNormal, v1.EventJobCreated, "Create", "x")
		}
	}()
	return len(fake.Events)
}

// TestAttackWEventBudgetExtremes: no value of the flags panics; the ones that reach the bucket
// through Options.withDefaults never make it drop every Normal Event forever.
func TestAttackWEventBudgetExtremes(t *testing.T) {
	for _, tt := range []struct {
		qps   float64
		burst int
	}{
		{0, 0}, {0, 5}, {-1, -1}, {-math.MaxFloat64, 0}, {math.MaxFloat64, 1}, {math.Inf(1), 0},
		{math.Inf(-1), 0}, {math.NaN(), 0}, {math.SmallestNonzeroFloat64, 1}, {1, math.MaxInt}, {1, math.MinInt},
	} {
		o := Options{NormalEventQPS: tt.qps, NormalEventBurst: tt.burst}.withDefaults()
		got := countNormal(t, o.NormalEventQPS, o.NormalEventBurst, 200)
		raw := countNormal(t, tt.qps, tt.burst, 200)
		t.Logf("flags qps=%v burst=%d -> options qps=%v burst=%d: %d of 200 recorded (raw bucket: %d)",
			tt.qps, tt.burst, o.NormalEventQPS, o.NormalEventBurst, got, raw)
		if got == 0 {
			t.Errorf("qps=%v burst=%d: every Normal Event dropped", tt.qps, tt.burst)
		}
	}
}

// TestAttackWEventBudgetConcurrent: many reconcilers at once (run with -race); Warnings all pass,
// Normal Events recorded + dropped add up.
func TestAttackWEventBudgetConcurrent(t *testing.T) {
	const workers, each = 8, 500
	fake := events.NewFakeRecorder(2 * workers * each)
	rec := newBudgetedRecorder(fake, 0.000001, 100)
	before := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventRetryScheduled))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				rec.Eventf(&v1.Task{}, nil, corev1.EventTypeNormal, v1.EventRetryScheduled, "Retry", "x")
				rec.Eventf(&v1.Task{}, nil, corev1.EventTypeWarning, v1.EventRunFailed, "Fail", "x")
			}
		}()
	}
	wg.Wait()
	dropped := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventRetryScheduled)) - before
	if got, want := len(fake.Events), 100+workers*each; got != want {
		t.Errorf("recorded %d, want %d (100 Normal + every Warning)", got, want)
	}
	if dropped != workers*each-100 {
		t.Errorf("dropped %v, want %d", dropped, workers*each-100)
	}
}

// TestAttackWEventTypes: every Event the controller makes is Normal or Warning, and the ones
// that report a failure are Warnings (never budgeted away).
func TestAttackWEventTypes(t *testing.T) {
	for _, e := range []eventSpec{normal(v1.EventJobCreated, "", ""), normal(v1.EventSucceeded, "", ""),
		normal(v1.EventRetryScheduled, "", ""), normal(v1.EventJobReplaced, "", "")} {
		if e.Type != corev1.EventTypeNormal {
			t.Errorf("%s: %s", e.Reason, e.Type)
		}
	}
	for _, e := range []eventSpec{warning(v1.EventRunFailed, "", ""), warning(v1.EventRetriesExhausted, "", ""),
		warning(v1.EventJobCreateFailed, "", ""), warning(v1.EventMissedRun, "", ""), warning(v1.EventTooManyMissedTimes, "", "")} {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s: %s", e.Reason, e.Type)
		}
	}
}
