package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/internal/testenv/invariants"
)

// BenchLabel marks every object the benchmarks create.
const BenchLabel = "bench.example.com/run"

// NewTask is a one-shot shell Task at v1 whose pod succeeds about a second after it starts.
func NewTask(ns, name string) *taskv1.Task {
	return &taskv1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{BenchLabel: "true"}},
		Spec: taskv1.TaskSpec{Runner: taskv1.Runner{
			Type:  taskv1.RunnerShell,
			Shell: &taskv1.ShellRunner{Script: "true"},
		}},
	}
}

// TaskName is the name of the i-th benchmark Task.
func TaskName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// CreateTasks creates n Tasks named TaskName(prefix, i) with workers concurrent clients. With
// retry, failed creates are tried again (every 200 ms) until ctx ends, and the number of
// retries is returned; an AlreadyExists answer to a retry counts as success.
func (e *Env) CreateTasks(ctx context.Context, ns, prefix string, n, workers int, retry bool, mutate func(int, *taskv1.Task)) (retries int64, err error) {
	var tries atomic.Int64
	err = testenv.Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		for attempt := 0; ; attempt++ {
			t := NewTask(ns, TaskName(prefix, i))
			if mutate != nil {
				mutate(i, t)
			}
			err := e.Client.Create(ctx, t)
			if err == nil || (attempt > 0 && isAlreadyExists(err)) {
				return nil
			}
			if !retry || ctx.Err() != nil {
				return fmt.Errorf("create task %s/%s: %w", ns, t.Name, err)
			}
			tries.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return tries.Load(), err
}

// Tracker watches the Tasks of a namespace and remembers, per Task, when it was first seen
// started (Running or later) and first seen terminal (Succeeded or Failed).
type Tracker struct {
	mu         sync.Mutex
	start      time.Time
	started    map[string]time.Duration
	terminal   map[string]time.Duration
	failed     map[string]bool
	changed    chan struct{}
	stop       context.CancelFunc
	stoppedRun chan struct{}
}

// Track starts watching the Tasks in ns (at v1). Times are relative to the call.
func (e *Env) Track(ctx context.Context, ns string) *Tracker {
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracker{
		start: time.Now(), started: map[string]time.Duration{}, terminal: map[string]time.Duration{},
		failed: map[string]bool{}, changed: make(chan struct{}, 1), stop: cancel, stoppedRun: make(chan struct{}),
	}
	res := e.Dyn.Resource(taskv1.ResourceAt("v1")).Namespace(ns)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}
	_, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { t.observe(obj) },
			UpdateFunc: func(_, obj any) { t.observe(obj) },
		},
	})
	go func() { defer close(t.stoppedRun); ctrl.RunWithContext(ctx) }()
	return t
}

func (t *Tracker) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	startTime, _, _ := unstructured.NestedString(u.Object, "status", "startTime")
	now := time.Since(t.start)
	t.mu.Lock()
	defer t.mu.Unlock()
	name := u.GetName()
	isStarted := startTime != "" || phase == string(taskv1.PhaseRunning) || phase == string(taskv1.PhaseRetrying) ||
		phase == string(taskv1.PhaseSucceeded) || phase == string(taskv1.PhaseFailed)
	if _, seen := t.started[name]; isStarted && !seen {
		t.started[name] = now
	}
	if phase == string(taskv1.PhaseSucceeded) || phase == string(taskv1.PhaseFailed) {
		if _, seen := t.terminal[name]; !seen {
			t.terminal[name] = now
		}
		t.failed[name] = phase == string(taskv1.PhaseFailed)
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Counts returns how many Tasks were seen started, terminal and Failed.
func (t *Tracker) Counts() (started, terminal, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.failed {
		if f {
			failed++
		}
	}
	return len(t.started), len(t.terminal), failed
}

// Last returns when the last of the started and of the terminal Tasks got there.
func (t *Tracker) Last() (started, terminal time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.started {
		started = max(started, d)
	}
	for _, d := range t.terminal {
		terminal = max(terminal, d)
	}
	return started, terminal
}

// Percentile returns the p-th percentile (0..100) of the time to terminal.
func (t *Tracker) Percentile(p float64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := make([]time.Duration, 0, len(t.terminal))
	for _, d := range t.terminal {
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(float64(len(ds))*p/100))]
}

