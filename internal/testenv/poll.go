package testenv

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultInterval is how often Poll and Eventually ask by default: a wait ends soon after its
// condition holds, and the dozens of tests that wait in parallel leave the apiserver (on two
// shared cores in CI) to the operator they test.
const DefaultInterval = 200 * time.Millisecond

// Condition reports whether what a wait waits for has happened. A non-nil error says why not
// yet; it is kept for the timeout message and the wait goes on, unless it is Permanent. Once
// done is true the error is ignored: a condition that must also succeed returns err == nil.
type Condition func(ctx context.Context) (done bool, err error)

// permanentError ends a Poll at once.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err so that Poll returns it at once instead of asking again: for a state
// that can no longer change, such as a process that has exited.
func Permanent(err error) error { return permanentError{err} }

// Poll asks cond every interval (DefaultInterval when 0), the first time at once, until it
// reports done, returns a Permanent error, timeout passes or ctx ends. The error names what
// was awaited and quotes cond's last error.
func Poll(ctx context.Context, timeout, interval time.Duration, what string, cond Condition) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errPollTimeout)
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last error
	for {
		done, err := cond(ctx)
		if done {
			return nil
		}
		if errors.As(err, new(permanentError)) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		// A condition cut short by the deadline says nothing about the state.
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		select {
		case <-ctx.Done():
			return timeoutError(ctx, what, timeout, last)
		case <-ticker.C:
		}
	}
}

// errPollTimeout tells Poll's own timeout from the end of the caller's context.
var errPollTimeout = errors.New("poll timeout")

func timeoutError(ctx context.Context, what string, timeout time.Duration, last error) error {
	reason := fmt.Sprintf("not done after %s", timeout)
	if cause := context.Cause(ctx); cause != errPollTimeout {
		reason = cause.Error()
	}
	if last == nil {
		return fmt.Errorf("waiting for %s: %s", what, reason)
	}
	return fmt.Errorf("waiting for %s: %s; last error: %w", what, reason, last)
}
