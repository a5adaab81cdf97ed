package webhook

import (
	"bytes"
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/config"
)

// PointAtLocalServer makes the apiserver call an operator running outside the cluster: the
// CRD's conversion webhook and both admission webhook configurations get o.LocalURL. CA bundles
// already present are kept, so a restart does not break calls while the rotator re-injects.
func PointAtLocalServer(ctx context.Context, c client.Client, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := pointCRDConversion(ctx, c, o); err != nil {
		return err
	}
	mutating, validating, err := generatedWebhookConfigurations()
	if err != nil {
		return err
	}
	mutating.Name = o.MutatingConfigName
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = o.localClientConfig(mutating.Webhooks[i].ClientConfig)
	}
	validating.Name = o.ValidatingConfigName
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = o.localClientConfig(validating.Webhooks[i].ClientConfig)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return upsertMutating(ctx, c, mutating) }); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return upsertValidating(ctx, c, validating) })
}

func (o Options) localClientConfig(in admissionv1.WebhookClientConfig) admissionv1.WebhookClientConfig {
	url := o.LocalURL
	if in.Service != nil && in.Service.Path != nil {
		url += *in.Service.Path
	}
	return admissionv1.WebhookClientConfig{URL: &url}
}

// pointCRDConversion retries on conflicts: right after the CRD is created the apiserver itself
// writes it (its status and established condition).
func pointCRDConversion(ctx context.Context, c client.Client, o Options) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return pointCRDConversionOnce(ctx, c, o) })
}

func pointCRDConversionOnce(ctx context.Context, c client.Client, o Options) error {
	crd := &apix.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: o.CRDName}, crd); err != nil {
		return fmt.Errorf("get CRD %s (is it installed?): %w", o.CRDName, err)
	}
	url := o.LocalURL + "/convert"
	var caBundle []byte
	if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		caBundle = conv.Webhook.ClientConfig.CABundle
	}
	crd.Spec.Conversion = &apix.CustomResourceConversion{
		Strategy: apix.WebhookConverter,
		Webhook: &apix.WebhookConversion{
			ClientConfig:             &apix.WebhookClientConfig{URL: &url, CABundle: caBundle},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := c.Update(ctx, crd); err != nil {
		return fmt.Errorf("point CRD %s conversion at %s: %w", o.CRDName, url, err)
	}
	return nil
}

func generatedWebhookConfigurations() (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration, error) {
	var mutating admissionv1.MutatingWebhookConfiguration
	var validating admissionv1.ValidatingWebhookConfiguration
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(config.WebhookConfigurations), 4096)
	if err := decoder.Decode(&mutating); err != nil {
		return nil, nil, fmt.Errorf("decode generated mutating webhook configuration: %w", err)
	}
	if err := decoder.Decode(&validating); err != nil {
		return nil, nil, fmt.Errorf("decode generated validating webhook configuration: %w", err)
	}
	return &mutating, &validating, nil
}

func upsertMutating(ctx context.Context, c client.Client, want *admissionv1.MutatingWebhookConfiguration) error {
	have := &admissionv1.MutatingWebhookConfiguration{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return wrapUpsert(want.Name, c.Create(ctx, want))
	}
	if err != nil {
		return wrapUpsert(want.Name, err)
	}
	keepCABundles(have.Webhooks, want.Webhooks, func(w *admissionv1.MutatingWebhook) (string, *[]byte) {
		return w.Name, &w.ClientConfig.CABundle
	})
	have.Webhooks = want.Webhooks
	return wrapUpsert(want.Name, c.Update(ctx, have))
}

func upsertValidating(ctx context.Context, c client.Client, want *admissionv1.ValidatingWebhookConfiguration) error {
	have := &admissionv1.ValidatingWebhookConfiguration{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return wrapUpsert(want.Name, c.Create(ctx, want))
	}
	if err != nil {
		return wrapUpsert(want.Name, err)
	}
	keepCABundles(have.Webhooks, want.Webhooks, func(w *admissionv1.ValidatingWebhook) (string, *[]byte) {
		return w.Name, &w.ClientConfig.CABundle
	})
	have.Webhooks = want.Webhooks
	return wrapUpsert(want.Name, c.Update(ctx, have))
}

// keepCABundles copies the CA bundle of each existing webhook onto its wanted counterpart.
func keepCABundles[W any](have, want []W, key func(*W) (string, *[]byte)) {
	bundles := map[string][]byte{}
	for i := range have {
		name, bundle := key(&have[i])
		bundles[name] = *bundle
	}
	for i := range want {
		name, bundle := key(&want[i])
		*bundle = bundles[name]
	}
}

func wrapUpsert(name string, err error) error {
	if err != nil {
		return fmt.Errorf("apply webhook configuration %s: %w", name, err)
	}
	return nil
}