// Started returns when the first and the last of the started Tasks got there.
func (t *Tracker) Started() (first, last time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.started {
		if first == 0 || d < first {
			first = d
		}
		last = max(last, d)
	}
	return first, last
}

// Since is how long after the tracker began at is.
func (t *Tracker) Since(at time.Time) time.Duration { return at.Sub(t.start) }

// WaitStarted waits until n Tasks were seen started, or timeout.
func (t *Tracker) WaitStarted(ctx context.Context, n int, timeout time.Duration) error {
	return t.wait(ctx, timeout, func(started, _ int) bool { return started >= n }, n)
}

// WaitTerminal waits until n Tasks were seen terminal, or timeout.
func (t *Tracker) WaitTerminal(ctx context.Context, n int, timeout time.Duration) error {
	return t.wait(ctx, timeout, func(_, terminal int) bool { return terminal >= n }, n)
}

func (t *Tracker) wait(ctx context.Context, timeout time.Duration, done func(started, terminal int) bool, n int) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		started, term, _ := t.Counts()
		if done(started, term) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			s, term, _ := t.Counts()
			return fmt.Errorf("after %s: %d of %d Tasks started, %d terminal", timeout, s, n, term)
		case <-t.changed:
		case <-time.After(time.Second):
		}
	}
}

// Stop ends the watch.
func (t *Tracker) Stop() { t.stop(); <-t.stoppedRun }

// DeleteTasks deletes every Task in ns and waits until the operator has let them go. The
// Tasks are deleted one by one (16 at a time): a single DELETE of the collection runs every
// deletion through the admission webhooks within one request's timeout, which thousands of
// Tasks exceed.
func (e *Env) DeleteTasks(ctx context.Context, ns string, timeout time.Duration) error {
	list := func() ([]metav1.PartialObjectMetadata, error) {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(taskv1.GroupVersion.WithKind("TaskList"))
		err := e.Client.List(ctx, &l, client.InNamespace(ns))
		return l.Items, err
	}
	items, err := list()
	if err != nil {
		return err
	}
	err = testenv.Parallel(ctx, len(items), 16, func(ctx context.Context, i int) error {
		t := &taskv1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: items[i].Name}}
		if err := e.Client.Delete(ctx, t); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete task %s/%s: %w", ns, t.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return testenv.Poll(ctx, timeout, 500*time.Millisecond, fmt.Sprintf("the Tasks in %s to be gone", ns), func(context.Context) (bool, error) {
		items, err := list()
		if err != nil {
			return false, err
		}
		return len(items) == 0, fmt.Errorf("%d Tasks left", len(items))
	})
}

// WaitNoJobs waits until ns holds no Job.
func (e *Env) WaitNoJobs(ctx context.Context, ns string, timeout time.Duration) error {
	return testenv.Poll(ctx, timeout, 500*time.Millisecond, "the Jobs in "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		var jobs metav1.PartialObjectMetadataList
		jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
		if err := e.Client.List(ctx, &jobs, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, err
		}
		return len(jobs.Items) == 0, nil
	})
}

// Settle waits up to timeout until every Task in ns is Succeeded or Failed and nothing holds a
// finalizer: the operator releases its finalizers just after it writes a Task's final status,
// so a check at once could count one as left. What is still open at the timeout is Check's to
// count, so only the end of ctx is an error.
func (e *Env) Settle(ctx context.Context, ns string, timeout time.Duration) error {
	err := testenv.Poll(ctx, timeout, 500*time.Millisecond, "the Tasks in "+ns+" to settle", func(ctx context.Context) (bool, error) {
		in, err := invariants.Collect(ctx, e.Client, ns)
		if err != nil {
			return false, err
		}
		open := invariants.Unsettled(in)
		return len(open) == 0, fmt.Errorf("%d open, first %v", len(open), open[:min(3, len(open))])
	})
	if err != nil {
		e.Logf("%v", err)
	}
	return ctx.Err()
}

// Check judges the Tasks and Jobs in ns with the invariant checker TestChaos uses too.
func (e *Env) Check(ctx context.Context, ns string, opts invariants.Options) (*invariants.Report, error) {
	in, err := invariants.Collect(ctx, e.Client, ns)
	if err != nil {
		return nil, err
	}
	return invariants.Check(in, opts), nil
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
