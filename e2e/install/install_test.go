package install_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/kubelet"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/versions"
)

const (
	deployment     = "task-operator-controller-manager"
	webhookService = "task-operator-webhook-service"
	certSecret     = "task-operator-webhook-cert"
	crdName        = "tasks.example.com"
	imageV1        = "registry.example.com/task-operator:v1.0.0"
	imageV1_1      = "registry.example.com/task-operator:v1.1.0"
)

type env struct {
	t        *testing.T
	cp       *testenv.ControlPlane
	c        client.Client
	dyn      dynamic.Interface
	standins *kubelet.StandIns
	scraper  string // a bearer token allowed to read /metrics
}

// TestInstallAsShipped installs with the README's commands and exercises what only an install
// as shipped can show: replicas as Service endpoints, leader election, a rolling restart with no
// failed read or write, certificate rotation, the troubleshooting commands, a node drain at one
// replica, the upgrade with the
// in-cluster migration, the uninstall, and the cert-manager overlay wired the same way.
func TestInstallAsShipped(t *testing.T) {
	if err := kubelet.PodNetworksSupported(); err != nil {
		t.Skipf("the in-cluster e2e runs each operator pod in a network namespace of its own: %v", err)
	}
	began := time.Now()
	e := newEnv(t)
	blocks := testenv.READMEBlocks(t, "deploy", "upgrade", "uninstall", "troubleshooting", "uninstall-without-operator")
	steps := []struct {
		name string
		run  func(*env)
	}{
		{"deploy", func(e *env) {
			testenv.RunREADME(e.t, e.cp, "deploy", blocks["deploy"], 5*time.Minute)
			e.checkInstalled(imageV1)
		}},
		{"rolling restart", (*env).rollingRestart},
		{"certificate rotation", (*env).rotateCertificate},
		{"troubleshooting", func(e *env) { e.troubleshooting(blocks["troubleshooting"]) }},
		{"node drain at one replica", (*env).drainAtOneReplica},
		{"upgrade", func(e *env) { e.upgrade(blocks["upgrade"]) }},
		{"uninstall", func(e *env) { e.uninstall(blocks["uninstall"]) }},
		{"cert-manager overlay and an uninstall without the operator", func(e *env) { e.certManager(blocks["uninstall-without-operator"]) }},
	}
	for _, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) {
			sub := *e
			sub.t = t
			step.run(&sub)
		})
		if !ok {
			e.dumpLogs()
			return
		}
	}
	t.Logf("in-cluster e2e: %s", time.Since(began).Round(time.Second))
}

func newEnv(t *testing.T) *env {
	cp := testenv.Shared(t)
	scheme, err := testenv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apix.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	bin := operatorBinary(t)
	standins, err := cp.RunStandIns(kubelet.Options{
		Namespace: operatorNamespace,
		Binaries:  map[string]string{imageV1: bin, imageV1_1: bin},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := standins.Stop(); err != nil {
			t.Errorf("stand-ins: %v", err)
		}
	})
	return &env{t: t, cp: cp, c: c, dyn: dyn, standins: standins}
}

func (e *env) dumpLogs() {
	for name, p := range e.standins.Processes() {
		e.t.Logf("--- pod %s (%s) log tail ---\n%s", name, p.IP, testenv.Tail(p.Log(), 40))
	}
	if err := e.standins.Err(); err != nil {
		e.t.Logf("stand-ins: %v", err)
	}
}

func (e *env) eventually(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	testenv.Eventually(e.t, timeout, what, cond)
}

