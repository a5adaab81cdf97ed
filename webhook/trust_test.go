package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// newCA returns a CA's PEM and a serving certificate it signed for dnsName.
func newCA(t *testing.T, dnsName string) ([]byte, *tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{dnsName}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTrustGate(t *testing.T) {
	o := DefaultOptions()
	dns := o.certOptions().DNSNames[0]
	caPEM, serving := newCA(t, dns)
	otherCA, _ := newCA(t, dns)

	objects := func(crdBundle, webhookBundle []byte) []client.Object {
		path := "/convert"
		return []client.Object{
			&apix.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: o.CRDName}, Spec: apix.CustomResourceDefinitionSpec{
				Conversion: &apix.CustomResourceConversion{Strategy: apix.WebhookConverter, Webhook: &apix.WebhookConversion{
					ClientConfig: &apix.WebhookClientConfig{CABundle: crdBundle, Service: &apix.ServiceReference{Name: "s", Namespace: "n", Path: &path}}}}}},
			&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.MutatingConfigName},
				Webhooks: []admissionv1.MutatingWebhook{{Name: "m", ClientConfig: admissionv1.WebhookClientConfig{CABundle: webhookBundle}}}},
			&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingConfigName},
				Webhooks: []admissionv1.ValidatingWebhook{{Name: "v", ClientConfig: admissionv1.WebhookClientConfig{CABundle: webhookBundle}}}},
		}
	}
	scheme := runtime.NewScheme()
	_ = apix.AddToScheme(scheme)
	_ = admissionv1.AddToScheme(scheme)
	req := httptest.NewRequest("GET", "/readyz", nil)
	gate := func(objs []client.Object) *trustGate {
		g := newTrustGate(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), o, dns,
			func() (*tls.Certificate, error) { return serving, nil })
		g.interval = 0
		return g
	}

	for name, objs := range map[string][]client.Object{
		"no CA injected yet":             objects(nil, nil),
		"CRD injected, webhooks not yet": objects(caPEM, nil),
		"another CA injected":            objects(otherCA, otherCA),
	} {
		if err := gate(objs).check(req); err == nil {
			t.Errorf("%s: ready, want not ready", name)
		}
	}
	g := gate(objects(caPEM, caPEM))
	if err := g.check(req); err != nil {
		t.Fatalf("CA injected everywhere: %v", err)
	}
	// Latched: a later change does not flap readiness.
	g.reader = fake.NewClientBuilder().WithScheme(scheme).Build()
	if err := g.check(req); err != nil {
		t.Errorf("after passing once: %v", err)
	}
}
