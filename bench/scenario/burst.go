package scenario

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/reconciler"
)

const (
	baselineNS = "bench-baseline"
	burstNS    = "bench-burst"
	// benchHolder holds the operator's leader Lease while the bench wants it not to reconcile.
	benchHolder = "bench"
)

// startBurst compares the operator's way from n waiting one-shot Tasks to all Running with a
// bare client doing the writes that takes at the least, n Job creates and n Task status
// patches, with as many workers as the operator reconciles Tasks at once and no client rate
// limit. Both start from Tasks that exist already: the bench holds the operator's leader Lease
// while it creates them, so the operator (a replica with leader election) serves its webhooks
// but does not reconcile, and lets it go to start the operator's run. Every pod hangs (stays
// Running), so nothing after Running mixes into the operator's write count.
func startBurst(ctx context.Context, e *harness.Env, n int, r *Result) (err error) {
	workers := e.OperatorIntFlag("max-concurrent-reconciles", reconciler.DefaultMaxConcurrentReconciles)
	for _, ns := range []string{baselineNS, burstNS} {
		if err := e.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if err := holdLease(ctx, e); err != nil {
		return err
	}
	defer func() {
		// What the next measurements expect: one replica without leader election (the one with
		// it hands the Lease back as it stops), and no Lease held by the bench.
		if rerr := e.EnsureOperators(ctx, 1, false, false); rerr != nil && err == nil {
			err = rerr
		}
		if rerr := releaseLease(ctx, e); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err := e.EnsureOperators(ctx, 1, true, false); err != nil {
		return err
	}

	baseline, err := bareClientRun(ctx, e, n, workers)
	if err != nil {
		return err
	}
	r.Addf("start burst: bare client", fmt.Sprintf("%d Job creates + %d Task status patches, %d workers (the operator's concurrent reconciles), no client rate limit", n, n, workers), "%s", secs(baseline))

	tr := e.Track(ctx, burstNS)
	defer tr.Stop()
	e.Logf("creating %d Tasks while the operator does not lead", n)
	if _, err := e.CreateTasks(ctx, burstNS, "s", n, e.Workers, false, func(_ int, t *taskv1.Task) {
		t.Labels[testenv.OutcomeLabel] = testenv.OutcomeHang
	}); err != nil {
		return err
	}
	op := e.Operators()[0]
	before, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	e.Logf("releasing the leader Lease")
	released := time.Now()
	if err := releaseLease(ctx, e); err != nil {
		return err
	}
	waitErr := tr.WaitStarted(ctx, n, timeoutFor(n, 2*time.Minute, 200*time.Millisecond))
	first, last := tr.Started()
	started, _, _ := tr.Counts()
	fromRelease := last - tr.Since(released)
	r.Addf("start burst: operator", fmt.Sprintf("%d/%d Tasks Running, from the Lease's release (the replica asks for it every 2 s) to the last", started, n), "%s", secs(fromRelease))
	r.Addf("start burst: operator, first to last Running", "its own time, without the wait for the Lease", "%s", secs(last-first))
	if waitErr != nil {
		return waitErr
	}
	r.Addf("start burst: operator ÷ bare client", "first to last Running ÷ the bare client's time; #13 asks ≤ 1.5", "%.2f", (last-first).Seconds()/baseline.Seconds())

	time.Sleep(3 * time.Second) // Events are sent asynchronously
	after, err := countWrites(ctx, e, op)
	if err != nil {
		return err
	}
	written := after.since(before).operator
	delete(written, "PUT") // the leader Lease's renewals: the operator PUTs no Task, Job or Event
	events, eventWrites, byType, err := harness.EventWrites(ctx, e.Client, burstNS)
	if err != nil {
		return err
	}
	r.Addf("writes per Task to Running", fmt.Sprintf("operator's rest_client_requests_total %s, less its %d Event writes, ÷ %d (PUT left out: the Lease's renewals; 2 one-off writes of taking the lead, the Lease's creation and its Event, are in)", methods(written), eventWrites, n),
		"%.2f", (harness.Sum(written)-float64(eventWrites))/float64(n))
	dropped, err := harness.OperatorCounter(ctx, op, "taskoperator_events_dropped_total")
	if err != nil {
		return err
	}
	r.Addf("Event writes per Task to Running", fmt.Sprintf("%d Events (%v); Normal Events dropped by the budget: %.0f", events, byType, dropped), "%.2f", float64(eventWrites)/float64(n))

	e.Logf("deleting the start-burst Tasks")
	return e.DeleteTasks(ctx, burstNS, timeoutFor(n, 2*time.Minute, 200*time.Millisecond))
}

// bareClientRun creates n suspended Tasks (untimed; the operator does not lead, so nobody else
// writes them), then times the bare client's Job creates and status patches, and deletes it all.
func bareClientRun(ctx context.Context, e *harness.Env, n, workers int) (time.Duration, error) {
	e.Logf("bare client: creating %d suspended Tasks", n)
	tasks := make([]*taskv1.Task, n)
	err := testenv.Parallel(ctx, n, e.Workers, func(ctx context.Context, i int) error {
		t := harness.NewTask(baselineNS, harness.TaskName("b", i))
		t.Spec.Suspend = true
		tasks[i] = t
		return e.Client.Create(ctx, t)
	})
	if err != nil {
		return 0, fmt.Errorf("bare client tasks: %w", err)
	}
	cfg := rest.CopyConfig(e.Cfg)
	cfg.QPS, cfg.Burst = -1, 0
	bare, err := client.New(cfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		return 0, err
	}
	e.Logf("bare client: %d Jobs and status patches, %d workers", n, workers)
	began := time.Now()
	err = testenv.Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		t := tasks[i]
		job := bareJob(t)
		if err := bare.Create(ctx, job); err != nil {
			return fmt.Errorf("create job %s: %w", job.Name, err)
		}
		orig := t.DeepCopy()
		t.Status = runningStatus(t, job)
		return bare.Status().Patch(ctx, t, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	took := time.Since(began)
	if err != nil {
		return took, fmt.Errorf("bare client: %w", err)
	}
	// The Tasks hold no finalizer (suspended at creation); their Jobs and pods go with them.
	if err := e.DeleteTasks(ctx, baselineNS, timeoutFor(n, 2*time.Minute, 100*time.Millisecond)); err != nil {
		return took, err
	}
	err = testenv.Poll(ctx, timeoutFor(n, 2*time.Minute, 200*time.Millisecond), 500*time.Millisecond, "the bare client's Jobs and pods to go", func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		var pods corev1.PodList
		if err := e.Client.List(ctx, &jobs, client.InNamespace(baselineNS), client.Limit(1)); err != nil {
			return false, err
		}
		if err := e.Client.List(ctx, &pods, client.InNamespace(baselineNS), client.Limit(1)); err != nil {
			return false, err
		}
		return len(jobs.Items)+len(pods.Items) == 0, nil
	})
	return took, err
}

// bareJob is the Job the operator would make for t's first attempt, its pod hanging, without the
// operator's labels (its cache and watch would take it in) and finalizer (nobody would remove it).
func bareJob(t *taskv1.Task) *batchv1.Job {
	labels := map[string]string{harness.BenchLabel: "true", testenv.OutcomeLabel: testenv.OutcomeHang}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: t.Namespace, Name: t.Name + "-0-1", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: taskv1.GroupVersion.String(), Kind: taskv1.Kind, Name: t.Name, UID: t.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr[int32](1), Completions: ptr[int32](1), BackoffLimit: ptr[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "task", Image: "busybox:1.37", Command: []string{"sh", "-c", "true"}}},
				},
			},
		},
	}
}

