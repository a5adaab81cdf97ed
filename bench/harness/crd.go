package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"example.com/task-operator/config"
	"example.com/task-operator/conversion"
	"example.com/task-operator/webhook"

	"example.com/task-operator/e2e/controlplane"
)

// CRDName is the Task CRD.
const CRDName = "tasks.example.com"

// EtcdTaskPrefix is where the apiserver keeps Tasks in etcd.
const EtcdTaskPrefix = "/registry/example.com/tasks/"

// CurrentCRD is this release's CRD, as the operator embeds it.
func CurrentCRD() (*apix.CustomResourceDefinition, error) {
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.CRD, crd); err != nil {
		return nil, fmt.Errorf("decode embedded CRD: %w", err)
	}
	return crd, nil
}

// PreviousReleaseCRD is the CRD as the release before v1 had it: v1alpha1 only, served and
// stored, no conversion.
func PreviousReleaseCRD() (*apix.CustomResourceDefinition, error) {
	cur, err := CurrentCRD()
	if err != nil {
		return nil, err
	}
	crd := &apix.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: cur.Name}, Spec: *cur.Spec.DeepCopy()}
	crd.Spec.Versions = nil
	for _, v := range cur.Spec.Versions {
		if v.Name == "v1alpha1" {
			v = *v.DeepCopy()
			v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, true, false, nil
			crd.Spec.Versions = append(crd.Spec.Versions, v)
		}
	}
	crd.Spec.Conversion = &apix.CustomResourceConversion{Strategy: apix.NoneConverter}
	return crd, nil
}

// DeleteCRD deletes the Task CRD (and with it every Task) and waits until it is gone. Tasks
// still carrying the operator's finalizer need a running operator.
func (e *Env) DeleteCRD(ctx context.Context, timeout time.Duration) error {
	crd := &apix.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: CRDName}}
	if err := e.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete CRD: %w", err)
	}
	return poll(ctx, timeout, "CRD deletion", func() (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Name: CRDName}, &apix.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// DeleteWebhookConfigurations removes the operator's admission webhook configurations, so that
// Tasks can be written while no operator runs; a starting operator creates them again.
func (e *Env) DeleteWebhookConfigurations(ctx context.Context) error {
	o := webhook.DefaultOptions()
	for _, obj := range []client.Object{
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.MutatingConfigName}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingConfigName}},
	} {
		if err := e.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// InstallPreviousRelease replaces the Task CRD with PreviousReleaseCRD (the CRD must be gone or
// its Tasks free of finalizers) and waits until v1alpha1 is served.
func (e *Env) InstallPreviousRelease(ctx context.Context) error {
	if err := e.DeleteCRD(ctx, 5*time.Minute); err != nil {
		return err
	}
	crd, err := PreviousReleaseCRD()
	if err != nil {
		return err
	}
	if err := e.Client.Create(ctx, crd); err != nil {
		return fmt.Errorf("create previous release's CRD: %w", err)
	}
	return poll(ctx, time.Minute, "v1alpha1 served", func() (bool, error) {
		_, err := e.Dyn.Resource(TaskGVR("v1alpha1")).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// V1alpha1Task is a Task as a user of the previous release wrote it.
func V1alpha1Task(ns, name string, i int) *unstructured.Unstructured {
	spec := map[string]any{"replicas": int64(1 + i%3), "maxRetry": int64(i % 4)}
	if i%2 == 0 {
		spec["type"], spec["shell"] = "shell", fmt.Sprintf("echo task %d", i)
	} else {
		spec["type"], spec["url"] = "http", fmt.Sprintf("https://hooks.example.com/task/%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1",
		"kind":       "Task",
		"metadata":   map[string]any{"namespace": ns, "name": name, "labels": map[string]any{BenchLabel: "true"}},
		"spec":       spec,
	}}
}

// UpgradeCRD applies this release's versions over the previous release's CRD with the
// conversion webhook at url, and waits until new Tasks are stored at v1.
func (e *Env) UpgradeCRD(ctx context.Context, url string, caBundle []byte, probeNS string) error {
	cur, err := CurrentCRD()
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apix.CustomResourceDefinition{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
			return err
		}
		crd.Spec.Versions = cur.Spec.DeepCopy().Versions
		crd.Spec.Conversion = &apix.CustomResourceConversion{
			Strategy: apix.WebhookConverter,
			Webhook: &apix.WebhookConversion{
				ClientConfig:             &apix.WebhookClientConfig{URL: &url, CABundle: caBundle},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		return e.Client.Update(ctx, crd)
	})
	if err != nil {
		return fmt.Errorf("upgrade CRD: %w", err)
	}
	probes := e.Dyn.Resource(TaskGVR("v1")).Namespace(probeNS)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"namespace": probeNS, "name": "storage-probe"},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}}
	key := EtcdTaskPrefix + probeNS + "/storage-probe"
	err = poll(ctx, time.Minute, "v1 storage", func() (bool, error) {
		if _, err := probes.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		raw, err := e.CP.EtcdGet(ctx, key)
		if err != nil {
			return false, nil
		}
		if err := probes.Delete(ctx, "storage-probe", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apiVersionOf(raw) == "example.com/v1", nil
	})
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, "probe deletion", func() (bool, error) {
		_, err := e.CP.EtcdGet(ctx, key)
		return err != nil, nil
	})
}

func apiVersionOf(raw []byte) string {
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	_ = json.Unmarshal(raw, &head)
	return head.APIVersion
}

// StoredVersions counts the Tasks in etcd by the apiVersion they are encoded at.
func (e *Env) StoredVersions(ctx context.Context) (map[string]int, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.CP.EtcdEndpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	resp, err := c.Get(ctx, EtcdTaskPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		out[apiVersionOf(kv.Value)]++
	}
	return out, nil
}

// CRDStoredVersions is the CRD's status.storedVersions.
func (e *Env) CRDStoredVersions(ctx context.Context) ([]string, error) {
	crd := &apix.CustomResourceDefinition{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		return nil, err
	}
	return crd.Status.StoredVersions, nil
}

// ConversionWebhook is the project's converter served in this process on loopback, for while no
// operator runs.
type ConversionWebhook struct {
	URL      string
	CABundle []byte
	cancel   context.CancelFunc
	dir      string
}

// StartConversionWebhook serves /convert with a fresh self-signed certificate.
func StartConversionWebhook(ctx context.Context) (*ConversionWebhook, error) {
	dir, err := os.MkdirTemp("", "bench-convert-")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	srv.Register("/convert", conversion.NewHandler())
	ctx, cancel := context.WithCancel(ctx)
	w := &ConversionWebhook{URL: fmt.Sprintf("https://127.0.0.1:%d/convert", port), CABundle: certPEM, cancel: cancel, dir: dir}
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(ctx) }()
	started := srv.StartedChecker()
	err = poll(ctx, 30*time.Second, "conversion webhook", func() (bool, error) {
		select {
		case err := <-errc:
			return false, fmt.Errorf("conversion webhook: %w", err)
		default:
		}
		return started(nil) == nil, nil
	})
	if err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// Stop shuts the server down.
func (w *ConversionWebhook) Stop() {
	w.cancel()
	_ = os.RemoveAll(w.dir)
}

func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "bench-conversion-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// poll calls cond every 100 ms until it returns true or an error, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s", what), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Poll is poll for the scenarios.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	return poll(ctx, timeout, what, cond)
}
