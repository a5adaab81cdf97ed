// Package v1alpha1 is the original Task API, kept exactly as clusters already hold it. It is
// served, converted through v1, and no longer stored.
// +kubebuilder:object:generate=true
// +groupName=example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	taskv1 "example.com/task-operator/apis/v1"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: taskv1.Group, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Task{}, &TaskList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
