// Package conversion maps the Task API between its served versions through the v1 hub and
// serves the mapping as the CRD's conversion webhook.
package conversion

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// NewConverter builds the hub-and-spoke converter for Task, for WebhookBuilder.WithConverter.
func NewConverter() func(*runtime.Scheme) (conversion.Converter, error) {
	return conversion.NewHubSpokeConverter(&taskv1.Task{},
		conversion.NewSpokeConverter(&v1alpha1.Task{}, ConvertV1ToV1alpha1, ConvertV1alpha1ToV1),
		conversion.NewSpokeConverter(&v1beta1.Task{}, ConvertV1ToV1beta1, ConvertV1beta1ToV1),
	)
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
