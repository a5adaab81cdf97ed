package local

import (
	"context"
	"fmt"
	"slices"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/config"
	"example.com/task-operator/versions"
)

// installCRD applies the embedded CRD with server-side apply. The embedded CRD has no
// spec.conversion, so this field manager never owns it and a conversion webhook configured on
// the live CRD (by --webhook-local-url or by kustomize) is left as it is.
//
// A version `task-operator versions retire` stopped serving stays unserved: spec.versions is
// an atomic list, so the apply would otherwise serve it again. The live CRD names them in
// versions.RetiredAnnotation, which only `task-operator versions serve` removes.
func installCRD(ctx context.Context, c client.Client) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(config.CRD, &crd.Object); err != nil {
		return fmt.Errorf("decode embedded CRD: %w", err)
	}
	live := &apix.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read CRD %s: %w", crd.GetName(), err)
	default:
		if err := keepRetired(crd, versions.RetiredVersions(live)); err != nil {
			return err
		}
	}
	apply := client.ApplyConfigurationFromUnstructured(crd)
	if err := c.Apply(ctx, apply, client.FieldOwner("task-operator-install"), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CRD %s: %w", crd.GetName(), err)
	}
	return nil
}

// keepRetired sets served: false on every version of crd named in retired.
func keepRetired(crd *unstructured.Unstructured, retired []string) error {
	if len(retired) == 0 {
		return nil
	}
	list, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return fmt.Errorf("embedded CRD: spec.versions: %w", err)
	}
	for _, item := range list {
		// The storage version is never unserved, whatever the annotation (anyone who may
		// update the CRD may edit it) says: the operator and every client read Tasks there.
		v, ok := item.(map[string]any)
		if ok && slices.Contains(retired, fmt.Sprint(v["name"])) && v["storage"] != true {
			v["served"] = false
		}
	}
	return unstructured.SetNestedSlice(crd.Object, list, "spec", "versions")
}
