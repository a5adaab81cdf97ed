package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// certificate holds the serving certificate every replica presents. It is loaded from the
// Secret the rotator keeps, straight from the informer, so a rotated certificate is served
// by every replica within moments, without waiting for the kubelet to refresh a volume.
type certificate struct {
	current atomic.Pointer[tls.Certificate]
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.current.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("webhook serving certificate not loaded yet")
}

func (c *certificate) loaded() bool { return c.current.Load() != nil }

// secretWatcher loads the rotator's Secret into certificate on every change. It also writes
// the files into certDir, where the rotator checks that certificates are "mounted".
type secretWatcher struct {
	mgr     manager.Manager
	key     types.NamespacedName
	certDir string
	cert    *certificate
}

// NeedLeaderElection is false: every replica serves webhooks and needs the certificate.
func (w *secretWatcher) NeedLeaderElection() bool { return false }

func (w *secretWatcher) Start(ctx context.Context) error {
	informer, err := w.mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watch secret %s: %w", w.key, err)
	}
	load := func(obj any) {
		secret, ok := obj.(*corev1.Secret)
		if !ok || secret.Namespace != w.key.Namespace || secret.Name != w.key.Name {
			return
		}
		if err := w.load(secret); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "load webhook certificate", "secret", w.key)
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
	}); err != nil {
		return fmt.Errorf("watch secret %s: %w", w.key, err)
	}
	<-ctx.Done()
	return nil
}

func (w *secretWatcher) load(secret *corev1.Secret) error {
	certPEM, keyPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil // the rotator has not filled it yet
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("parse certificate: %w", err)
	}
	w.cert.current.Store(&pair)
	if err := writeFileAtomic(filepath.Join(w.certDir, corev1.TLSCertKey), certPEM); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(w.certDir, corev1.TLSPrivateKeyKey), keyPEM)
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// addRotator has open-policy-agent/cert-controller keep a CA and serving certificate in the
// Secret, rotate them before expiry and inject the CA into the CRD's conversion webhook and
// both admission webhook configurations.
func addRotator(mgr manager.Manager, o Options) error {
	dnsName, extra := o.dnsNames()
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:              o.secretKey(),
		CertDir:                o.CertDir,
		CAName:                 "task-operator-ca",
		CAOrganization:         "task-operator",
		DNSName:                dnsName,
		ExtraDNSNames:          extra,
		IsReady:                make(chan struct{}),
		RequireLeaderElection:  o.LeaderElection,
		ServerCertDuration:     o.CertValidity,
		LookaheadInterval:      o.CertLookahead,
		RotationCheckFrequency: o.CertCheckInterval,
		Webhooks: []rotator.WebhookInfo{
			{Type: rotator.CRDConversion, Name: o.CRDName},
			{Type: rotator.Mutating, Name: o.MutatingConfigName},
			{Type: rotator.Validating, Name: o.ValidatingConfigName},
		},
	})
}

// EnsureCertSecret creates the empty Secret the rotator fills: the rotator only updates it.
// An existing Secret is left alone, so replicas that start together are all fine.
func EnsureCertSecret(ctx context.Context, c client.Client, o Options) error {
	if !o.SelfManagedCerts {
		return nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName}}
	err := c.Create(ctx, secret)
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return fmt.Errorf("create certificate secret %s/%s: %w", o.Namespace, o.SecretName, err)
}
