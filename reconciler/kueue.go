package reconciler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// Queued Tasks (spec.queueName) go through Kueue (sigs.k8s.io/kueue). Kueue knows batch/v1 Jobs:
// a Job created suspended with its queue label gets a Workload, waits in the LocalQueue's
// ClusterQueue for quota and is unsuspended once admitted; a preempted Job is suspended again
// and waits anew. The operator only labels and creates; it never unsuspends a queued Job, and
// reads why a Job waits from its Workload's conditions (a watch on Workloads, set up when
// Kueue's API is served at start-up).
//
// The main module does not depend on Kueue's Go module (its Kubernetes libraries are older):
// Workloads are read as unstructured objects, and only their conditions and owner.

// Kueue's labels on a Job, and its names for Workloads.
const (
	kueueQueueLabel    = "kueue.x-k8s.io/queue-name"
	kueuePriorityLabel = "kueue.x-k8s.io/priority-class"
	kueueGroup         = "kueue.x-k8s.io"
	kueueLabelPrefix   = "kueue.x-k8s.io/"

	// Workload condition types.
	wlQuotaReserved = "QuotaReserved"
	wlAdmitted      = "Admitted"
	wlEvicted       = "Evicted"

	// workloadJobIndex indexes cached Workloads by the name of the Job that owns them.
	workloadJobIndex = "task.example.com/workload-job"
	// kueueRecheckInterval is how often a Task waiting for Kueue's API checks again.
	kueueRecheckInterval = 30 * time.Second
)

// kueueVersions are the Workload API versions the operator reads, preferred first.
var kueueVersions = []string{"v1beta2", "v1beta1"}

// kueueAPI knows whether Kueue's API is served, asking the API server's discovery (through the
// manager's REST mapper) at most every kueueRecheckInterval until it is.
type kueueAPI struct {
	mapper meta.RESTMapper
	clock  func() time.Time

	mu      sync.Mutex
	served  bool
	checked time.Time
	// workload is the Workload kind read from the cache; empty when no watch was set up.
	workload schema.GroupVersionKind
	cache    client.Reader
}

// servedNow says whether LocalQueues and Workloads are served.
func (k *kueueAPI) servedNow() bool {
	if k == nil || k.mapper == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock()
	if k.served || (!k.checked.IsZero() && now.Sub(k.checked) < kueueRecheckInterval) {
		return k.served
	}
	k.checked = now
	_, err := k.mapper.RESTMapping(schema.GroupKind{Group: kueueGroup, Kind: "LocalQueue"})
	k.served = err == nil
	return k.served
}

// workloadKind is the served Workload kind, if any.
func workloadKind(mapper meta.RESTMapper) (schema.GroupVersionKind, bool) {
	m, err := mapper.RESTMapping(schema.GroupKind{Group: kueueGroup, Kind: "Workload"}, kueueVersions...)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return m.GroupVersionKind, true
}

func newWorkload(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// workloadOwnerJob is the name of the Job that controls a Workload, or "".
func workloadOwnerJob(obj client.Object) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "Job" && strings.HasPrefix(ref.APIVersion, batchv1.GroupName+"/") && ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

// indexWorkloadJob is the field index function of workloadJobIndex.
func indexWorkloadJob(obj client.Object) []string {
	if name := workloadOwnerJob(obj); name != "" {
		return []string{name}
	}
	return nil
}

// taskOfWorkload maps a Workload to the Task owning its Job, through the Job in the cache.
func taskOfWorkload(c client.Reader) handler.TypedMapFunc[client.Object, reconcile.Request] {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := workloadOwnerJob(obj)
		if name == "" {
			return nil
		}
		job := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, job); err != nil {
			return nil // not a Task's Job (only those are cached), or gone
		}
		owner := metav1.GetControllerOf(job)
		if owner == nil || owner.Kind != v1.Kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: job.Namespace, Name: owner.Name}}}
	}
}

// workloadChanged lets through the Workload updates that change why its Job waits.
func workloadChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldWl, ok1 := e.ObjectOld.(*unstructured.Unstructured)
		newWl, ok2 := e.ObjectNew.(*unstructured.Unstructured)
		if !ok1 || !ok2 {
			return true
		}
		return waitReason(oldWl) != waitReason(newWl)
	}}
}

