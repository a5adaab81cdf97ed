package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// The Events a Task's normal life records (JobCreated, Succeeded, RetryScheduled, JobReplaced)
// are each one write to the API server, as many as the run's own writes in a burst of one-shot
// Tasks. The recorder in use (client-go's events.k8s.io broadcaster, through controller-runtime)
// limits nothing there: it writes every Event at once, from a goroutine of its own, through a
// client with the manager's QPS but a token bucket of its own; its only aggregation turns
// repeats of the same type, reason, action and object within minutes into an EventSeries, which
// one-shot Tasks, each its own object, never make. So the budget is the controller's: Normal
// Events pass a token bucket shared by every Task (NormalEventQPS, NormalEventBurst); beyond it
// they are dropped and counted in taskoperator_events_dropped_total. Warnings are never
// limited. The Task's status and conditions are the record; Events are best effort.

// eventsDropped counts the Normal Events the budget dropped, by reason.
var eventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: metricsPrefix + "events_dropped_total",
	Help: "Normal Events not recorded because the controller's Normal Event budget (--normal-event-qps, --normal-event-burst) was spent; Warnings are never dropped.",
}, []string{"reason"})

// budgetedRecorder records Warnings always and Normal Events while the budget allows.
type budgetedRecorder struct {
	events.EventRecorder
	normal *rate.Limiter // nil: no limit
}

// newBudgetedRecorder limits rec's Normal Events to qps per second in bursts of burst; a
// negative qps lets them all through.
func newBudgetedRecorder(rec events.EventRecorder, qps float64, burst int) *budgetedRecorder {
	b := &budgetedRecorder{EventRecorder: rec}
	if qps >= 0 {
		b.normal = rate.NewLimiter(rate.Limit(qps), burst)
	}
	return b
}

func (b *budgetedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype == corev1.EventTypeNormal && b.normal != nil && !b.normal.Allow() {
		eventsDropped.WithLabelValues(reason).Inc()
		return
	}
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
