// Package local runs the operator outside the cluster (`make run`, tests): the apiserver calls
// its webhooks at a URL such as https://localhost:9443 instead of through the webhook Service.
// At start-up it installs the CRD if asked, creates the certificate Secret, and points the CRD's
// conversion webhook and both admission webhook configurations at that URL. None of this is
// needed in the cluster, so its permissions live in a role of their own (config/local), which
// only `make run` grants.
package local

import (
	"bytes"
	"context"
	"fmt"
	"net/url"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/config"
	"example.com/task-operator/webhook"
)

// What only a local run may do, beyond the deployed roles: create the CRD, the webhook
// configurations and the certificate Secret, and re-point the CRD and the configurations.
// Generated into config/local/role.yaml (task-operator-local-role).
//
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=create
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=tasks.example.com,verbs=get;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=task-operator-mutating-webhook-configuration;task-operator-validating-webhook-configuration,verbs=get;update;patch
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=secrets,verbs=create

// Options of a local run.
type Options struct {
	// URL is the base URL (https://host:port) under which the apiserver reaches the webhooks.
	URL string
	// InstallCRD applies the embedded CRD first.
	InstallCRD bool
}

// Validate checks the URL.
func (o Options) Validate() error {
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("webhook local URL %q: want https://host:port", o.URL)
	}
	return nil
}

// DNSNames are what the serving certificate must cover: the URL's host.
func (o Options) DNSNames() []string {
	u, _ := url.Parse(o.URL)
	return []string{u.Hostname()}
}

// Prepare does what must happen before the manager starts: installing the CRD if asked,
// creating the Secret the certificate rotator fills, and pointing the webhooks at o.URL.
func Prepare(ctx context.Context, c client.Client, o Options, w webhook.Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.InstallCRD {
		if err := installCRD(ctx, c); err != nil {
			return err
		}
	}
	if err := ensureCertSecret(ctx, c, w); err != nil {
		return err
	}
	return pointAtLocalServer(ctx, c, o, w)
}

// ensureCertSecret creates the empty Secret the rotator fills: the rotator only updates it
// (in the cluster, config/ ships it). An existing Secret is left alone.
func ensureCertSecret(ctx context.Context, c client.Client, w webhook.Options) error {
	if !w.SelfManagedCerts {
		return nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.SecretName}}
	err := c.Create(ctx, secret)
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("create certificate secret %s/%s (does namespace %s exist?): %w", w.Namespace, w.SecretName, w.Namespace, err)
}

// pointAtLocalServer makes the apiserver call this process: the CRD's conversion webhook and
// both admission webhook configurations get o.URL. CA bundles already present are kept, so a
// restart does not break calls while the rotator re-injects.
func pointAtLocalServer(ctx context.Context, c client.Client, o Options, w webhook.Options) error {
	if err := pointCRDConversion(ctx, c, o, w.CRDName); err != nil {
		return err
	}
	mutating, validating, err := generatedWebhookConfigurations()
	if err != nil {
		return err
	}
	mutating.Name = w.MutatingConfigName
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = o.clientConfig(mutating.Webhooks[i].ClientConfig)
	}
	validating.Name = w.ValidatingConfigName
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = o.clientConfig(validating.Webhooks[i].ClientConfig)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return upsertMutating(ctx, c, mutating) }); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return upsertValidating(ctx, c, validating) })
}

func (o Options) clientConfig(in admissionv1.WebhookClientConfig) admissionv1.WebhookClientConfig {
	url := o.URL
	if in.Service != nil && in.Service.Path != nil {
		url += *in.Service.Path
	}
	return admissionv1.WebhookClientConfig{URL: &url}
}

// pointCRDConversion retries on conflicts: right after the CRD is created the apiserver itself
// writes it (its status and established condition).
func pointCRDConversion(ctx context.Context, c client.Client, o Options, crdName string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return pointCRDConversionOnce(ctx, c, o, crdName) })
}

func pointCRDConversionOnce(ctx context.Context, c client.Client, o Options, crdName string) error {
	crd := &apix.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return fmt.Errorf("get CRD %s (is it installed?): %w", crdName, err)
	}
	url := o.URL + "/convert"
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
		return fmt.Errorf("point CRD %s conversion at %s: %w", crdName, url, err)
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
