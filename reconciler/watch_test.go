package reconciler_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	v1 "example.com/task-operator/apis/v1"
)

// jobSeen is everything a watch saw of one Job over its life.
type jobSeen struct {
	Name, Task string
	UID        types.UID
	// Run and Attempt are the Job's labels; Scheduled its scheduled-time annotation.
	Run, Attempt, Scheduled string
	Created                 time.Time
	// Outcome is "Complete" or "Failed" once a terminal condition was seen.
	Outcome  string
	Finished time.Time
	// Deleted says the Job is gone from the API server.
	Deleted bool
	// Pods are the UIDs of the pods the Job controller created for it.
	Pods map[types.UID]bool
	// PodSucceeded says one of its pods ended Succeeded.
	PodSucceeded bool
	// ReplacedBy is the Job policy Replace deleted it for (its replaced-by annotation).
	ReplacedBy string
}

// runKey names an attempt of a run of a Task: what must never execute twice.
func (j *jobSeen) runKey() string {
	return j.Task + " run=" + j.Run + " scheduled=" + j.Scheduled + " attempt=" + j.Attempt
}

// jobWatch records every Job and pod of a namespace as watch events announce them, so a test
// judges what existed, not what a poll happened to see.
type jobWatch struct {
	mu   sync.Mutex
	jobs map[types.UID]*jobSeen
	// podJob maps pods to the Job that owns them, for pods seen before their Job.
	podJob map[types.UID]types.UID
	// podOK holds the pods seen Succeeded.
	podOK map[types.UID]bool
	stop  context.CancelFunc
}

func (e *env) watchJobs() *jobWatch {
	e.t.Helper()
	return newJobWatch(e.t, e.cfg, e.ns)
}

// newJobWatch watches the Jobs and pods of namespace ns.
func newJobWatch(t *testing.T, cfg *rest.Config, ns string) *jobWatch {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &jobWatch{jobs: map[types.UID]*jobSeen{}, podJob: map[types.UID]types.UID{}, podOK: map[types.UID]bool{}, stop: cancel}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	_, _ = f.Batch().V1().Jobs().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.job(obj, false) },
		UpdateFunc: func(_, obj any) { w.job(obj, false) },
		DeleteFunc: func(obj any) { w.job(obj, true) },
	})
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.pod,
		UpdateFunc: func(_, obj any) { w.pod(obj) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	return w
}

func (w *jobWatch) job(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.jobs[job.UID]
	if j == nil {
		j = &jobSeen{Name: job.Name, UID: job.UID, Created: job.CreationTimestamp.Time, Pods: map[types.UID]bool{}}
		if owner := controllerOf(job.OwnerReferences); owner != "" {
			j.Task = owner
		}
		w.jobs[job.UID] = j
		for pod, owner := range w.podJob {
			if owner == job.UID {
				j.Pods[pod] = true
				j.PodSucceeded = j.PodSucceeded || w.podOK[pod]
			}
		}
	}
	if v, ok := job.Labels[v1.LabelRun]; ok {
		j.Run = v
	}
	if v, ok := job.Labels[v1.LabelAttempt]; ok {
		j.Attempt = v
	}
	if v, ok := job.Annotations[v1.AnnotationScheduledTime]; ok {
		j.Scheduled = v
	}
	if v, ok := job.Annotations[v1.AnnotationReplacedBy]; ok {
		j.ReplacedBy = v
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && j.Outcome == "" {
			j.Outcome, j.Finished = string(c.Type), c.LastTransitionTime.Time
		}
	}
	// Counted as a success by the Job controller before the deletion stopped it from saying
	// Complete.
	if j.Outcome == "" && job.DeletionTimestamp != nil && (hasCondition(job, batchv1.JobSuccessCriteriaMet) ||
		job.Spec.Completions != nil && *job.Spec.Completions > 0 && job.Status.Succeeded >= *job.Spec.Completions) {
		j.Outcome, j.Finished = "Complete", job.DeletionTimestamp.Time
	}
	j.Deleted = j.Deleted || deleted
}

func (w *jobWatch) pod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	var owner types.UID
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "Job" {
			owner = ref.UID
		}
	}
	if owner == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.podJob[pod.UID] = owner
	if pod.Status.Phase == corev1.PodSucceeded {
		w.podOK[pod.UID] = true
	}
	if j := w.jobs[owner]; j != nil {
		j.Pods[pod.UID] = true
		j.PodSucceeded = j.PodSucceeded || w.podOK[pod.UID]
	}
}

func hasCondition(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func controllerOf(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.Kind == v1.Kind {
			return r.Name
		}
	}
	return ""
}

// all returns copies of what was seen, oldest first.
func (w *jobWatch) all() []jobSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]jobSeen, 0, len(w.jobs))
	for _, j := range w.jobs {
		c := *j
		c.Pods = map[types.UID]bool{}
		for k := range j.Pods {
			c.Pods[k] = true
		}
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Name < out[b].Name
	})
	return out
}

// of returns what was seen of task's Jobs.
func (w *jobWatch) of(task string) []jobSeen {
	var out []jobSeen
	for _, j := range w.all() {
		if j.Task == task {
			out = append(out, j)
		}
	}
	return out
}

// names lists the Job names seen for task, oldest first.
func (w *jobWatch) names(task string) []string {
	var out []string
	for _, j := range w.of(task) {
		out = append(out, j.Name)
	}
	return out
}

// checkOnce fails the test for any attempt of any run that had more than one Job, and for any
// Job name that was used by two Jobs: issue #14's first promise.
func (w *jobWatch) checkOnce(t *testing.T) {
	t.Helper()
	byRun := map[string][]string{}
	byName := map[string]int{}
	for _, j := range w.all() {
		byRun[j.runKey()] = append(byRun[j.runKey()], j.Name)
		byName[j.Name]++
	}
	for key, names := range byRun {
		if len(names) > 1 {
			t.Errorf("%s ran %d times: Jobs %v", key, len(names), names)
		}
	}
	for name, n := range byName {
		if n > 1 {
			t.Errorf("Job %s was created %d times", name, n)
		}
	}
}

func (j jobSeen) String() string {
	outcome := j.Outcome
	if outcome == "" {
		outcome = "no outcome"
	}
	s := fmt.Sprintf("%s(attempt %s, %s, deleted %v, %d pods", j.Name, j.Attempt, outcome, j.Deleted, len(j.Pods))
	if j.ReplacedBy != "" {
		s += ", replaced by " + j.ReplacedBy
	}
	return s + ")"
}
