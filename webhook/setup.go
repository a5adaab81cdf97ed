// Package webhook serves the Task API's webhooks: conversion between versions, defaulting and
// validation, with self-managed certificates.
package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

// Options configure the webhook server and its certificates.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key. With self-managed certificates the operator writes
	// them there itself; otherwise something else (cert-manager) must.
	CertDir string

	// SelfManagedCerts has the operator create, rotate and inject its own certificates.
	SelfManagedCerts bool
	// Namespace of the certificate Secret and of the webhook Service.
	Namespace   string
	SecretName  string
	ServiceName string
	// LocalURL, when set, is the base URL (https://localhost:PORT) under which the apiserver
	// reaches an operator running outside the cluster: the CRD and the webhook configurations
	// are pointed at it at start-up.
	LocalURL string

	CRDName              string
	MutatingConfigName   string
	ValidatingConfigName string

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
	}
}

func (o Options) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
}

func (o Options) dnsNames() (string, []string) {
	if o.LocalURL != "" {
		u, _ := url.Parse(o.LocalURL)
		return u.Hostname(), nil
	}
	svc := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	return svc, []string{svc + ".cluster.local"}
}

func (o Options) validate() error {
	if o.LocalURL == "" {
		return nil
	}
	u, err := url.Parse(o.LocalURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("webhook local URL %q: want https://host:port", o.LocalURL)
	}
	return nil
}

// Server returns the webhook server for the manager. With self-managed certificates it
// serves whatever certificate the Secret currently holds.
func Server(o Options, cert *Certificate) crwebhook.Server {
	opts := crwebhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}
	if o.SelfManagedCerts {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = cert.get })
	}
	return crwebhook.NewServer(opts)
}

// Certificate is the serving certificate shared by Server and Setup.
type Certificate = certificate

// CacheByObject restricts the manager's Secret informer to the one certificate Secret.
func CacheByObject(o Options) map[client.Object]cache.ByObject {
	if !o.SelfManagedCerts {
		return nil
	}
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.SecretName),
		},
	}
}

// Setup registers /convert, the defaulting and validating webhooks, certificate management
// and a readiness check that passes once the server is up with a certificate.
func Setup(mgr manager.Manager, o Options, cert *Certificate) error {
	if err := o.validate(); err != nil {
		return err
	}
	server := mgr.GetWebhookServer()
	server.Register("/convert", conversion.NewHandler())
	server.Register(mutatePath, &crwebhook.Admission{Handler: Mutator{}})
	server.Register(validatePath, &crwebhook.Admission{Handler: Validator{}})
	started := mgr.GetWebhookServer().StartedChecker()
	ready := func(req *http.Request) error {
		if o.SelfManagedCerts && !cert.loaded() {
			return errors.New("webhook certificate not loaded yet")
		}
		return started(req)
	}
	if err := mgr.AddReadyzCheck("webhook", ready); err != nil {
		return fmt.Errorf("add webhook readiness check: %w", err)
	}
	if !o.SelfManagedCerts {
		return nil
	}
	if err := addRotator(mgr, o); err != nil {
		return fmt.Errorf("add certificate rotator: %w", err)
	}
	return mgr.Add(&secretWatcher{mgr: mgr, key: o.secretKey(), certDir: o.CertDir, cert: cert})
}