// managerPods are the Deployment's pods that are not terminating.
func (e *env) managerPods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := e.c.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"})
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }), err
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkInstalled: two replicas run as stand-ins with the image set, both are ready endpoints
// of the webhook Service, the CA in the Secret is the one injected, and one replica leads.
func (e *env) checkInstalled(img string) {
	t := e.t
	e.eventually("two ready replicas of "+img+", both ready endpoints of the webhook Service", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.managerPods(ctx)
		if err != nil {
			return false, err
		}
		ips := map[string]bool{}
		for _, p := range pods {
			if !podReady(p) || p.Spec.Containers[0].Image != img {
				return false, fmt.Errorf("pod %s ready=%v image %s", p.Name, podReady(p), p.Spec.Containers[0].Image)
			}
			ips[p.Status.PodIP] = true
		}
		if len(pods) != 2 {
			return false, fmt.Errorf("%d pods", len(pods))
		}
		endpoints, err := e.readyEndpoints(ctx)
		if err != nil {
			return false, err
		}
		if len(endpoints) != 2 || !ips[endpoints[0]] || !ips[endpoints[1]] {
			return false, fmt.Errorf("ready endpoints %v, pod IPs %v", endpoints, ips)
		}
		return true, nil
	})
	for _, p := range e.mustPods() {
		if env := p.Spec.Containers[0].Env; !slices.ContainsFunc(env, func(v corev1.EnvVar) bool { return v.Name == "RUNNER_IMAGE" && v.Value == img }) {
			t.Errorf("pod %s: RUNNER_IMAGE is not %s: %+v", p.Name, img, env)
		}
	}
	e.checkCAInjected()
	e.checkOneLeader()
}

func (e *env) mustPods() []corev1.Pod {
	pods, err := e.managerPods(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return pods
}

func (e *env) readyEndpoints(ctx context.Context) ([]string, error) {
	var slices discoveryv1.EndpointSliceList
	if err := e.c.List(ctx, &slices, client.InNamespace(operatorNamespace), client.MatchingLabels{discoveryv1.LabelServiceName: webhookService}); err != nil {
		return nil, err
	}
	var ips []string
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	return ips, nil
}

// checkCAInjected: after a fresh install the CRD and both webhook configurations trust the CA
// the operator keeps in its Secret.
func (e *env) checkCAInjected() {
	t := e.t
	var secret corev1.Secret
	if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: certSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	var crd apix.CustomResourceDefinition
	if err := e.c.Get(t.Context(), client.ObjectKey{Name: crdName}, &crd); err != nil {
		t.Fatal(err)
	}
	if len(ca) == 0 || !bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, ca) {
		t.Errorf("the CRD's caBundle is not the CA of Secret %s", certSecret)
	}
}

// scrape reads a replica's metrics over HTTPS with a scraper's token, as Prometheus would.
func (e *env) scrape(ctx context.Context, ip string) ([]testenv.Sample, error) {
	if e.scraper == "" {
		e.scraper = e.scraperToken()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, "8443")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.scraper)
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the default metrics certificate is self-signed
	}}
	resp, err := insecure.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET metrics of %s: %s", ip, resp.Status)
	}
	return testenv.ParseMetrics(resp.Body)
}

// scraperToken is a token of a ServiceAccount bound to the shipped metrics-reader role.
func (e *env) scraperToken() string {
	t := e.t
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scraper"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "task-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := e.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := e.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// checkOneLeader: exactly one replica holds the Lease, and only it reports taskoperator_tasks.
func (e *env) checkOneLeader() {
	e.eventually("one leader, the only one to report taskoperator_tasks", time.Minute, func(ctx context.Context) (bool, error) {
		leaders, reporting := 0, 0
		for _, p := range e.mustPods() {
			samples, err := e.scrape(ctx, p.Status.PodIP)
			if err != nil {
				return false, err
			}
			leads, reports := false, false
			for _, s := range samples {
				leads = leads || (s.Name == "leader_election_master_status" && s.Value == 1)
				reports = reports || s.Name == "taskoperator_tasks"
			}
			if leads {
				leaders++
			}
			if reports != leads {
				return false, fmt.Errorf("pod %s leads=%v but reports taskoperator_tasks=%v", p.Name, leads, reports)
			}
			if reports {
				reporting++
			}
		}
		if leaders != 1 || reporting != 1 {
			return false, fmt.Errorf("%d leaders, %d report taskoperator_tasks", leaders, reporting)
		}
		return true, nil
	})
}

func (e *env) tasks(version, ns string) dynamic.ResourceInterface {
	return e.dyn.Resource(taskGVR(version)).Namespace(ns)
}

func (e *env) newNamespace(name string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	if err := e.c.Create(e.t.Context(), ns); err != nil {
		e.t.Fatal(err)
	}
	return ns.Name
}

func v1alpha1Task(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "Task",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"type": "shell", "shell": "true", "replicas": int64(1)},
	}}
}

func v1Task(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}},
			"schedule": map[string]any{"cron": "@hourly", "timeZone": "Europe/Paris"}},
	}}
}

