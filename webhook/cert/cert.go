// Package cert keeps the webhook server's certificate when the operator manages it itself: a
// CA and a serving certificate in one Secret, created and rotated by
// open-policy-agent/cert-controller, the CA injected into the CRD's conversion webhook and both
// admission webhook configurations, and the serving certificate loaded by every replica straight
// from the Secret. It knows nothing of the webhooks it secures (package webhook wires those).
package cert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// What the rotator needs, generated into config/rbac/role.yaml. Writes are confined to the
// objects it owns by name: the Secret, this CRD and the two webhook configurations, so the
// operator cannot re-point another CRD's conversion or register a webhook of its own. The names
// are those config/default renders (and the flags' defaults); config/kustomize_test.go checks
// that they match. Reads stay unrestricted because cert-controller watches through a cache of
// its own that lists without a name selector.
//
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=secrets,resourceNames=task-operator-webhook-cert,verbs=update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=tasks.example.com,verbs=update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=task-operator-mutating-webhook-configuration,verbs=update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=task-operator-validating-webhook-configuration,verbs=update;patch

// Options say which Secret holds the certificates, what they cover and where the CA goes.
type Options struct {
	// Secret holds ca.crt, ca.key, tls.crt and tls.key. It must exist: the rotator only
	// updates it (config/ ships it empty; local runs create it).
	Secret types.NamespacedName
	// CertDir receives tls.crt and tls.key, where cert-controller checks that they are
	// "mounted".
	CertDir string
	// DNSNames the serving certificate covers; the first is its common name.
	DNSNames []string
	// CRDName, MutatingConfigName and ValidatingConfigName receive the CA bundle.
	CRDName              string
	MutatingConfigName   string
	ValidatingConfigName string
	// RequireLeaderElection has only the leader rotate and inject; every replica still
	// loads the certificate.
	RequireLeaderElection bool
	// Validity of a serving certificate, how long before expiry it is renewed, and how often
	// that is checked.
	Validity      time.Duration
	Lookahead     time.Duration
	CheckInterval time.Duration
}

// ServiceDNSNames are the names under which the apiserver reaches a Service.
func ServiceDNSNames(service, namespace string) []string {
	svc := fmt.Sprintf("%s.%s.svc", service, namespace)
	return []string{svc, svc + ".cluster.local"}
}

// Served is the serving certificate a replica presents. It is loaded from the Secret through
// the informer, so a rotated certificate is served by every replica within moments, without
// waiting for the kubelet to refresh a volume.
type Served struct {
	current atomic.Pointer[tls.Certificate]
}

// GetCertificate is for tls.Config.GetCertificate.
func (s *Served) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhook serving certificate not loaded yet")
}

// Loaded reports whether a certificate is being served.
func (s *Served) Loaded() bool { return s.current.Load() != nil }

// Load parses a PEM certificate and key and serves them from now on.
func (s *Served) Load(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("parse certificate: %w", err)
	}
	s.current.Store(&pair)
	return nil
}

// CacheByObject restricts the manager's Secret informer to the certificate Secret: the
// watcher below reads it from the manager's cache.
func CacheByObject(secret types.NamespacedName) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{secret.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", secret.Name),
		},
	}
}

// Manage adds the rotator and the watcher that loads the Secret into served. The manager's
// cache must be built with CacheByObject.
func Manage(mgr manager.Manager, o Options, served *Served) error {
	if len(o.DNSNames) == 0 {
		return errors.New("webhook certificate: no DNS names")
	}
	if err := rotator.AddRotator(mgr, newRotator(o)); err != nil {
		return fmt.Errorf("add certificate rotator: %w", err)
	}
	return mgr.Add(&secretWatcher{mgr: mgr, key: o.Secret, certDir: o.CertDir, served: served})
}

func newRotator(o Options) *rotator.CertRotator {
	return &rotator.CertRotator{
		SecretKey:              o.Secret,
		CertDir:                o.CertDir,
		CAName:                 "task-operator-ca",
		CAOrganization:         "task-operator",
		DNSName:                o.DNSNames[0],
		ExtraDNSNames:          o.DNSNames[1:],
		IsReady:                make(chan struct{}),
		RequireLeaderElection:  o.RequireLeaderElection,
		ServerCertDuration:     o.Validity,
		LookaheadInterval:      o.Lookahead,
		RotationCheckFrequency: o.CheckInterval,
		Webhooks: []rotator.WebhookInfo{
			{Type: rotator.CRDConversion, Name: o.CRDName},
			{Type: rotator.Mutating, Name: o.MutatingConfigName},
			{Type: rotator.Validating, Name: o.ValidatingConfigName},
		},
	}
}

// secretWatcher loads the rotator's Secret into served on every change. It also writes the
// files into certDir, where the rotator checks that certificates are "mounted".
type secretWatcher struct {
	mgr     manager.Manager
	key     types.NamespacedName
	certDir string
	served  *Served
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
	if err := w.served.Load(certPEM, keyPEM); err != nil {
		return err
	}
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
