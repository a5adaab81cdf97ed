package reconciler

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	v1 "example.com/task-operator/apis/v1"
)

// TestEventBudget: past the burst, Normal Events are dropped and counted; Warnings all pass.
func TestEventBudget(t *testing.T) {
	fake := events.NewFakeRecorder(100)
	rec := newBudgetedRecorder(fake, 0.000001, 3) // a refill too slow to matter here
	task := &v1.Task{}
	dropped := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventSucceeded))
	for range 5 {
		rec.Eventf(task, nil, corev1.EventTypeNormal, v1.EventSucceeded, "Complete", "ok")
		rec.Eventf(task, nil, corev1.EventTypeWarning, v1.EventRunFailed, "Fail", "bad")
	}
	close(fake.Events)
	var normal, warning int
	for e := range fake.Events {
		switch {
		case strings.HasPrefix(e, corev1.EventTypeNormal):
			normal++
		case strings.HasPrefix(e, corev1.EventTypeWarning):
			warning++
		}
	}
	if normal != 3 || warning != 5 {
		t.Errorf("recorded %d Normal and %d Warning Events, want the burst of 3 and all 5", normal, warning)
	}
	if got := testutil.ToFloat64(eventsDropped.WithLabelValues(v1.EventSucceeded)) - dropped; got != 2 {
		t.Errorf("events_dropped_total{reason=Succeeded} grew by %v, want 2", got)
	}

	fake = events.NewFakeRecorder(100)
	rec = newBudgetedRecorder(fake, -1, 0)
	for range 50 {
		rec.Eventf(task, nil, corev1.EventTypeNormal, v1.EventJobCreated, "Create", "made")
	}
	if len(fake.Events) != 50 {
		t.Errorf("a negative QPS recorded %d of 50 Normal Events, want all", len(fake.Events))
	}
}

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

// TestEventBudgetExtremesNeverDropEveryNormalEvent: no value of the flags panics; the ones that reach the bucket
// through Options.withDefaults never make it drop every Normal Event forever.
func TestEventBudgetExtremesNeverDropEveryNormalEvent(t *testing.T) {
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

// TestEventBudgetCountsAddUpUnderConcurrency: many reconcilers at once (run with -race); Warnings all pass,
// Normal Events recorded + dropped add up.
func TestEventBudgetCountsAddUpUnderConcurrency(t *testing.T) {
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
