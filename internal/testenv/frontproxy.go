package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// The front proxy: how kube-apiserver's aggregator vouches for the user of a request it proxies
// to an aggregated API (an APIService backed by a Service, such as Kueue's visibility API). It
// presents a client certificate of a CA of its own and names the user in X-Remote-* headers;
// the extension server trusts the headers because kube-apiserver publishes that CA in
// kube-system/extension-apiserver-authentication. envtest configures none of it, and without it
// the aggregator's own availability check is refused (403) and the APIService never becomes
// Available, which breaks discovery, and with it namespace deletion and garbage collection.

// frontProxyClientName is the certificate's CommonName, the one allowed name.
const frontProxyClientName = "front-proxy-client"

// frontProxyFlags writes a front-proxy CA and client certificate into dir and returns the
// kube-apiserver flags that use them, as kubeadm sets them.
func frontProxyFlags(dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("front proxy: %w", err)
	}
	caCert, caKey, err := newCertificate(nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "testenv-front-proxy-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return nil, fmt.Errorf("front proxy CA: %w", err)
	}
	clientCert, clientKey, err := newCertificate(caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("front proxy client certificate: %w", err)
	}
	files := map[string][]byte{
		"ca.crt":     pemBlock("CERTIFICATE", caCert.Raw),
		"client.crt": pemBlock("CERTIFICATE", clientCert.Raw),
	}
	if files["client.key"], err = pemKey(clientKey); err != nil {
		return nil, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("front proxy: %w", err)
		}
	}
	return map[string]string{
		"requestheader-client-ca-file":       filepath.Join(dir, "ca.crt"),
		"requestheader-allowed-names":        frontProxyClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             filepath.Join(dir, "client.crt"),
		"proxy-client-key-file":              filepath.Join(dir, "client.key"),
	}, nil
}

// newCertificate signs tmpl with parent's key (self-signed when parent is nil), valid for a
// year: a `make run` cluster may live long.
func newCertificate(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func pemKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}
