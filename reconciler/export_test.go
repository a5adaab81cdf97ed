package reconciler

import "time"

// WithExpectationTimeout shortens how long the controller waits for the cache to show a Job it
// created before reading it from the API server, so the integration tests of cache lag need
// not wait a minute.
func WithExpectationTimeout(o Options, d time.Duration) Options {
	o.expectationTimeout = d
	return o
}
