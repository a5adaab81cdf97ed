package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// trustGate is a readiness check that passes once the apiserver trusts the certificate this
// replica serves: the CA bundles of the CRD's conversion webhook and of both webhook
// configurations verify it for the Service's name. Until then every call the apiserver made
// would fail with an x509 error, so the pod must not be an endpoint yet: right after a fresh
// install the leader injects the CA moments after the certificate exists (cert-manager's CA
// injector likewise). Once passed it stays passed, so that readiness never flaps the Service
// empty.
type trustGate struct {
	reader   client.Reader
	o        Options
	dnsName  string
	serving  func() (*tls.Certificate, error)
	passed   atomic.Bool
	mu       sync.Mutex
	checked  time.Time
	lastErr  error
	interval time.Duration
}

func newTrustGate(reader client.Reader, o Options, dnsName string, serving func() (*tls.Certificate, error)) *trustGate {
	return &trustGate{reader: reader, o: o, dnsName: dnsName, serving: serving, interval: time.Second}
}

// check is a healthz.Checker. It reads the three objects at most once per interval.
func (g *trustGate) check(req *http.Request) error {
	if g.passed.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.checked) < g.interval {
		return g.lastErr
	}
	g.checked = time.Now()
	g.lastErr = g.verify(req.Context())
	if g.lastErr == nil {
		g.passed.Store(true)
	}
	return g.lastErr
}

func (g *trustGate) verify(ctx context.Context) error {
	cert, err := g.serving()
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("parse serving certificate: %w", err)
	}
	bundles, err := g.caBundles(ctx)
	if err != nil {
		return err
	}
	for what, bundle := range bundles {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(bundle) {
			return fmt.Errorf("%s has no CA bundle yet", what)
		}
		opts := x509.VerifyOptions{Roots: roots, DNSName: g.dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("%s does not trust the serving certificate yet: %w", what, err)
		}
	}
	return nil
}

func (g *trustGate) caBundles(ctx context.Context) (map[string][]byte, error) {
	crd := &apix.CustomResourceDefinition{}
	if err := g.reader.Get(ctx, client.ObjectKey{Name: g.o.CRDName}, crd); err != nil {
		return nil, fmt.Errorf("read CRD %s: %w", g.o.CRDName, err)
	}
	bundles := map[string][]byte{}
	if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
		bundles["CRD "+crd.Name] = c.Webhook.ClientConfig.CABundle
	} else {
		return nil, fmt.Errorf("CRD %s has no conversion webhook", crd.Name)
	}
	mutating := &admissionv1.MutatingWebhookConfiguration{}
	if err := g.reader.Get(ctx, client.ObjectKey{Name: g.o.MutatingConfigName}, mutating); err != nil {
		return nil, fmt.Errorf("read %s: %w", g.o.MutatingConfigName, err)
	}
	for _, w := range mutating.Webhooks {
		bundles["webhook "+w.Name] = w.ClientConfig.CABundle
	}
	validating := &admissionv1.ValidatingWebhookConfiguration{}
	if err := g.reader.Get(ctx, client.ObjectKey{Name: g.o.ValidatingConfigName}, validating); err != nil {
		return nil, fmt.Errorf("read %s: %w", g.o.ValidatingConfigName, err)
	}
	for _, w := range validating.Webhooks {
		bundles["webhook "+w.Name] = w.ClientConfig.CABundle
	}
	return bundles, nil
}

// fileCertificate reads the certificate controller-runtime serves from CertDir (external
// certificates, from cert-manager's Secret).
func fileCertificate(dir string) func() (*tls.Certificate, error) {
	return func() (*tls.Certificate, error) {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, corev1.TLSCertKey), filepath.Join(dir, corev1.TLSPrivateKeyKey))
		if err != nil {
			return nil, errors.New("no serving certificate in " + dir + " yet")
		}
		return &pair, nil
	}
}
