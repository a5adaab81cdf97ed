package install_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/internal/testenv"
)

const (
	metricsService = "task-operator-controller-manager-metrics-service"
	metricsSecret  = "task-operator-metrics-cert"
	servingCert    = "task-operator-system/task-operator-serving-cert"
)

// certManager installs config/default-certmanager as rendered (image set through images:), with
// the test playing cert-manager: it issues the two Certificates into their Secrets, and plays
// the CA injector by writing the CA into every object annotated inject-ca-from. Conversion,
// admission and metrics are then served with cert-manager's certificates.
func (e *env) certManager(uninstallWithoutOperator string) {
	t := e.t
	ctx := t.Context()
	objects, rendered := e.renderCertManagerOverlay()
	runKubectl(t, e.cp, "create", "namespace", operatorNamespace)
	webhookCA := e.issue(certSecret, webhookService)
	e.issue(metricsSecret, metricsService)
	kubectlApply(t, e, rendered)
	e.injectCA(objects, webhookCA)

	e.checkInstalled(imageV1)
	for _, p := range e.mustPods() {
		var secret corev1.Secret
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: metricsSecret}, &secret); err != nil {
			t.Fatal(err)
		}
		served, err := servedCertificateAt(p.Status.PodIP, "8443")
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(secret.Data["tls.crt"])
		if block == nil || !bytes.Equal(served.Raw, block.Bytes) {
			t.Errorf("pod %s does not serve metrics with cert-manager's certificate", p.Name)
		}
	}
	ns := e.newNamespace("certmanager")
	tr := e.startTraffic(ns)
	time.Sleep(2 * time.Second)
	tr.finish(t, "cert-manager overlay")

	e.uninstallWithoutOperator(ns, uninstallWithoutOperator)
	deleteRendered(t, e, rendered)
}

// renderCertManagerOverlay renders the overlay with the image set, without cert-manager's own
// objects (its CRDs are not installed here: the test plays it).
func (e *env) renderCertManagerOverlay() ([]map[string]any, []byte) {
	t := e.t
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	overlay := exec.Command("hack/overlay.sh", imageV1, "config/default-certmanager", dir)
	overlay.Dir = root
	if out, err := overlay.CombinedOutput(); err != nil {
		t.Fatalf("overlay: %v\n%s", err, out)
	}
	out := runKubectl(t, e.cp, "kustomize", dir)
	var objects []map[string]any
	var kept []string
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(out, -1) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			continue
		}
		if strings.HasPrefix(fmt.Sprint(obj["apiVersion"]), "cert-manager.io/") || obj["kind"] == "Namespace" {
			continue
		}
		objects = append(objects, obj)
		kept = append(kept, doc)
	}
	return objects, []byte(strings.Join(kept, "\n---\n"))
}

// issue plays cert-manager's self-signed Issuer: a certificate for the Service's names in a
// kubernetes.io/tls Secret, ca.crt being the certificate itself. It returns that CA.
func (e *env) issue(secret, service string) []byte {
	t := e.t
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	svc := service + "." + operatorNamespace + ".svc"
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: svc},
		DNSNames: []string{svc, svc + ".cluster.local"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: secret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": certPEM, "ca.crt": certPEM,
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
	}
	if err := e.c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// injectCA plays cert-manager's CA injector: every rendered object annotated
// cert-manager.io/inject-ca-from gets the CA of that Certificate. Exactly the CRD and both
// webhook configurations must carry it.
func (e *env) injectCA(objects []map[string]any, ca []byte) {
	t := e.t
	ctx := t.Context()
	annotated := map[string]bool{}
	for _, obj := range objects {
		meta, _ := obj["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if from, ok := annotations["cert-manager.io/inject-ca-from"]; ok {
			if from != servingCert {
				t.Errorf("%s %s injects the CA of %v, want %s", obj["kind"], meta["name"], from, servingCert)
			}
			annotated[fmt.Sprint(obj["kind"])] = true
		}
	}
	for _, kind := range []string{"CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if !annotated[kind] {
			t.Errorf("the %s does not ask for cert-manager's CA", kind)
		}
	}
	e.eventually("the CA to be injected", 30*time.Second, func(ctx context.Context) (bool, error) {
		err := e.writeCABundles(ctx, ca)
		return err == nil, err
	})
	_ = ctx
}

func (e *env) writeCABundles(ctx context.Context, ca []byte) error {
	var crd apix.CustomResourceDefinition
	if err := e.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		return err
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = ca
	if err := e.c.Update(ctx, &crd); err != nil {
		return err
	}
	var mutating admissionv1.MutatingWebhookConfiguration
	if err := e.c.Get(ctx, client.ObjectKey{Name: "task-operator-mutating-webhook-configuration"}, &mutating); err != nil {
		return err
	}
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig.CABundle = ca
	}
	if err := e.c.Update(ctx, &mutating); err != nil {
		return err
	}
	var validating admissionv1.ValidatingWebhookConfiguration
	if err := e.c.Get(ctx, client.ObjectKey{Name: "task-operator-validating-webhook-configuration"}, &validating); err != nil {
		return err
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig.CABundle = ca
	}
	return e.c.Update(ctx, &validating)
}

func kubectlApply(t interface {
	Helper()
	TempDir() string
	Fatal(...any)
}, e *env, manifests []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(path, manifests, 0o644); err != nil {
		t.Fatal(err)
	}
	runKubectl(e.t, e.cp, "apply", "--server-side", "-f", path)
}

func deleteRendered(t interface {
	Helper()
	TempDir() string
	Fatal(...any)
}, e *env, manifests []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(path, manifests, 0o644); err != nil {
		t.Fatal(err)
	}
	runKubectl(e.t, e.cp, "delete", "--ignore-not-found", "--wait", "--timeout=3m", "-f", path)
	runKubectl(e.t, e.cp, "delete", "namespace", operatorNamespace, "--wait", "--timeout=3m")
}
