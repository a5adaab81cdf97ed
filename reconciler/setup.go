package reconciler

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// SetupWithManager registers the Task controller with mgr. The manager's scheme must know
// example.com/v1 and batch/v1, and its cache must be built by NewCache with CacheOptions.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	opts = opts.withDefaults()
	jobs, ok := mgr.GetCache().(*jobCache)
	if !ok {
		return fmt.Errorf("set up task controller: the manager's cache is a %T; build it with reconciler.NewCache (manager.Options.NewCache)", mgr.GetCache())
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  newBudgetedRecorder(mgr.GetEventRecorder(eventReporter), opts.NormalEventQPS, opts.NormalEventBurst),
		opts:      opts,
		expect:    newExpectations(opts.expectationTimeout),
		kueue:     &kueueAPI{mapper: mgr.GetRESTMapper(), clock: opts.Clock.Now},
		waiters:   &nameWaiters{},
	}
	if err := registerMetrics(mgr); err != nil {
		return fmt.Errorf("register task metrics: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1.Task{}).
		WatchesRawSource(&jobSource{cache: jobs, mapJob: r.tasksOfJob, changed: jobChanged})
	// With Kueue installed, why a queued Job waits is read from its Workload. Installed later,
	// queued Tasks run all the same; the reasons come with the operator's next start.
	if gvk, ok := workloadKind(mgr.GetRESTMapper()); ok {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), newWorkload(gvk), workloadJobIndex, indexWorkloadJob); err != nil {
			return fmt.Errorf("index workloads: %w", err)
		}
		r.kueue.workload, r.kueue.cache = gvk, mgr.GetCache()
		b = b.Watches(newWorkload(gvk), handler.EnqueueRequestsFromMapFunc(taskOfWorkload(mgr.GetCache())),
			builder.WithPredicates(workloadChanged()))
	}
	err := b.
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             newRateLimiter(opts),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up task controller: %w", err)
	}
	return nil
}

// Overall rate of requeues after failed reconciles, controller-runtime's default bucket.
const (
	overallQPS   = 10
	overallBurst = 100
)

// newRateLimiter spaces the retries of failed reconciles as controller-runtime's default does:
// the larger of a per-Task exponential backoff (opts' base and max delay) and an overall token
// bucket (10 per second, bursts of 100), so a storm of failing Tasks cannot flood the API server.
func newRateLimiter(opts Options) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RateLimiterBaseDelay, opts.RateLimiterMaxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(overallQPS), overallBurst)},
	)
}

// jobChanged says whether a Job update is one the controller acts on — a terminal condition,
// suspension, deletion, its finalizer, labels, its controller — rather than one of the many
// status updates in between (pod counts).
func jobChanged(oldJob, newJob *batchv1.Job) bool {
	oldRef, newRef := metav1.GetControllerOf(oldJob), metav1.GetControllerOf(newJob)
	if (oldRef == nil) != (newRef == nil) || (oldRef != nil && oldRef.UID != newRef.UID) {
		return true
	}
	owner := ""
	if newRef != nil {
		owner = newRef.Name
	}
	return observeJob(owner, oldJob) != observeJob(owner, newJob)
}
