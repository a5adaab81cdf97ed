package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"example.com/task-operator/webhook"
)

// ConversionServer serves the product's /convert handler (webhook.NewConvertHandler) in this
// process on loopback, behind a fresh self-signed certificate: conversion for a CRD while no
// operator runs.
type ConversionServer struct {
	// URL is the https URL of /convert; CABundle is the PEM certificate that signs it.
	URL      string
	CABundle []byte

	dir    string
	srv    crwebhook.Server
	port   int
	cancel context.CancelFunc
	done   chan error
	timing handlerTiming
}

// handlerTiming keeps how long each request took inside the handler: the webhook's own share
// of a conversion call, at a resolution the apiserver's histogram (1 ms buckets and up) lacks.
type handlerTiming struct {
	mu    sync.Mutex
	taken []timedRequest
	// protocols counts requests by HTTP version ("HTTP/1.1", "HTTP/2.0").
	protocols map[string]int
	// handshakes counts TLS handshakes: a client that reuses its connections makes few.
	handshakes atomic.Int64
}

func (t *handlerTiming) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(began)
		t.mu.Lock()
		t.taken = append(t.taken, timedRequest{path: r.URL.Path, taken: d})
		if t.protocols == nil {
			t.protocols = map[string]int{}
		}
		t.protocols[r.Proto]++
		t.mu.Unlock()
	})
}

// timedRequest is one request's time inside the handler registered at path.
type timedRequest struct {
	path  string
	taken time.Duration
}

// convertPath is where the server serves the product's /convert handler.
const convertPath = "/convert"

// HandlerTimes returns how long each request took in the product's /convert handler since the
// last call, and the TLS handshakes meanwhile, and starts afresh. Requests to other handlers
// on the server (a benchmark's no-op webhook) are dropped, not counted as the product's.
func (s *ConversionServer) HandlerTimes() ([]time.Duration, int64) {
	byPath, handshakes := s.HandlerTimesByPath()
	return byPath[convertPath], handshakes
}

// HandlerTimesByPath is HandlerTimes keyed by the handler's path: a benchmark that sends the
// requests of two webhooks on one server in turn tells them apart.
func (s *ConversionServer) HandlerTimesByPath() (map[string][]time.Duration, int64) {
	s.timing.mu.Lock()
	defer s.timing.mu.Unlock()
	out := map[string][]time.Duration{}
	for _, req := range s.timing.taken {
		out[req.path] = append(out[req.path], req.taken)
	}
	s.timing.taken = nil
	return out, s.timing.handshakes.Swap(0)
}

// ConversionServerOptions change a ConversionServer from the operator's webhook server's defaults.
type ConversionServerOptions struct {
	// HTTP2 offers HTTP/2, which the apiserver then uses at a loopback URL; by default the
	// server speaks HTTP/1.1 only, as the operator's does.
	HTTP2 bool
}

// Protocols counts the requests since the last call by HTTP version, and starts afresh.
func (s *ConversionServer) Protocols() map[string]int {
	s.timing.mu.Lock()
	defer s.timing.mu.Unlock()
	out := s.timing.protocols
	s.timing.protocols = nil
	return out
}

// StartConversionServer starts the server and waits until it listens.
func StartConversionServer(ctx context.Context, o ConversionServerOptions) (_ *ConversionServer, err error) {
	s := &ConversionServer{done: make(chan error, 1)}
	if s.dir, err = os.MkdirTemp("", "testenv-convert-"); err != nil {
		return nil, fmt.Errorf("conversion server: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(s.dir)
		}
	}()
	if s.CABundle, err = WriteSelfSignedCert(s.dir); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	countHandshakes := func(c *tls.Config) {
		c.VerifyConnection = func(tls.ConnectionState) error {
			s.timing.handshakes.Add(1)
			return nil
		}
	}
	tlsOpts := []func(*tls.Config){countHandshakes}
	if !o.HTTP2 {
		tlsOpts = append(tlsOpts, webhook.HTTP1Only)
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: s.dir, TLSOpts: tlsOpts})
	s.srv, s.port = srv, port
	s.URL = s.Handle(convertPath, webhook.NewConvertHandler())

	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() { s.done <- srv.Start(ctx) }()
	started := srv.StartedChecker()
	err = Poll(ctx, 30*time.Second, 50*time.Millisecond, "the conversion server to listen", func(context.Context) (bool, error) {
		select {
		case err := <-s.done:
			return false, Permanent(fmt.Errorf("conversion server: %w", err))
		default:
		}
		return started(nil) == nil, nil
	})
	if err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// Handle serves h at path too, timed like /convert, and returns its https URL. A benchmark
// uses it to set another webhook beside the product's on the same connection settings.
func (s *ConversionServer) Handle(path string, h http.Handler) string {
	s.srv.Register(path, s.timing.wrap(h))
	return fmt.Sprintf("https://127.0.0.1:%d%s", s.port, path)
}

// Close stops the server and removes its certificate.
func (s *ConversionServer) Close() error {
	s.cancel()
	err := <-s.done
	return errors.Join(err, os.RemoveAll(s.dir))
}

// WriteSelfSignedCert writes tls.crt and tls.key for 127.0.0.1 and localhost into dir and
// returns the certificate, which is its own CA.
func WriteSelfSignedCert(dir string) ([]byte, error) {
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	return certPEM, nil
}

func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "testenv-conversion-server"},
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
