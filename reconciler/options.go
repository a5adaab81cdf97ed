package reconciler

import (
	"time"

	"k8s.io/utils/clock"
)

// Options configures the Task controller. The zero value is usable: every field has a default.
type Options struct {
	// MaxConcurrentReconciles is how many Tasks are reconciled at once. Default 4.
	MaxConcurrentReconciles int
	// RateLimiterBaseDelay and RateLimiterMaxDelay bound the per-Task exponential backoff after
	// a failed reconcile. Defaults 50ms and 1000s.
	RateLimiterBaseDelay, RateLimiterMaxDelay time.Duration
	// ShellImage runs Shell runners that name no image. Default "busybox:1.37".
	ShellImage string
	// RunnerImage is the operator's own image; it runs HTTP runners as `http --url=...`.
	// Default "example.com/task-operator:latest".
	RunnerImage string
	// NormalEventQPS and NormalEventBurst are the budget of Normal Events (JobCreated,
	// Succeeded, RetryScheduled, JobReplaced) shared by every Task: a token bucket refilled
	// NormalEventQPS per second that holds NormalEventBurst; a Normal Event finding it empty is
	// dropped (taskoperator_events_dropped_total). Warnings are never limited. A negative
	// NormalEventQPS records every Event. Defaults 1 and 100.
	NormalEventQPS   float64
	NormalEventBurst int
	// Clock tells the time; tests inject a fake one. Default the real clock.
	Clock clock.PassiveClock

	// expectationTimeout is how long a created Job may be missing from the cache before it is
	// read from the API server (default one minute); tests shorten it.
	expectationTimeout time.Duration
}

// Defaults for Options.
const (
	DefaultMaxConcurrentReconciles = 4
	DefaultRateLimiterBaseDelay    = 50 * time.Millisecond
	DefaultRateLimiterMaxDelay     = 1000 * time.Second
	DefaultShellImage              = "busybox:1.37"
	DefaultRunnerImage             = "example.com/task-operator:latest"
	DefaultNormalEventQPS          = 1
	DefaultNormalEventBurst        = 100
)

func (o Options) withDefaults() Options {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if o.RateLimiterBaseDelay <= 0 {
		o.RateLimiterBaseDelay = DefaultRateLimiterBaseDelay
	}
	if o.RateLimiterMaxDelay <= 0 {
		o.RateLimiterMaxDelay = DefaultRateLimiterMaxDelay
	}
	if o.ShellImage == "" {
		o.ShellImage = DefaultShellImage
	}
	if o.RunnerImage == "" {
		o.RunnerImage = DefaultRunnerImage
	}
	if o.NormalEventQPS == 0 {
		o.NormalEventQPS = DefaultNormalEventQPS
	}
	if o.NormalEventBurst <= 0 {
		o.NormalEventBurst = DefaultNormalEventBurst
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.expectationTimeout <= 0 {
		o.expectationTimeout = defaultExpectationTimeout
	}
	return o
}