// queueWait is why a queued Job waits, in Kueue's words.
type queueWait struct{ reason, message string }

// waitReason reads a Workload's conditions: evicted (Kueue's reason: Preempted, ...), admitted
// (its Job is about to start), quota reserved but admission checks pending, or no quota yet
// (Kueue's reason: Pending, Inadmissible, ...).
func waitReason(wl *unstructured.Unstructured) queueWait {
	conds := workloadConditions(wl)
	quota, admitted, evicted := conds[wlQuotaReserved], conds[wlAdmitted], conds[wlEvicted]
	switch {
	case evicted.Status == metav1.ConditionTrue && quota.Status == metav1.ConditionFalse:
		return queueWait{evicted.Reason, evicted.Message + "; " + quota.Message}
	case evicted.Status == metav1.ConditionTrue:
		// Evicted, its Job being stopped: quota and admission are released next.
		return queueWait{evicted.Reason, evicted.Message}
	case admitted.Status == metav1.ConditionTrue:
		return queueWait{v1.ReasonAdmitted, "admitted by Kueue; the Job is starting"}
	case quota.Status == metav1.ConditionTrue:
		return queueWait{orDefault(admitted.Reason, "AdmissionChecksPending"), orDefault(admitted.Message, quota.Message)}
	case quota.Status == metav1.ConditionFalse:
		return queueWait{quota.Reason, quota.Message}
	default:
		return queueWait{v1.ReasonQueuePending, "waiting for Kueue to consider the Workload " + wl.GetName()}
	}
}

func workloadConditions(wl *unstructured.Unstructured) map[string]metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	out := map[string]metav1.Condition{}
	for _, c := range raw {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out[str("type")] = metav1.Condition{
			Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message"),
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// explainWaiting fills in why each queued Job that waits does so, from its Workload when the
// cache holds Workloads, else from the Job's own Suspended condition.
func (r *Reconciler) explainWaiting(ctx context.Context, s *scope) error {
	for i := range s.jobs {
		j := &s.jobs[i]
		if !j.waiting() {
			continue
		}
		w, err := r.workloadWait(ctx, s.task, j)
		if err != nil {
			return err
		}
		j.QueueReason, j.QueueMessage = w.reason, w.message
	}
	return nil
}

func (r *Reconciler) workloadWait(ctx context.Context, task *v1.Task, j *observedJob) (queueWait, error) {
	namespace := task.Namespace
	fallback := queueWait{v1.ReasonQueuePending, fmt.Sprintf("Job %s is suspended in LocalQueue %s until Kueue admits it", j.Name, j.Queue)}
	k := r.kueue
	if k == nil || k.cache == nil || k.workload.Empty() {
		return fallback, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.workload.GroupVersion().WithKind(k.workload.Kind + "List"))
	if err := k.cache.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{workloadJobIndex: j.Name}); err != nil {
		return queueWait{}, fmt.Errorf("list workloads of job %s: %w", j.Name, err)
	}
	for i := range list.Items {
		wl := &list.Items[i]
		for _, ref := range wl.GetOwnerReferences() {
			if ref.UID == j.UID {
				return waitReason(wl), nil
			}
		}
	}
	fallback.message = fmt.Sprintf("Job %s is suspended in LocalQueue %s; Kueue has not made its Workload yet (is Kueue running?%s kubectl describe job %s shows Kueue's events)",
		j.Name, j.Queue, priorityClassHint(task), j.Name)
	return fallback, nil
}

// priorityClassHint asks whether the Task's WorkloadPriorityClass exists: Kueue makes no
// Workload for a Job whose class it cannot find.
func priorityClassHint(task *v1.Task) string {
	if task.Spec.PriorityClassName == "" {
		return ""
	}
	return fmt.Sprintf(" Does WorkloadPriorityClass %s exist?", task.Spec.PriorityClassName)
}

// queueLabels puts the Task's queue and priority on a Job.
func queueLabels(task *v1.Task, labels map[string]string) {
	if task.Spec.QueueName == "" {
		return
	}
	labels[kueueQueueLabel] = task.Spec.QueueName
	if task.Spec.PriorityClassName != "" {
		labels[kueuePriorityLabel] = task.Spec.PriorityClassName
	}
}