// traffic reads a Task at v1alpha1 (a conversion through the Service each time) and writes a
// Task at v1 (both admission webhooks through the Service) until stopped.
type traffic struct {
	reads, readFailures, writes, writeFailures atomic.Int64
	mu                                         sync.Mutex
	errs                                       []string
	stop                                       chan struct{}
	wg                                         sync.WaitGroup
}

func (e *env) startTraffic(ns string) *traffic {
	ctx := e.t.Context()
	if _, err := e.tasks("v1alpha1", ns).Create(ctx, v1alpha1Task(ns, "read-me"), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	tr := &traffic{stop: make(chan struct{})}
	record := func(n, failures *atomic.Int64, err error) {
		n.Add(1)
		if err != nil {
			failures.Add(1)
			tr.mu.Lock()
			tr.errs = append(tr.errs, err.Error())
			tr.mu.Unlock()
		}
	}
	tr.wg.Go(func() {
		for tr.running() {
			_, err := e.tasks("v1alpha1", ns).Get(ctx, "read-me", metav1.GetOptions{})
			record(&tr.reads, &tr.readFailures, err)
		}
	})
	if _, err := e.tasks("v1", ns).Create(ctx, v1Task(ns, "write-me"), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	tr.wg.Go(func() {
		for i := 0; tr.running(); i++ {
			// An update at v1: the mutating and the validating webhook both see it.
			patch := fmt.Sprintf(`{"metadata":{"labels":{"write":"%d"}}}`, i)
			_, err := e.tasks("v1", ns).Patch(ctx, "write-me", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			record(&tr.writes, &tr.writeFailures, err)
		}
	})
	return tr
}

func (tr *traffic) running() bool {
	select {
	case <-tr.stop:
		return false
	default:
		return true
	}
}

func (tr *traffic) finish(t *testing.T, what string) {
	t.Helper()
	close(tr.stop)
	tr.wg.Wait()
	t.Logf("%s: %d reads at v1alpha1 (%d failed), %d Task writes (%d failed)", what, tr.reads.Load(), tr.readFailures.Load(), tr.writes.Load(), tr.writeFailures.Load())
	if tr.reads.Load() == 0 || tr.writes.Load() == 0 {
		t.Errorf("%s: no traffic went through", what)
	}
	if tr.readFailures.Load() > 0 || tr.writeFailures.Load() > 0 {
		t.Errorf("%s: failures, first ones: %v", what, tr.errs[:min(5, len(tr.errs))])
	}
}

// rollingRestart restarts the Deployment under reads and writes through the Service: none may
// fail, and a terminating replica must keep answering while it drains.
func (e *env) rollingRestart() {
	t := e.t
	ns := e.newNamespace("rollout")
	old := map[types.UID]string{}
	for _, p := range e.mustPods() {
		old[p.UID] = p.Status.PodIP
	}
	tr := e.startTraffic(ns)
	drained := make(chan error, 1)
	go func() { drained <- e.watchDrain(old) }()
	runKubectl(t, e.cp, "-n", operatorNamespace, "rollout", "restart", "deployment/"+deployment)
	runKubectl(t, e.cp, "-n", operatorNamespace, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
	// The old replicas still drain after the rollout reports done: keep the traffic on until
	// their processes are gone.
	e.eventually("the old replicas' processes to exit", 2*time.Minute, func(ctx context.Context) (bool, error) {
		procs := e.standins.Processes()
		for _, p := range procs {
			for _, ip := range old {
				if p.IP.String() == ip {
					return false, fmt.Errorf("pod %s (%s) still runs", p.Pod, ip)
				}
			}
		}
		return len(procs) == 2, fmt.Errorf("%d processes", len(procs))
	})
	tr.finish(t, "rolling restart")
	if err := <-drained; err != nil {
		t.Error(err)
	}
	e.checkInstalled(imageV1)
	// The replicas record who writes at which version as their ServiceAccount may (the old ones
	// at shutdown at the latest): the traffic created a Task at v1alpha1.
	e.eventually("the write at v1alpha1 in the version usage record", time.Minute, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: versions.UsageConfigMap}, &cm); err != nil {
			return false, err
		}
		records, bad := versions.DecodeUsage(cm.Data)
		for _, r := range records {
			if slices.ContainsFunc(r.Entries, func(e versions.UsageEntry) bool { return e.Version == "v1alpha1" }) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no entry at v1alpha1 in %d records (%v unreadable)", len(records), bad)
	})
}

// watchDrain waits for the first old replica to be deleted, then checks that it fails
// readiness while its webhook server still answers a ConversionReview, closing the connection
// after the response.
func (e *env) watchDrain(old map[types.UID]string) error {
	ctx, cancel := context.WithTimeout(e.t.Context(), 3*time.Minute)
	defer cancel()
	var ip string
	err := testenv.Poll(ctx, 3*time.Minute, 50*time.Millisecond, "an old replica to terminate", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(operatorNamespace)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if _, isOld := old[p.UID]; isOld && p.DeletionTimestamp != nil {
				ip = p.Status.PodIP
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return testenv.Poll(ctx, 30*time.Second, 100*time.Millisecond, "the terminating replica "+ip+" to fail readiness while still converting", func(ctx context.Context) (bool, error) {
		ready, err := probe(ctx, "http://"+net.JoinHostPort(ip, "8081")+"/readyz")
		if err != nil || ready {
			return false, fmt.Errorf("readyz: ready=%v err=%v", ready, err)
		}
		// Not ready, so draining: it must still convert, now, and say goodbye to the connection.
		if err := convertAt(ctx, ip); err != nil {
			return false, testenv.Permanent(err)
		}
		return true, nil
	})
}

func probe(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// convertAt sends a ConversionReview straight to a replica's webhook port.
func convertAt(ctx context.Context, ip string) error {
	review := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"request": map[string]any{"uid": "drain", "desiredAPIVersion": "example.com/v1alpha1", "objects": []any{v1Task("default", "x").Object}},
	}
	body, _ := json.Marshal(review)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+net.JoinHostPort(ip, "9443")+"/convert", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only whether it answers
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("the draining replica stopped answering: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Response struct {
			Result struct{ Status string } `json:"result"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response.Result.Status != "Success" {
		return fmt.Errorf("draining replica's conversion: %s, %v, %+v", resp.Status, err, out)
	}
	// A kept-alive connection would be closed under the apiserver when the replica exits.
	if !resp.Close {
		return fmt.Errorf("the draining replica's response keeps the connection open (Connection: %q)", resp.Header.Get("Connection"))
	}
	return nil
}

// rotateCertificate invalidates the serving certificate in the Secret, as expiry would: the
// leader issues a new one from the same CA, every replica serves it, and no read or write fails.
func (e *env) rotateCertificate() {
	t := e.t
	ctx := t.Context()
	ns := e.newNamespace("rotation")
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: operatorNamespace, Name: certSecret}
	if err := e.c.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	before := secret.Data["tls.crt"]
	tr := e.startTraffic(ns)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"tls.crt":"`+encode([]byte("expired"))+`"}}`))
	if err := e.c.Patch(ctx, &secret, patch); err != nil {
		t.Fatal(err)
	}
	e.eventually("every replica to serve a new certificate", time.Minute, func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, key, &secret); err != nil {
			return false, err
		}
		now := secret.Data["tls.crt"]
		if bytes.Equal(now, before) || string(now) == "expired" {
			return false, fmt.Errorf("the Secret holds no new certificate yet")
		}
		block, _ := pem.Decode(now)
		if block == nil {
			return false, fmt.Errorf("the Secret's tls.crt is not PEM")
		}
		for _, p := range e.mustPods() {
			served, err := servedCertificate(p.Status.PodIP)
			if err != nil {
				return false, err
			}
			if !bytes.Equal(served.Raw, block.Bytes) {
				return false, fmt.Errorf("pod %s still serves %s", p.Name, served.SerialNumber)
			}
		}
		return true, nil
	})
	time.Sleep(2 * time.Second) // traffic on the new certificate too
	tr.finish(t, "certificate rotation")
	e.checkCAInjected()
}

func encode(b []byte) string {
	out, _ := json.Marshal(b) // []byte marshals as base64
	return strings.Trim(string(out), `"`)
}

func servedCertificate(ip string) (*x509.Certificate, error) { return servedCertificateAt(ip, "9443") }

func servedCertificateAt(ip, port string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(ip, port),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate, trusts nothing
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}
