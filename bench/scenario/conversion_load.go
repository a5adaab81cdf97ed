package scenario

import (
	"context"
	"fmt"
	"time"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// conversionLoad is what the conversion webhook served while one method ran: the apiserver's
// histogram of its calls and the handler's own time per request.
type conversionLoad struct {
	apiserver  harness.Conversions
	handler    []time.Duration
	handshakes int64
}

// watchConversions records the conversion load of whatever runs between it and the returned
// stop.
func watchConversions(ctx context.Context, e *harness.Env, up *testenv.Upgrade) (stop func() (conversionLoad, error), err error) {
	before, err := harness.APIServerConversions(ctx, e.Kube, taskv1.CRDName)
	if err != nil {
		return nil, err
	}
	up.Conversion().HandlerTimes()
	return func() (conversionLoad, error) {
		// The watch cache decodes a write's event after the write returns.
		time.Sleep(time.Second)
		after, err := harness.APIServerConversions(ctx, e.Kube, taskv1.CRDName)
		if err != nil {
			return conversionLoad{}, err
		}
		handler, handshakes := up.Conversion().HandlerTimes()
		return conversionLoad{apiserver: after.Sub(before), handler: handler, handshakes: handshakes}, nil
	}, nil
}

// settleConversions waits until the apiserver stops calling crd's webhook and returns how many
// calls it waited for. After a CRD changes, its new watch caches list every object again, one
// conversion call per object and cached version; a measurement started meanwhile would count
// those as its own and compete with them for CPU.
func settleConversions(ctx context.Context, e *harness.Env, crd string) (float64, error) {
	first, last := -1.0, -1.0
	err := testenv.Poll(ctx, 10*time.Minute, 2*time.Second, "conversion calls to stop", func(ctx context.Context) (bool, error) {
		c, err := harness.APIServerConversions(ctx, e.Kube, crd)
		if err != nil {
			return false, err
		}
		n := c.Total().Count
		if first < 0 {
			first = n
		}
		settled := n == last
		last = n
		return settled, nil
	})
	return last - first, err
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// report adds the rows of one method's conversion load for n objects.
func (l conversionLoad) report(r *Result, method string, n int) {
	total := l.apiserver.Total()
	r.Addf(method+": conversion calls per object", "apiserver_crd_conversion_webhook_duration_seconds, by from→to: "+l.apiserver.PerObject(n),
		"%.2f", total.Count/float64(max(n, 1)))
	if total.Count == 0 {
		return
	}
	r.Addf(method+": conversion call, apiserver p50 / p99", fmt.Sprintf("%.0f%% of calls ≤ 1 ms, %.0f%% ≤ 2 ms; mean %.2f ms; the histogram's first bucket is 1 ms",
		100*total.Within(0.001), 100*total.Within(0.002), 1000*total.Sum/total.Count),
		"%.2f ms / %.2f ms", 1000*total.Quantile(0.5), 1000*total.Quantile(0.99))
	if len(l.handler) == 0 {
		return
	}
	s := summarize(l.handler)
	r.Addf(method+": conversion call, handler p50 / p99", fmt.Sprintf("%d requests timed inside the /convert handler, over %d TLS handshakes; mean %s", len(l.handler), l.handshakes, s.mean),
		"%s / %s", s.p50, s.p99)
}
