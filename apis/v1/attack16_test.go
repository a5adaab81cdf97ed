package v1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAttackValidateResourcesAcceptsWhatPodsReject: spec.resources that the API server's pod
// template validation rejects pass the Task's validation, so the Task is admitted and every
// Job create fails (Invalid) forever: the Task sits Pending, retrying with error backoff.
// (Rules from k8s.io/kubernetes pkg/apis/core/validation ValidateResourceRequirements and
// validateContainerResourceName.)
func TestAttackValidateResourcesAcceptsWhatPodsReject(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name string
		res  *corev1.ResourceRequirements
	}{
		{"non-standard unprefixed name", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"gpu": q("1")}}},
		{"extended resource request without limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}}},
		{"extended resource request below limit", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("1")}, Limits: corev1.ResourceList{"example.com/gpu": q("2")}}},
		{"fractional extended resource", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": q("500m")}}},
		{"hugepages request without limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"hugepages-2Mi": q("2Mi")}}},
	}
	for _, tc := range tests {
		if errs := Validate(&Task{Spec: TaskSpec{Resources: tc.res}}); len(errs) == 0 {
			t.Errorf("%s: accepted, but the API server refuses a Job whose pods ask for it", tc.name)
		}
	}
}
