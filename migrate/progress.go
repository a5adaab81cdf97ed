package migrate

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// counters are the live counts of a run, shared by the workers and the progress reporter.
type counters struct {
	seen, rewritten, skipped, conflicts, failed atomic.Int64
	// fieldsMoved counts the Tasks whose managedFields entries at old versions were moved to
	// v1; fieldsKept those whose entries were left as they were (a path without a v1
	// counterpart).
	fieldsMoved, fieldsKept atomic.Int64
	// total is the estimated number of objects, or 0 while unknown.
	total atomic.Int64
}

func (c *counters) done() int64 {
	return c.rewritten.Load() + c.skipped.Load() + c.failed.Load()
}

// reporter prints progress lines to w every interval, and events whenever they happen.
type reporter struct {
	mu       sync.Mutex
	w        io.Writer
	name     string
	c        *counters
	start    time.Time
	baseDone int64 // objects done by earlier runs (resumed checkpoint); excluded from the rate
	stop     chan struct{}
	stopped  sync.WaitGroup
}

func newReporter(w io.Writer, name string, c *counters, now time.Time) *reporter {
	return &reporter{w: w, name: name, c: c, start: now, stop: make(chan struct{})}
}

func (r *reporter) run(interval time.Duration) {
	r.stopped.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case now := <-t.C:
				r.printf("%s", r.line(now))
			}
		}
	})
}

func (r *reporter) close() {
	close(r.stop)
	r.stopped.Wait()
}

func (r *reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format+"\n", args...)
}

// line renders one progress line: done/total, counts, rate and ETA.
func (r *reporter) line(now time.Time) string {
	done := r.c.done()
	total := r.c.total.Load()
	if total > 0 && total < done {
		total = done
	}
	elapsed := now.Sub(r.start)
	rate := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		rate = float64(done-r.baseDone) / secs
	}
	totalText, pct, eta := "?", "", "unknown"
	if total > 0 {
		totalText = fmt.Sprint(total)
		pct = fmt.Sprintf(" (%.1f%%)", 100*float64(done)/float64(total))
		if rate > 0 {
			eta = (time.Duration(float64(total-done) / rate * float64(time.Second))).Round(time.Second).String()
		}
	}
	return fmt.Sprintf("%s: %d/%s objects%s, rewritten %d, skipped %d, conflicts %d, failed %d, managedFields moved %d kept %d, %.1f/s, elapsed %s, ETA %s",
		r.name, done, totalText, pct, r.c.rewritten.Load(), r.c.skipped.Load(), r.c.conflicts.Load(), r.c.failed.Load(),
		r.c.fieldsMoved.Load(), r.c.fieldsKept.Load(), rate, elapsed.Round(time.Second), eta)
}
