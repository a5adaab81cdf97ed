// Package install registers every served version of the Task API with a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// Versions are the served versions, newest (the hub and storage version) first.
var Versions = []string{taskv1.GroupVersion.Version, v1beta1.GroupVersion.Version, v1alpha1.GroupVersion.Version}

// AddToScheme registers every served version of Task, v1 first so that it is the preferred one.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{taskv1.AddToScheme, v1beta1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return s.SetVersionPriority(taskv1.GroupVersion, v1beta1.GroupVersion, v1alpha1.GroupVersion)
}
