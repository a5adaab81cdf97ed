package reconciler

import (
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// canRetry reports whether a run whose attempt failed may have another attempt.
func canRetry(task *v1.Task, attempt int32) bool {
	return attempt-1 < v1.MaxRetriesOf(task)
}

// backoffOf returns the Task's backoff, or nil for the defaults.
func backoffOf(task *v1.Task) *v1.Backoff {
	if task.Spec.Retry == nil {
		return nil
	}
	return task.Spec.Retry.Backoff
}

// nextRetryDelay is how long to wait before retry number retry (1 for the first retry):
// initial × factor^(retry-1), at most max. Unset fields take the API's defaults (10s, ×2, 5m).
// Whole seconds only, since the due time is stored at second precision.
func nextRetryDelay(b *v1.Backoff, retry int32) time.Duration {
	initial, factor, limit := v1.DefaultBackoffInitial, int64(v1.DefaultBackoffFactor), v1.DefaultBackoffMax
	if b != nil {
		if b.Initial != nil {
			initial = b.Initial.Duration
		}
		if b.Factor >= 1 {
			factor = int64(b.Factor)
		}
		if b.Max != nil {
			limit = b.Max.Duration
		}
	}
	if initial <= 0 {
		return 0
	}
	limit = max(limit, 0)
	delay := initial
	for i := int32(1); i < retry && delay < limit; i++ {
		if delay > limit/time.Duration(factor) {
			delay = limit // the next multiplication would pass the cap (or overflow)
			break
		}
		delay *= time.Duration(factor)
	}
	return min(delay, limit).Truncate(time.Second)
}
