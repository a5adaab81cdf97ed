package scenario

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// A layout is how the scale scenario's Tasks are spread over namespaces.
type layout struct {
	name       string
	namespaces int
}

// scaleStep is what one size of the scale scenario measured.
type scaleStep struct {
	tasks int
	// start is from the leader's start to every Task observed (a status for the new ones, a
	// reconcile for all); handover from the leader's SIGTERM to the standby having reconciled
	// every Task.
	start, handover time.Duration
	// reconciles counted by the leader over start, and by the standby over handover.
	startReconciles, handoverReconciles float64
	// peak is the first leader's VmHWM once every Task was observed.
	peak int64
}

// scale grows the number of suspended Tasks in steps (a fifth of s.Tasks, a half, all), first in
// one namespace and then spread over s.Reps namespaces. At every step no controller runs while
// the new Tasks are created (a parked replica serves the webhooks); then a replica starts and the
// time until it has observed every Task is measured (a status written for each new one, a
// reconcile for every one), its peak RSS read, a standby started, the leader stopped, and the
// time until the standby has reconciled every Task measured: a leader handover at that size.
// Each figure's slope per 1,000 Tasks from the first step to the last says what growth costs.
func scale(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	if err := e.EnsureOperators(ctx, 0, true, false); err != nil {
		return err
	}
	parked, err := startParked(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = e.StopOperator(parked) }()
	steps := []int{s.Tasks / 5, s.Tasks / 2, s.Tasks}
	for _, l := range []layout{{"one namespace", 1}, {fmt.Sprintf("%d namespaces", s.Reps), s.Reps}} {
		results, err := scaleLayout(ctx, e, l, steps)
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		reportScale(r, l, results)
	}
	return nil
}

// parkedLease is the Lease of the parked replica, held by nobody that runs: the replica serves
// the webhooks, as every replica does, and never starts its controller.
const parkedLease = "bench-scale-parked"

func startParked(ctx context.Context, e *harness.Env) (*testenv.Operator, error) {
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: parkedLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr("nobody"), LeaseDurationSeconds: ptr[int32](24 * 3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	if err := e.Client.Create(ctx, lease); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("parked replica's Lease: %w", err)
	}
	return e.StartOperator(ctx, "scale-webhooks", true, "--leader-election-id="+parkedLease)
}
func scaleNamespace(l layout, i int) string {
	return fmt.Sprintf("bench-scale-%d-%03d", l.namespaces, i%l.namespaces)
}

func scaleLayout(ctx context.Context, e *harness.Env, l layout, steps []int) ([]scaleStep, error) {
	for i := range l.namespaces {
		if err := e.EnsureNamespace(ctx, scaleNamespace(l, i)); err != nil {
			return nil, err
		}
	}
	defer deleteScaleTasks(ctx, e, l, steps[len(steps)-1])
	var out []scaleStep
	created := 0
	for _, n := range steps {
		e.Logf("scale, %s: creating Tasks %d to %d with no controller running", l.name, created, n)
		if err := createScaleTasks(ctx, e, l, created, n); err != nil {
			return nil, err
		}
		created = n
		step, err := measureScaleStep(ctx, e, l, n)
		if err != nil {
			return nil, err
		}
		e.Logf("scale, %s, %d Tasks: start %s (%.0f reconciles), handover %s (%.0f), peak %.1f MiB",
			l.name, n, secs(step.start), step.startReconciles, secs(step.handover), step.handoverReconciles, mib(step.peak))
		out = append(out, step)
	}
	return out, nil
}

// createScaleTasks creates Tasks from..n-1, the i-th in namespace i mod the layout's count.
func createScaleTasks(ctx context.Context, e *harness.Env, l layout, from, n int) error {
	return testenv.Parallel(ctx, n-from, e.Workers, func(ctx context.Context, k int) error {
		i := from + k
		t := harness.NewTask(scaleNamespace(l, i), harness.TaskName("s", i))
		t.Spec.Suspend = true
		if err := e.Client.Create(ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Task %s/%s: %w", t.Namespace, t.Name, err)
		}
		return nil
	})
}

