package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// Which Jobs are a Task's: those it controls, those that lost their ownerReference but still
// name its UID (taken back), and none other. A Job of a run's name that is someone else's
// blocks that run until it goes, and the Task says so.

// lostOwner says job has no controller but was created for task: its ownerReference was
// removed by hand or by a delete with --cascade=orphan. It must bear the name of one of the
// Task's runs, and be the Job the stored status recorded under that name (by UID: how a Job of
// an earlier release, which has no AnnotationTaskUID, is known) or, where the status recorded
// none, name the Task's UID in AnnotationTaskUID. A copy of a Job saved without its owner
// reference is neither.
func lostOwner(task *v1.Task, job *batchv1.Job) bool {
	if metav1.GetControllerOf(job) != nil {
		return false
	}
	if _, ok := runFromAnyName(task.Name, job.Name); !ok {
		return false
	}
	if uid := recordedUID(task, job.Name); uid != "" {
		return uid == job.UID
	}
	return job.Annotations[v1.AnnotationTaskUID] == string(task.UID)
}

// ownedByTaskNamed says job's controller is a Task of this API group called name (any
// incarnation): a kind called Task in another group is someone else's.
func ownedByTaskNamed(job metav1.Object, name string) bool {
	ref := metav1.GetControllerOf(job)
	return ref != nil && ref.Kind == v1.Kind && groupOf(ref.APIVersion) == v1.Group && ref.Name == name
}

// recordedUID is the UID the stored status recorded for the Job called name, if any.
func recordedUID(task *v1.Task, name string) types.UID {
	if rec := task.Status.CurrentRun; rec != nil && rec.Job.Name == name && rec.Job.UID != "" {
		return rec.Job.UID
	}
	for _, ref := range task.Status.ActiveJobs {
		if ref.Name == name && ref.UID != "" {
			return ref.UID
		}
	}
	return ""
}

// adopt gives a Job that lost its owner back to its Task, as the Job controller adopts its
// orphaned pods: its outcome is the Task's, and without the owner the garbage collector would
// not delete it with the Task. The optimistic lock keeps it from stealing a Job another
// controller adopted meanwhile.
func (r *Reconciler) adopt(ctx context.Context, task *v1.Task, job *batchv1.Job) error {
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	job.OwnerReferences = append(job.OwnerReferences, ownerRef(task))
	if err := r.client.Patch(ctx, job, patch); err != nil {
		return fmt.Errorf("take back job %s, which lost its owner reference: %w", job.Name, err)
	}
	return nil
}

// errNameTaken says the run's Job cannot be created: a Job of its name exists and is not the
// Task's. Only a person can clear that, so it is reported on the Task rather than retried.
type errNameTaken struct {
	job   string
	owner string // who the Job belongs to, for the message
}

func (e *errNameTaken) Error() string {
	return fmt.Sprintf("a Job named %s already exists and %s: the run cannot start until it is deleted", e.job, e.owner)
}

func nameTaken(job *batchv1.Job) *errNameTaken {
	owner := "has no owner"
	if ref := metav1.GetControllerOf(job); ref != nil {
		owner = fmt.Sprintf("belongs to %s %s", ref.Kind, ref.Name)
	}
	return &errNameTaken{job: job.Name, owner: owner}
}

// nameTakenPollInterval is how often a Task whose run's Job name is taken looks again: a Job
// without the operator's label (one a person made) is not in the cache, so its deletion sends
// no event.
const nameTakenPollInterval = 10 * time.Second

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// nameWaiters remembers which Task waits for which Job name to be freed, so that the Job's
// deletion wakes it at once rather than after a backoff. It is in memory only: after a restart
// every Task is reconciled, and one still blocked registers again.
type nameWaiters struct {
	mu    sync.Mutex
	tasks map[types.NamespacedName]types.NamespacedName // Job → Task
}

func (w *nameWaiters) wait(job, task types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tasks == nil {
		w.tasks = map[types.NamespacedName]types.NamespacedName{}
	}
	w.tasks[job] = task
}

// waiter is the Task waiting for job's name, if any; it is forgotten, and registers again if
// the name is still taken when it runs.
func (w *nameWaiters) waiter(job types.NamespacedName) (types.NamespacedName, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	task, ok := w.tasks[job]
	delete(w.tasks, job)
	return task, ok
}

// labelledTask is the name of the Task a Job's label names: AnnotationTaskName where the label
// is a cut of it (an annotation that does not cut to the label is not believed), else the label.
func labelledTask(job client.Object) string {
	label := job.GetLabels()[v1.LabelTaskName]
	if name := job.GetAnnotations()[v1.AnnotationTaskName]; name != "" && label != "" && labelValue(name) == label {
		return name
	}
	return label
}

// tasksOfJob maps a Job event to the Tasks it concerns: its controller, a Task waiting for
// its name, and, for a Job that lost its owner while holding FinalizerRunOutcome, the Task its
// label names (the Task takes it back or, gone, releases it). A label cut and hashed for a name
// over 63 characters names no Task: AnnotationTaskName does. A Job of an earlier release
// without it is handled when its Task is next reconciled, and kept if that Task is gone.
func (r *Reconciler) tasksOfJob(_ context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	key := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}
	}
	ref := metav1.GetControllerOf(obj)
	switch {
	case ref != nil && ownedByTaskNamed(obj, ref.Name):
		out = append(out, key(ref.Name))
	case ref == nil && controllerutil.ContainsFinalizer(obj, v1.FinalizerRunOutcome):
		if name := labelledTask(obj); name != "" {
			out = append(out, key(name))
		}
	}
	if task, ok := r.waiters.waiter(client.ObjectKeyFromObject(obj)); ok {
		out = append(out, reconcile.Request{NamespacedName: task})
	}
	return out
}
