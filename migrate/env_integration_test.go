package migrate_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/conversion"
	"example.com/task-operator/e2e/controlplane"
)

// One control plane serves every integration test of the package. It is started by the first
// test that needs it, in Full mode because the StorageVersionMigration test needs
// kube-controller-manager, and stopped by TestMain. The unit tests never start it.

const crdName = "tasks.example.com"

var (
	envOnce sync.Once
	envErr  error
	shared  *testEnv
)

type testEnv struct {
	cp   *controlplane.ControlPlane
	cfg  *rest.Config
	kube kubernetes.Interface
	ax   apiextclient.Interface
	dyn  dynamic.Interface
	etcd *clientv3.Client

	// current is the CRD of this release; webhookURL and caBundle reach the in-process
	// conversion webhook.
	current    *apiextv1.CustomResourceDefinition
	webhookURL string
	caBundle   []byte
	stop       context.CancelFunc
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The webhook server logs through controller-runtime's logger; the tests have no use for it.
	crlog.SetLogger(logr.Discard())
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	reportTimings()
	os.Exit(code)
}

// cluster returns the shared control plane, starting it on first use.
func cluster(t testing.TB) *testEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a control plane (not with -short)")
	}
	envOnce.Do(func() { shared, envErr = startEnv() })
	if envErr != nil {
		t.Fatalf("control plane: %v", envErr)
	}
	return shared
}

func startEnv() (*testEnv, error) {
	began := time.Now()
	crd, err := loadCurrentCRD()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	env := &testEnv{current: crd, stop: cancel}
	// No CRD at start: every test installs the previous release's CRD itself.
	env.cp, err = controlplane.Start(ctx, controlplane.Options{Full: true, CRDPaths: []string{}})
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (*testEnv, error) {
		env.close()
		return nil, err
	}
	env.cfg = rest.CopyConfig(env.cp.Config)
	env.cfg.QPS, env.cfg.Burst = -1, 0
	if env.kube, err = kubernetes.NewForConfig(env.cfg); err != nil {
		return fail(err)
	}
	if env.ax, err = apiextclient.NewForConfig(env.cfg); err != nil {
		return fail(err)
	}
	if env.dyn, err = dynamic.NewForConfig(env.cfg); err != nil {
		return fail(err)
	}
	if env.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{env.cp.EtcdEndpoint}, DialTimeout: 10 * time.Second}); err != nil {
		return fail(err)
	}
	if env.webhookURL, env.caBundle, err = startConversionWebhook(ctx); err != nil {
		return fail(err)
	}
	for _, ns := range namespaces {
		_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(err)
		}
	}
	fmt.Fprintf(os.Stderr, "control plane (Full) and conversion webhook ready in %s (control plane %s)\n",
		time.Since(began).Round(time.Millisecond), env.cp.StartedIn.Round(time.Millisecond))
	return env, nil
}

func (env *testEnv) close() {
	if env.etcd != nil {
		env.etcd.Close()
	}
	env.stop()
	if env.cp != nil {
		if err := env.cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
}

// loadCurrentCRD reads the generated CRD of this release.
func loadCurrentCRD() (*apiextv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "example.com_tasks.yaml"))
	if err != nil {
		return nil, err
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("parse CRD: %w", err)
	}
	if crd.Name != crdName {
		return nil, fmt.Errorf("CRD is %s, want %s", crd.Name, crdName)
	}
	return &crd, nil
}

// previousReleaseCRD is the CRD as the release before v1 had it: only v1alpha1, served and
// stored, without conversion.
func previousReleaseCRD(current *apiextv1.CustomResourceDefinition) *apiextv1.CustomResourceDefinition {
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: current.Name},
		Spec:       *current.Spec.DeepCopy(),
	}
	crd.Spec.Versions = nil
	for _, v := range current.Spec.Versions {
		if v.Name == "v1alpha1" {
			v = *v.DeepCopy()
			v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, true, false, nil
			crd.Spec.Versions = append(crd.Spec.Versions, v)
		}
	}
	crd.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter}
	return crd
}

// startConversionWebhook serves /convert with the project's hub-and-spoke converter on
// 127.0.0.1 behind a fresh self-signed certificate; it returns the URL and the CA bundle.
func startConversionWebhook(ctx context.Context) (string, []byte, error) {
	dir, err := os.MkdirTemp("", "migrate-webhook-")
	if err != nil {
		return "", nil, err
	}
	context.AfterFunc(ctx, func() { os.RemoveAll(dir) })
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return "", nil, err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return "", nil, err
	}

	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	srv.Register("/convert", conversion.NewHandler())
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(ctx) }()
	started := srv.StartedChecker()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-errc:
			return "", nil, fmt.Errorf("conversion webhook: %w", err)
		default:
		}
		if err := started(nil); err == nil {
			break
		} else if time.Now().After(deadline) {
			return "", nil, fmt.Errorf("conversion webhook: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("https://127.0.0.1:%d/convert", port), certPEM, nil
}

func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "migrate-test-conversion-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
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

// etcdPrefix is where the apiserver keeps the Tasks (envtest uses the default /registry).
const etcdPrefix = "/registry/example.com/tasks/"

// storedEncodings reads every Task straight from etcd and returns the apiVersion each is
// encoded at, by "namespace/name".
func (env *testEnv) storedEncodings(ctx context.Context) (map[string]string, int64, error) {
	resp, err := env.etcd.Get(ctx, etcdPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		var head struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(kv.Value, &head); err != nil {
			return nil, 0, fmt.Errorf("%s is not JSON: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), etcdPrefix)] = head.APIVersion
	}
	return out, resp.Header.Revision, nil
}

// rawStored returns the raw etcd bytes and mod revision of every Task.
func (env *testEnv) rawStored(ctx context.Context) (map[string]string, error) {
	resp, err := env.etcd.Get(ctx, etcdPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%d:%s", kv.ModRevision, kv.Value)
	}
	return out, nil
}

// compact compacts etcd at its current revision, expiring every continue token issued so far.
func (env *testEnv) compact(ctx context.Context) (int64, error) {
	resp, err := env.etcd.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := env.etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}