func measureScaleStep(ctx context.Context, e *harness.Env, l layout, n int) (scaleStep, error) {
	step := scaleStep{tasks: n}
	timeout := timeoutFor(n, 2*time.Minute, 20*time.Millisecond)
	began := time.Now()
	leader, err := e.StartOperator(ctx, "scale-leader", true)
	if err != nil {
		return step, err
	}
	if err := waitObserved(ctx, e, l, n, timeout); err != nil {
		return step, err
	}
	if step.startReconciles, err = waitReconciled(ctx, leader, n, timeout); err != nil {
		return step, err
	}
	step.start = time.Since(began)
	if step.peak, _, err = leader.Memory(); err != nil {
		return step, err
	}
	standby, err := e.StartOperator(ctx, "scale-standby", true)
	if err != nil {
		return step, err
	}
	began = time.Now()
	if err := e.StopOperator(leader); err != nil {
		return step, err
	}
	if step.handoverReconciles, err = waitReconciled(ctx, standby, n, timeout); err != nil {
		return step, err
	}
	step.handover = time.Since(began)
	return step, e.StopOperator(standby)
}

// waitObserved waits until every one of the layout's n Tasks has a status for its generation.
func waitObserved(ctx context.Context, e *harness.Env, l layout, n int, timeout time.Duration) error {
	return testenv.Poll(ctx, timeout, time.Second, fmt.Sprintf("%d Tasks observed", n), func(ctx context.Context) (bool, error) {
		observed := 0
		for i := range min(l.namespaces, n) {
			var tasks taskv1.TaskList
			if err := e.Client.List(ctx, &tasks, client.InNamespace(scaleNamespace(l, i))); err != nil {
				return false, err
			}
			for _, t := range tasks.Items {
				if t.Status.ObservedGeneration == t.Generation {
					observed++
				}
			}
		}
		return observed >= n, fmt.Errorf("%d of %d observed", observed, n)
	})
}

// waitReconciled waits until o's Task controller has finished n reconciles and its queue is
// empty, and returns how many it finished.
func waitReconciled(ctx context.Context, o *testenv.Operator, n int, timeout time.Duration) (float64, error) {
	var done float64
	err := testenv.Poll(ctx, timeout, 500*time.Millisecond, fmt.Sprintf("%s to reconcile %d Tasks", o.Name(), n), func(ctx context.Context) (bool, error) {
		samples, err := o.Metrics(ctx)
		if err != nil {
			return false, err
		}
		var depth float64
		done, depth = 0, 0
		for _, s := range samples {
			switch {
			case s.Name == "controller_runtime_reconcile_total" && s.Labels["controller"] == "task":
				done += s.Value
			case s.Name == "workqueue_depth" && s.Labels["name"] == "task":
				depth += s.Value
			}
		}
		return done >= float64(n) && depth == 0, fmt.Errorf("%.0f reconciles, queue depth %.0f", done, depth)
	})
	return done, err
}

func deleteScaleTasks(ctx context.Context, e *harness.Env, l layout, n int) {
	for i := range min(l.namespaces, n) {
		if err := e.DeleteTasks(ctx, scaleNamespace(l, i), timeoutFor(n/l.namespaces, 2*time.Minute, 50*time.Millisecond)); err != nil {
			e.Logf("scale, %s: %v", l.name, err)
		}
	}
}

func reportScale(r *Result, l layout, steps []scaleStep) {
	for _, st := range steps {
		at := fmt.Sprintf("%s, %d Tasks", l.name, st.tasks)
		r.Addf(at+": start to every Task observed", fmt.Sprintf("%.0f reconciles, %.0f/s", st.startReconciles, rate(int(st.startReconciles), st.start)), "%s", secs(st.start))
		r.Addf(at+": leader handover to every Task reconciled", fmt.Sprintf("SIGTERM of the leader (its 2 s drain included); %.0f reconciles, %.0f/s", st.handoverReconciles, rate(int(st.handoverReconciles), st.handover)), "%s", secs(st.handover))
		r.Addf(at+": peak RSS (VmHWM)", "the first leader, once every Task was observed", "%.1f MiB", mib(st.peak))
	}
	first, last := steps[0], steps[len(steps)-1]
	per1k := float64(last.tasks-first.tasks) / 1000
	if per1k <= 0 {
		return
	}
	note := fmt.Sprintf("from %d to %d Tasks", first.tasks, last.tasks)
	r.Addf(l.name+": peak RSS per 1,000 more Tasks", note, "%.2f MiB", mib(last.peak-first.peak)/per1k)
	r.Addf(l.name+": start time per 1,000 more Tasks", note, "%.2f s", (last.start-first.start).Seconds()/per1k)
	r.Addf(l.name+": handover time per 1,000 more Tasks", note, "%.2f s", (last.handover-first.handover).Seconds()/per1k)
}
