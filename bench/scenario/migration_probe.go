package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// resourceIn is a resource at its storage version in one namespace, or all of them for "".
type resourceIn func(namespace string) dynamic.ResourceInterface

func tasksAtV1(up *testenv.Upgrade) resourceIn {
	return func(ns string) dynamic.ResourceInterface { return up.Tasks("v1", ns) }
}

// bareRewrite is the baseline a migration is judged against: what any client does to rewrite
// every object at the storage version, with no checkpoint, progress or trim. It LISTs pages of
// pageSize and PUTs each object back unchanged with workers in flight, reading an object again
// after a conflict.
func bareRewrite(ctx context.Context, res resourceIn, pageSize int64, workers int) (int, error) {
	items := make(chan unstructured.Unstructured, workers)
	var (
		mu        sync.Mutex
		rewritten int
		errs      []error
		wg        sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for obj := range items {
				err := putUnchanged(ctx, res, &obj)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					rewritten++
				}
				mu.Unlock()
			}
		})
	}
	listErr := listPages(ctx, res, pageSize, items)
	close(items)
	wg.Wait()
	return rewritten, errors.Join(append(errs, listErr)...)
}

func listPages(ctx context.Context, res resourceIn, pageSize int64, items chan<- unstructured.Unstructured) error {
	cont := ""
	for {
		page, err := res(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: pageSize, Continue: cont})
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, item := range page.Items {
			items <- item
		}
		if cont = page.GetContinue(); cont == "" {
			return nil
		}
	}
}

func putUnchanged(ctx context.Context, res resourceIn, obj *unstructured.Unstructured) error {
	objects := res(obj.GetNamespace())
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := objects.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj = fresh
		}
		first = false
		_, err := objects.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewrite %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

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

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// profiles takes CPU profiles of this process (the conversion handler, and the migrating
// client) and of the kube-apiserver for window, after delay (past the first LIST pages, into
// the rewrites), into dir. wait returns once both are written.
func profiles(ctx context.Context, e *harness.Env, dir string, delay, window time.Duration) (wait func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	done := make(chan error, 2)
	go func() {
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			done <- ctx.Err()
			return
		case <-time.After(delay):
		}
		go func() { done <- profileSelf(filepath.Join(dir, "bench-process.cpu.pprof"), window) }()
		raw, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(int(window.Seconds()))).Timeout(window + time.Minute).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "kube-apiserver.cpu.pprof"), raw, 0o644)
		}
		done <- err
	}()
	return func() error { return errors.Join(<-done, <-done) }, nil
}

func profileSelf(file string, window time.Duration) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(err, f.Close())
	}
	time.Sleep(window)
	pprof.StopCPUProfile()
	return f.Close()
}
