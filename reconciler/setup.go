package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// SetupWithManager registers the Task controller with mgr. The manager's scheme must know
// example.com/v1 and batch/v1, and its cache should be built with CacheOptions.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	opts = opts.withDefaults()
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(eventReporter),
		opts:      opts,
		expect:    newExpectations(),
	}
	if err := registerMetrics(mgr); err != nil {
		return fmt.Errorf("register task metrics: %w", err)
	}
	// Job events reach the owning Task as Owns(&batchv1.Job{}) would send them; the handler
	// also remembers the final state of finished Jobs as they are deleted (see jobEvents).
	jobs := jobEvents{
		EventHandler: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1.Task{}, handler.OnlyControllerOwner()),
		expect:       r.expect,
		now:          opts.Clock.Now,
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1.Task{}).
		Watches(&batchv1.Job{}, jobs, builder.WithPredicates(jobChanged())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](
				opts.RateLimiterBaseDelay, opts.RateLimiterMaxDelay),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up task controller: %w", err)
	}
	return nil
}

// CacheOptions are the cache settings the controller needs; merge them into the manager's
// options. Only Jobs labelled with v1.LabelTaskName are cached (not every Job in the cluster), and
// managed fields are stripped from every cached object.
func CacheOptions() cache.Options {
	hasTask, err := labels.NewRequirement(v1.LabelTaskName, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("label requirement on %s: %v", v1.LabelTaskName, err)) // a constant: cannot fail
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: labels.NewSelector().Add(*hasTask)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// jobEvents enqueues a Job's controlling Task. On a Job's deletion it first remembers the Job's
// final state if it had finished: with a short TTL the Job can be gone from the cache before
// the Task is reconciled, and its outcome with it. Recording before enqueuing (in the same
// handler) guarantees the reconcile sees it.
type jobEvents struct {
	handler.EventHandler
	expect *expectations
	now    func() time.Time
}

func (h jobEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if job, ok := e.Object.(*batchv1.Job); ok {
		if owner := metav1.GetControllerOf(job); owner != nil && owner.Kind == "Task" {
			if o := observeJob(job); o.State.finished() {
				o.Gone = true
				h.expect.rememberFinished(owner.UID, o, h.now())
			}
		}
	}
	h.EventHandler.Delete(ctx, e, q)
}

// jobChanged lets through the Job updates the controller acts on — a terminal condition,
// suspension, deletion, labels — and drops the many status updates in between (pod counts).
func jobChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldJob, ok1 := e.ObjectOld.(*batchv1.Job)
		newJob, ok2 := e.ObjectNew.(*batchv1.Job)
		if !ok1 || !ok2 {
			return true
		}
		return observeJob(oldJob) != observeJob(newJob)
	}}
}
