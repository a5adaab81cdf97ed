package local

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/config"
)

// installCRD applies the embedded CRD with server-side apply. The embedded CRD has no
// spec.conversion, so this field manager never owns it and a conversion webhook configured on
// the live CRD (by --webhook-local-url or by kustomize) is left as it is.
func installCRD(ctx context.Context, c client.Client) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(config.CRD, &crd.Object); err != nil {
		return fmt.Errorf("decode embedded CRD: %w", err)
	}
	apply := client.ApplyConfigurationFromUnstructured(crd)
	if err := c.Apply(ctx, apply, client.FieldOwner("task-operator-install"), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CRD %s: %w", crd.GetName(), err)
	}
	return nil
}
