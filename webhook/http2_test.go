package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/webhook"
)

// The apiserver offers HTTP/2 to a webhook only at a loopback URL; behind a Service it speaks
// HTTP/1.1. The server must do the same by default, so that local runs and tests measure what a
// cluster gets.
func TestServerOffersHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enable bool
		want   string
	}{
		{"default", false, "http/1.1"},
		{"--enable-http2", true, "h2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, ca := startServer(t, tc.enable)
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(ca)
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := conn.ConnectionState().NegotiatedProtocol; got != tc.want {
				t.Errorf("a client offering h2 and http/1.1 got %q, want %q", got, tc.want)
			}
		})
	}
}

func startServer(t *testing.T, enableHTTP2 bool) (addr string, ca []byte) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testenv.WriteSelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	o := webhook.DefaultOptions()
	o.Host, o.Port, o.CertDir, o.SelfManagedCerts, o.EnableHTTP2 = "127.0.0.1", port, dir, false, enableHTTP2
	srv := webhook.Server(o, nil)
	srv.Register("/ok", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	err = testenv.Poll(ctx, 30*time.Second, 20*time.Millisecond, "the webhook server to listen", func(context.Context) (bool, error) {
		err := srv.StartedChecker()(nil)
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port), ca
}