// runningStatus is about the status the operator writes when it started t's first attempt.
func runningStatus(t *taskv1.Task, job *batchv1.Job) taskv1.TaskStatus {
	now := metav1.Now()
	ref := taskv1.JobReference{Name: job.Name, UID: job.UID}
	st := taskv1.TaskStatus{
		ObservedGeneration: t.Generation, Phase: taskv1.PhaseRunning, LastPhaseTransitionTime: &now,
		Attempts: 1, ActiveJobs: []taskv1.JobReference{ref}, LastJob: &ref, StartTime: &now,
		CurrentRun: &taskv1.RunRecord{Attempt: 1, Job: ref, Outcome: taskv1.RunActive},
	}
	for _, c := range []struct {
		typ    string
		status metav1.ConditionStatus
	}{{"Ready", metav1.ConditionFalse}, {"Progressing", metav1.ConditionTrue}, {"Succeeded", metav1.ConditionFalse},
		{"Failed", metav1.ConditionFalse}, {"Reconciling", metav1.ConditionTrue}, {"Stalled", metav1.ConditionFalse}} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c.typ, Status: c.status, Reason: "Running",
			Message: "Job " + job.Name + " is running", ObservedGeneration: t.Generation})
	}
	return st
}

// holdLease makes the bench the holder of the operator's leader Lease, for an hour.
func holdLease(ctx context.Context, e *harness.Env) error {
	if err := releaseLease(ctx, e); err != nil {
		return err
	}
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr(benchHolder), LeaseDurationSeconds: ptr[int32](3600), AcquireTime: &now, RenewTime: &now,
		},
	}
	if err := e.Client.Create(ctx, lease); err != nil {
		return fmt.Errorf("hold the leader Lease: %w", err)
	}
	return nil
}

// releaseLease deletes the leader Lease if the bench holds it (or nobody does).
func releaseLease(ctx context.Context, e *harness.Env) error {
	lease := &coordinationv1.Lease{}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: leaseName}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the leader Lease: %w", err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != benchHolder && *h != "" && leaseLive(lease) {
		return fmt.Errorf("the leader Lease is held by %s", *h)
	}
	err = e.Client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release the leader Lease: %w", err)
	}
	return nil
}

func leaseLive(l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return time.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}
