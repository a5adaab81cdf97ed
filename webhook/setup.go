// Package webhook serves the Task API's webhooks (/convert, /mutate, /validate; the mapping
// itself is package conversion's): conversion between versions, defaulting and
// validation. It wires the handlers into the manager's webhook server; the certificate they are
// served with comes from package cert (self-managed) or from files (cert-manager), and pointing
// the apiserver at an operator outside the cluster is package local's business.
package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/webhook/cert"
)

// Options configure the webhook server and, with self-managed certificates, what its
// certificate covers and where its CA is injected.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key. With self-managed certificates the operator writes
	// them there itself; otherwise something else (cert-manager's Secret volume) must.
	CertDir string

	// SelfManagedCerts has the operator create, rotate and inject its own certificates.
	SelfManagedCerts bool
	// Namespace of the certificate Secret and of the webhook Service.
	Namespace   string
	SecretName  string
	ServiceName string
	// DNSNames the serving certificate covers; empty means the Service's names.
	DNSNames []string

	// The objects that call the webhooks, which receive the CA bundle.
	CRDName              string
	MutatingConfigName   string
	ValidatingConfigName string

	// EnableHTTP2 offers HTTP/2 to clients. Off, the server speaks HTTP/1.1 only: what the
	// apiserver uses for a webhook behind a Service anyway (it offers HTTP/2 only to loopback
	// URLs), so local runs and tests see the protocol a cluster does, without HTTP/2's extra
	// attack surface (stream resets, CVE-2023-44487).
	EnableHTTP2 bool

	// Draining reports whether the process is draining before it exits; from then on every
	// response closes its connection (see closeConnectionsWhile). Nil means never.
	Draining func() bool

	// UsageInterval is how often the record of writes per version and user is written to the
	// ConfigMap versions.UsageConfigMap in Namespace; 0 keeps no record (the metric stays).
	UsageInterval time.Duration

	LeaderElection    bool
	CertValidity      time.Duration
	CertLookahead     time.Duration
	CertCheckInterval time.Duration
}

// DefaultOptions are the settings of an in-cluster deployment made with config/default.
func DefaultOptions() Options {
	return Options{
		Port:                 9443,
		CertDir:              "/tmp/k8s-webhook-server/serving-certs",
		SelfManagedCerts:     true,
		Namespace:            "task-operator-system",
		SecretName:           "task-operator-webhook-cert",
		ServiceName:          "task-operator-webhook-service",
		CRDName:              taskv1.CRDName,
		MutatingConfigName:   "task-operator-mutating-webhook-configuration",
		ValidatingConfigName: "task-operator-validating-webhook-configuration",
		CertValidity:         90 * 24 * time.Hour,
		CertLookahead:        30 * 24 * time.Hour,
		CertCheckInterval:    12 * time.Hour,
		UsageInterval:        time.Minute,
	}
}

// SecretKey names the certificate Secret.
func (o Options) SecretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
}

func (o Options) certOptions() cert.Options {
	dnsNames := o.DNSNames
	if len(dnsNames) == 0 {
		dnsNames = cert.ServiceDNSNames(o.ServiceName, o.Namespace)
	}
	return cert.Options{
		Secret:                o.SecretKey(),
		CertDir:               o.CertDir,
		DNSNames:              dnsNames,
		CRDName:               o.CRDName,
		MutatingConfigName:    o.MutatingConfigName,
		ValidatingConfigName:  o.ValidatingConfigName,
		RequireLeaderElection: o.LeaderElection,
		Validity:              o.CertValidity,
		Lookahead:             o.CertLookahead,
		CheckInterval:         o.CertCheckInterval,
	}
}

// Server returns the webhook server for the manager. With self-managed certificates it
// serves whatever certificate the Secret currently holds; otherwise controller-runtime watches
// the files in CertDir.
func Server(o Options, served *cert.Served) crwebhook.Server {
	opts := crwebhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}
	if !o.EnableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, HTTP1Only)
	}
	if o.SelfManagedCerts {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = served.GetCertificate })
	}
	return crwebhook.NewServer(opts)
}

// HTTP1Only makes a TLS server offer HTTP/1.1 alone in ALPN, so clients cannot choose HTTP/2.
func HTTP1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// CacheByObject is what the manager's cache must restrict for Setup.
func CacheByObject(o Options) map[client.Object]cache.ByObject {
	if !o.SelfManagedCerts {
		return nil
	}
	return cert.CacheByObject(o.SecretKey())
}

// Setup registers /convert, the defaulting and validating webhooks, certificate management
// and readiness checks that pass once the server is up with a certificate the apiserver trusts.
func Setup(mgr manager.Manager, o Options, served *cert.Served) error {
	server := mgr.GetWebhookServer()
	register := func(path string, h http.Handler) { server.Register(path, closeConnectionsWhile(o.Draining, h)) }
	register("/convert", NewConvertHandler())
	register(mutatePath, &crwebhook.Admission{Handler: Mutator{}})
	var usage *UsageRecorder
	if o.UsageInterval > 0 {
		usage = NewUsageRecorder(mgr.GetClient(), mgr.GetAPIReader(), o.Namespace, o.UsageInterval)
		if err := mgr.Add(usage); err != nil {
			return fmt.Errorf("add the version usage record: %w", err)
		}
	}
	register(validatePath, &crwebhook.Admission{Handler: Validator{Usage: usage}})
	started := mgr.GetWebhookServer().StartedChecker()
	ready := func(req *http.Request) error {
		if o.SelfManagedCerts && !served.Loaded() {
			return errors.New("webhook certificate not loaded yet")
		}
		return started(req)
	}
	if err := mgr.AddReadyzCheck("webhook", ready); err != nil {
		return fmt.Errorf("add webhook readiness check: %w", err)
	}
	serving := fileCertificate(o.CertDir)
	if o.SelfManagedCerts {
		serving = func() (*tls.Certificate, error) { return served.GetCertificate(nil) }
	}
	trust := newTrustGate(mgr.GetAPIReader(), o, o.certOptions().DNSNames[0], serving)
	if err := mgr.AddReadyzCheck("webhook-trusted", trust.check); err != nil {
		return fmt.Errorf("add webhook trust check: %w", err)
	}
	if !o.SelfManagedCerts {
		return nil
	}
	return cert.Manage(mgr, o.certOptions(), served)
}
