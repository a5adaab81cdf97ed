package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// createSuspendedTasks creates n Tasks at v1 that never run, so that listing measures
// conversion and not the Jobs they would start.
func createSuspendedTasks(tb testing.TB, ns string, n int) {
	tb.Helper()
	cfg := *cluster.Config
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(&cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			task := &taskv1.Task{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("listed-%05d", i)},
				Spec: taskv1.TaskSpec{
					Runner:  taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "echo listed", Env: []taskv1.EnvVar{{Name: "I", Value: strconv.Itoa(i)}}}},
					Suspend: true,
				},
			}
			return c.Create(context.Background(), task)
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatalf("create %d tasks: %v", n, err)
	}
}

// listAt lists the Tasks of ns at version and counts them.
func listAt(ctx context.Context, version, ns string) (int, error) {
	obj, err := kube.Scheme().New(taskv1.ResourceAt(version).GroupVersion().WithKind(taskv1.Kind + "List"))
	if err != nil {
		return 0, err
	}
	list := obj.(client.ObjectList)
	if err := kube.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	return meta.LenList(list), nil
}

func TestListThousandTasksAtEveryVersion(t *testing.T) {
	const n = 1000
	ns := setUp(t)
	createSuspendedTasks(t, ns, n)
	ctx := context.Background()
	waitUntilSuspended(t, ns, n)
	timings := map[string][]time.Duration{}
	for range 5 {
		for _, version := range []string{"v1", "v1alpha1", "v1beta1"} {
			start := time.Now()
			got, err := listAt(ctx, version, ns)
			timings[version] = append(timings[version], time.Since(start))
			if err != nil {
				t.Fatalf("LIST at %s: %v", version, err)
			}
			if got != n {
				t.Fatalf("LIST at %s returned %d Tasks, want %d", version, got, n)
			}
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	base := median(timings["v1"])
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		m := median(timings[version])
		t.Logf("LIST %d Tasks at %s: %s; at v1: %s; ratio %.2f", n, version, m, base, float64(m)/float64(base))
	}
}

// waitUntilSuspended waits for the operator to have written the status of all n Tasks, so that
// timed LISTs do not compete with its writes. It asks once a second: each ask lists them all.
func waitUntilSuspended(tb testing.TB, ns string, n int) {
	tb.Helper()
	err := testenv.Poll(tb.Context(), 3*time.Minute, time.Second, fmt.Sprintf("the %d Tasks in %s to be Suspended", n, ns), func(ctx context.Context) (bool, error) {
		var list taskv1.TaskList
		if err := kube.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		suspended := 0
		for _, task := range list.Items {
			if task.Status.Phase == taskv1.PhaseSuspended {
				suspended++
			}
		}
		return suspended == n, fmt.Errorf("%d of %d Suspended", suspended, n)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkListTasks lists E2E_LIST_TASKS Tasks (default 1000) at each version; compare the
// v1alpha1 and v1beta1 figures with v1, which needs no conversion.
func BenchmarkListTasks(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("E2E_LIST_TASKS")); err == nil && v > 0 {
		n = v
	}
	ns := setUp(b)
	createSuspendedTasks(b, ns, n)
	waitUntilSuspended(b, ns, n)
	for _, version := range []string{"v1", "v1alpha1", "v1beta1"} {
		b.Run(version, func(b *testing.B) {
			for b.Loop() {
				if got, err := listAt(context.Background(), version, ns); err != nil || got != n {
					b.Fatalf("LIST at %s: %d items, %v", version, got, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
