package scenario

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

const callsNS = "bench-calls"

// A history is how the probed Tasks came to be: created at v1, or created and given a status
// at v1alpha1 as the previous release's users and operator did (their managedFields entries say
// v1alpha1).
type history struct {
	name   string
	prefix string
	create func(ctx context.Context, up *testenv.Upgrade, name string, i int) error
}

var histories = []history{
	{"created at v1", "v1-", createAtV1},
	{"created at v1alpha1", "v1alpha1-", createAtV1alpha1},
}

func createAtV1(ctx context.Context, up *testenv.Upgrade, name string, i int) error {
	obj := testenv.V1alpha1Task(callsNS, name, i)
	obj.SetAPIVersion("example.com/v1")
	spec := map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": fmt.Sprintf("echo %d", i)}}}
	obj.Object["spec"] = spec
	_, err := up.Tasks("v1", callsNS).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func createAtV1alpha1(ctx context.Context, up *testenv.Upgrade, name string, i int) error {
	tasks := up.Tasks(v1alpha1.GroupVersion.Version, callsNS)
	created, err := tasks.Create(ctx, testenv.V1alpha1Task(callsNS, name, i), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Object["status"] = testenv.V1alpha1Status(name, i)
	_, err = tasks.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// A writePath is one way a client writes a Task that exists. Each write sets value, which
// must differ from the Task's: an update that changes nothing is not written to etcd, and so
// costs the watch caches no conversion.
type writePath struct {
	name  string
	write func(ctx context.Context, up *testenv.Upgrade, name, value string) error
}

// writePaths come in this order because the last one records a v1alpha1 managedFields entry
// again.
var writePaths = []writePath{
	{"update at v1 (GET + PUT, a label)", func(ctx context.Context, up *testenv.Upgrade, name, value string) error {
		return relabel(ctx, up, "v1", name, value)
	}},
	{"status merge patch at v1", func(ctx context.Context, up *testenv.Upgrade, name, value string) error {
		patch := fmt.Appendf(nil, `{"status":{"lastError":"probe %s"}}`, value)
		_, err := up.Tasks("v1", callsNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	}},
	{"server-side apply at v1 (a label)", func(ctx context.Context, up *testenv.Upgrade, name, value string) error {
		patch := fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":%q,"labels":{"bench-apply":%q}}}`, name, value)
		_, err := up.Tasks("v1", callsNS).Patch(ctx, name, types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: "bench-apply", Force: new(true)})
		return err
	}},
	{"update at v1alpha1 (GET + PUT, a label)", func(ctx context.Context, up *testenv.Upgrade, name, value string) error {
		return relabel(ctx, up, v1alpha1.GroupVersion.Version, name, value)
	}},
}

func relabel(ctx context.Context, up *testenv.Upgrade, version, name, value string) error {
	tasks := up.Tasks(version, callsNS)
	obj, err := tasks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	labels := obj.GetLabels()
	labels["bench-relabel-"+version] = value
	obj.SetLabels(labels)
	_, err = tasks.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// probeWrites creates k Tasks of each history and writes each by every path, one path at a
// time and nothing else writing Tasks meanwhile, and reports the conversion calls each costs.
func probeWrites(ctx context.Context, e *harness.Env, up *testenv.Upgrade, k int, r *Result) error {
	if err := e.EnsureNamespace(ctx, callsNS); err != nil {
		return err
	}
	var all harness.Histogram
	for _, h := range histories {
		calls, err := measureCalls(ctx, e, up, k, r, "create: "+h.name, func(ctx context.Context, i int) error {
			return h.create(ctx, up, probeName(h, i), i)
		})
		if err != nil {
			return err
		}
		all.Add(calls)
		if calls, err = probePaths(ctx, e, up, k, r, h, 1, ""); err != nil {
			return err
		}
		all.Add(calls)
	}
	reportUnloaded(r, all)
	return nil
}

// reportUnloaded reports the apiserver's timing of conversion calls made while one write ran at
// a time: the call's own cost, without the queueing for CPU of a loaded machine.
func reportUnloaded(r *Result, h harness.Histogram) {
	r.Addf("conversion call, apiserver p50 / p99, one write at a time", fmt.Sprintf("%.0f calls of the write probe; mean %.2f ms", h.Count, 1000*h.Sum/max(h.Count, 1)),
		"%.2f ms / %.2f ms", 1000*h.Quantile(0.5), 1000*h.Quantile(0.99))
}

// probePaths measures every write path on the k Tasks of history h, the round-th time, and
// returns the timing of all their conversion calls.
func probePaths(ctx context.Context, e *harness.Env, up *testenv.Upgrade, k int, r *Result, h history, round int, when string) (harness.Histogram, error) {
	var all harness.Histogram
	for _, p := range writePaths {
		calls, err := measureCalls(ctx, e, up, k, r, h.name+when+": "+p.name, func(ctx context.Context, i int) error {
			return p.write(ctx, up, probeName(h, i), fmt.Sprintf("%d-%d", round, i))
		})
		if err != nil {
			return all, err
		}
		all.Add(calls)
	}
	return all, nil
}

func probeName(h history, i int) string { return fmt.Sprintf("calls-%s%03d", h.prefix, i) }

// measureCalls runs write for i in [0, k), one after another, and reports the apiserver's
// conversion calls per write, returning their timing.
func measureCalls(ctx context.Context, e *harness.Env, up *testenv.Upgrade, k int, r *Result, what string, write func(ctx context.Context, i int) error) (harness.Histogram, error) {
	stop, err := watchConversions(ctx, e, up)
	if err != nil {
		return harness.Histogram{}, err
	}
	for i := range k {
		if err := write(ctx, i); err != nil {
			return harness.Histogram{}, fmt.Errorf("%s, Task %d: %w", what, i, err)
		}
	}
	load, err := stop()
	if err != nil {
		return harness.Histogram{}, err
	}
	total := load.apiserver.Total()
	r.Addf("conversion calls per write: "+what, load.apiserver.PerObject(k), "%.2f", total.Count/float64(k))
	return total, nil
}
