package main

import (
	"context"
	"fmt"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/config"
)

// installCRD applies the embedded CRD with server-side apply. It keeps a conversion webhook
// already configured on the live CRD: spec.conversion is owned by whoever pointed it at the
// webhook, not by this field manager.
func installCRD(ctx context.Context, c client.Client) error {
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.CRD, crd); err != nil {
		return fmt.Errorf("decode embedded CRD: %w", err)
	}
	crd.APIVersion, crd.Kind = apix.SchemeGroupVersion.String(), "CustomResourceDefinition"
	crd.Spec.Conversion = nil
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("task-operator-install"), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
	}
	return nil
}
