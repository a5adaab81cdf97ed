package reconciler

import (
	"fmt"
	"reflect"
	"testing"
	"time"

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

// TestStripJobKeepsWhatTheControllerReads is issue #13 goal 5: a cached Job loses its pod
// template and managed fields, and keeps every field observeJob reads.
func TestStripJobKeepsWhatTheControllerReads(t *testing.T) {
	task := &v1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", UID: "task-uid"}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "t-1", Namespace: "ns", Labels: map[string]string{v1.LabelTaskName: "t"},
			Annotations:     map[string]string{"a": "b"},
			Finalizers:      []string{v1.FinalizerRunOutcome},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(task, v1.GroupVersion.WithKind(v1.Kind))},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: batchv1.JobSpec{
			Suspend: new(true), Completions: new(int32(1)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "run", Image: "busybox", Command: []string{"sh", "-c", "echo hi"}}}}},
		},
		Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}},
	}
	before := observeJob("t", job.DeepCopy())
	out, err := stripJob(job)
	if err != nil {
		t.Fatal(err)
	}
	stripped := out.(*batchv1.Job)
	if len(stripped.Spec.Template.Spec.Containers) != 0 || stripped.ManagedFields != nil {
		t.Errorf("template %v, managedFields %v: want both dropped", stripped.Spec.Template, stripped.ManagedFields)
	}
	if after := observeJob("t", stripped); !reflect.DeepEqual(before, after) {
		t.Errorf("observeJob after stripping = %+v, want %+v", after, before)
	}
	if stripped.Labels[v1.LabelTaskName] != "t" || len(stripped.Finalizers) != 1 || len(stripped.OwnerReferences) != 1 || stripped.Annotations["a"] != "b" {
		t.Errorf("metadata changed: %+v", stripped.ObjectMeta)
	}
}
