package local

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"example.com/task-operator/config"
)

// The retired annotation is an ordinary annotation anyone with update on the CRD may edit
// (or an old release may have written when another version was the storage version). The
// install must never apply a CRD whose storage version (v1, the hub every informer of the
// operator reads) is not served: it refuses, naming the annotation, or keeps it served.
func TestInstallNeverUnservesTheStorageVersionTheRetiredAnnotationNames(t *testing.T) {
	for _, retired := range [][]string{{"v1"}, {"v1alpha1", "v1"}} {
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(config.CRD, &crd.Object); err != nil {
			t.Fatal(err)
		}
		if err := keepRetired(crd, retired); err != nil {
			continue // refused: fine
		}
		list, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, item := range list {
			v := item.(map[string]any)
			if v["storage"] == true && v["served"] != true {
				t.Errorf("retired %v: the install would apply storage version %v with served: %v", retired, v["name"], v["served"])
			}
		}
	}
}
