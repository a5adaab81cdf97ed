package reconciler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "example.com/task-operator/apis/v1"
)

// TestRateLimiter is issue #14 item 12: the per-Task exponential backoff is kept, and so is
// controller-runtime's overall bucket of 10 per second with bursts of 100.
func TestRateLimiter(t *testing.T) {
	rl := newRateLimiter(Options{}.withDefaults())
	req := func(i int) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("t%d", i)}}
	}

	// One Task failing again and again: 50ms, 100ms, 200ms, ... up to 1000s.
	if d := rl.When(req(0)); d != DefaultRateLimiterBaseDelay {
		t.Errorf("first failure waits %v, want %v", d, DefaultRateLimiterBaseDelay)
	}
	if d := rl.When(req(0)); d != 2*DefaultRateLimiterBaseDelay {
		t.Errorf("second failure waits %v, want %v", d, 2*DefaultRateLimiterBaseDelay)
	}
	for range 40 {
		rl.When(req(0))
	}
	if d := rl.When(req(0)); d != DefaultRateLimiterMaxDelay {
		t.Errorf("after many failures: %v, want the cap %v", d, DefaultRateLimiterMaxDelay)
	}
	rl.Forget(req(0))
	if d := rl.When(req(0)); d > time.Second {
		t.Errorf("forgotten Task waits %v, want a fresh start", d)
	}

	// Many Tasks failing once each: past the burst, the overall bucket spaces them at 10/s, so
	// the 200th waits about 10s although its own backoff is 50ms.
	var last time.Duration
	for i := 1; i <= 200; i++ {
		last = rl.When(req(i))
	}
	if last < 5*time.Second {
		t.Errorf("the 200th distinct failure waits %v: the overall 10 qps bucket is missing", last)
	}
}

// TestCachedJobKeepsWhatTheControllerReads is issue #13 goal 5: a cached Job loses its pod
// template, managed fields and other tools' annotations, and keeps every field observeJob reads.
func TestCachedJobKeepsWhatTheControllerReads(t *testing.T) {
	task := &v1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", UID: "task-uid"}}
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	deleted := metav1.NewTime(started.Add(time.Minute))
	for name, edit := range map[string]func(*batchv1.Job){
		"succeeded": func(j *batchv1.Job) {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &deleted
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: deleted}}
		},
		"failed": func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "too many"}}
		},
		"suspended in a queue": func(j *batchv1.Job) {
			j.Spec.Suspend = new(true)
			j.Labels[kueueQueueLabel] = "q"
		},
		"admitted by the queue": func(j *batchv1.Job) {
			j.Spec.Suspend = new(false)
			j.Labels[kueueQueueLabel] = "q"
			j.Status.StartTime = &started
			j.Status.Active = 1
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-1"}}
		},
		"deleted after its completions counted": func(j *batchv1.Job) {
			j.DeletionTimestamp = &deleted
			j.Status.Succeeded = 1
		},
		"replaced": func(j *batchv1.Job) {
			j.DeletionTimestamp = &deleted
			j.Annotations[v1.AnnotationReplacedBy] = "t-2"
		},
	} {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{
					Name: "t-1", Namespace: "ns", Labels: map[string]string{v1.LabelTaskName: "t"},
					Annotations:     map[string]string{"a": "b", v1.AnnotationTaskUID: "task-uid"},
					Finalizers:      []string{v1.FinalizerRunOutcome},
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(task, v1.GroupVersion.WithKind(v1.Kind))},
					ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}},
				},
				Spec: batchv1.JobSpec{
					Completions: new(int32(1)), Parallelism: new(int32(1)), BackoffLimit: new(int32(0)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u"}},
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "run", Image: "busybox", Command: []string{"sh", "-c", "echo hi"}}}}},
				},
			}
			edit(job)
			before := observeJob("t", job.DeepCopy())
			out, err := compactJob(job)
			if err != nil {
				t.Fatal(err)
			}
			stripped := out.(*cachedJob).job()
			if len(stripped.Spec.Template.Spec.Containers) != 0 || stripped.ManagedFields != nil || stripped.Spec.Selector != nil || stripped.Status.UncountedTerminatedPods != nil {
				t.Errorf("template %v, managedFields %v, selector %v, uncounted %v: want all dropped",
					stripped.Spec.Template, stripped.ManagedFields, stripped.Spec.Selector, stripped.Status.UncountedTerminatedPods)
			}
			if after := observeJob("t", stripped); !reflect.DeepEqual(before, after) {
				t.Errorf("observeJob after stripping = %+v, want %+v", after, before)
			}
			if stripped.Labels[v1.LabelTaskName] != "t" || len(stripped.Finalizers) != 1 || len(stripped.OwnerReferences) != 1 || stripped.Annotations[v1.AnnotationTaskUID] != "task-uid" {
				t.Errorf("metadata changed: %+v", stripped.ObjectMeta)
			}
			if _, ok := stripped.Annotations["a"]; ok {
				t.Errorf("another tool's annotation is cached: %v", stripped.Annotations)
			}
		})
	}
}

func TestCompactTaskKeepsTheTask(t *testing.T) {
	task := newTask(func(t *v1.Task) {
		t.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
		t.Finalizers = append(make([]string, 0, 8), v1.FinalizerJobs)
		t.Status.Conditions = append(make([]metav1.Condition, 0, 8),
			metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Suspended", Message: "m"})
	})
	want := task.DeepCopy()
	want.ManagedFields = nil
	out, err := compactTask(task)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1.Task)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("compactTask changed the Task:\n got %+v\nwant %+v", got, want)
	}
	if cap(got.Status.Conditions) != 1 || cap(got.Finalizers) != 1 {
		t.Errorf("capacities %d, %d: want the slices copied at their length", cap(got.Status.Conditions), cap(got.Finalizers))
	}
	// A second Task decoded apart shares the strings the first one holds.
	second := want.DeepCopy()
	second.Status.Conditions[0].Message = strings.Clone("m")
	second.Namespace = strings.Clone(got.Namespace)
	out, err = compactTask(second)
	if err != nil {
		t.Fatal(err)
	}
	shared := out.(*v1.Task)
	if unsafe.StringData(shared.Status.Conditions[0].Message) != unsafe.StringData(got.Status.Conditions[0].Message) ||
		unsafe.StringData(shared.Namespace) != unsafe.StringData(got.Namespace) {
		t.Error("the message and the namespace of two Tasks are two copies, want one")
	}
}

func TestInternerIsBounded(t *testing.T) {
	in := newInterner(2)
	for _, s := range []string{"a", "b", "c"} {
		in.intern(strings.Clone(s))
	}
	if len(in.values) > 2 {
		t.Errorf("%d strings held, want at most the bound of 2", len(in.values))
	}
	// The table emptied when full and took "c": it is shared from then on.
	c := in.intern(strings.Clone("c"))
	if got := in.intern(strings.Clone("c")); unsafe.StringData(got) != unsafe.StringData(c) || got != "c" {
		t.Errorf("a string offered after the table filled = %q, not shared", got)
	}
	long := strings.Repeat("x", maxInternedLen+1)
	if got := in.intern(long); unsafe.StringData(got) != unsafe.StringData(long) || len(in.values) > 2 || in.values[long] != "" {
		t.Error("a string longer than maxInternedLen is held")
	}
}
