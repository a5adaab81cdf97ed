package testenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

func TestAPIOnlyStartStop(t *testing.T) {
	t.Parallel()
	cp := testenv.StartT(t, testenv.Options{}) // logs the startup time

	pids := cp.PIDs()
	if got := slices.Sorted(maps.Keys(pids)); !slices.Equal(got, []string{testenv.Etcd, testenv.KubeAPIServer, "watchdog"}) {
		t.Errorf("processes = %v, want etcd, kube-apiserver and the watchdog", pids)
	}
	if !strings.HasPrefix(cp.EtcdEndpoint, "http://127.0.0.1:") {
		t.Errorf("etcd endpoint %q is not on loopback", cp.EtcdEndpoint)
	}
	assertTaskCRDServed(t, cp)
	assertKubeconfigWorks(t, cp.KubeconfigPath)

	dir := cp.Dir
	if err := cp.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop: kill(pid, 0) = %v", name, pid, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir %s not removed: %v", dir, err)
	}
}

func assertTaskCRDServed(t *testing.T, cp *testenv.ControlPlane) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := cs.Discovery().ServerResourcesForGroupVersion(taskv1.GroupVersion.String())
	if err != nil {
		t.Fatalf("discover example.com/v1: %v", err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == taskv1.Resource }) {
		t.Errorf("tasks not served at example.com/v1: %+v", resources.APIResources)
	}
}

// assertKubeconfigWorks checks the file a person (or kubectl) would use.
func assertKubeconfigWorks(t *testing.T, path string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", path, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("get default namespace with %s: %v", path, err)
	}
}

func TestEtcdStoresConfigMapAsProtobuf(t *testing.T) {
	t.Parallel()
	cp, cs, ns := fullCluster(t)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "raw-read"},
		Data:       map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	raw, err := cp.EtcdGet(t.Context(), "/registry/configmaps/"+ns+"/raw-read")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte("k8s\x00")) {
		t.Errorf("stored ConfigMap lacks the protobuf envelope prefix: %q", raw)
	}
	if !bytes.Contains(raw, []byte("raw-read")) || !bytes.Contains(raw, []byte("hello")) {
		t.Errorf("stored ConfigMap lacks its name or data: %q", raw)
	}
	if _, err := cp.EtcdGet(t.Context(), "/registry/configmaps/"+ns+"/absent"); !errors.Is(err, testenv.ErrKeyNotFound) {
		t.Errorf("EtcdGet(absent) error = %v, want ErrKeyNotFound", err)
	}
}

func TestEtcdStoresCustomResourceAsJSON(t *testing.T) {
	t.Parallel()
	cp, _, ns := fullCluster(t)
	if err := cp.InstallCRDs(t.Context(), filepath.Join("testdata", "widgets.yaml")); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w1"},
		"spec":       map[string]any{"size": "large"},
	}}
	gvr := schema.GroupVersionResource{Group: "e2e.example.com", Version: "v1", Resource: "widgets"}
	if _, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	raw, err := cp.EtcdGet(t.Context(), "/registry/e2e.example.com/widgets/"+ns+"/w1")
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		APIVersion string         `json:"apiVersion"`
		Spec       map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatalf("stored Widget is not JSON: %v: %q", err, raw)
	}
	if stored.APIVersion != "e2e.example.com/v1" || stored.Spec["size"] != "large" {
		t.Errorf("stored Widget = %s", raw)
	}
	objs, _, err := cp.StoredObjects(t.Context(), "/registry/e2e.example.com/widgets/")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(objs, func(o testenv.StoredObject) bool { return o.Key == ns+"/w1" })
	if i < 0 || objs[i].APIVersion() != "e2e.example.com/v1" || objs[i].ModRevision == 0 {
		t.Errorf("StoredObjects = %+v; want the widget, stored at e2e.example.com/v1", objs)
	}
}

func TestMissingBinariesFailClearly(t *testing.T) {
	t.Parallel()
	_, err := testenv.Start(t.Context(), testenv.Options{Full: true, BinDir: t.TempDir()})
	if err == nil {
		t.Fatal("Start succeeded without binaries")
	}
	for _, want := range []string{"kube-apiserver", "kwok", "hack/controlplane.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// A harness that dies without Stop (SIGKILL here; a panic in a goroutine or
// `go test -timeout` alike) must not leave its processes behind.
func TestWatchdogCleansUpAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; skipped with -short")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // the helper kills itself, so an error is expected
	var report crashReport
	if err := json.Unmarshal(out, &report); err != nil || len(report.PIDs) < 3 {
		t.Fatalf("crash helper reported %q (%v); stderr:\n%s", out, err, stderr.String())
	}
	testenv.Eventually(t, waitTimeout, "the crashed harness's processes and state to be gone", func(context.Context) (bool, error) {
		for name, pid := range report.PIDs {
			if testenv.ProcessAlive(pid) {
				return false, fmt.Errorf("%s (pid %d) still running", name, pid)
			}
		}
		if _, err := os.Stat(report.Dir); !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("state dir %s still there (%v)", report.Dir, err)
		}
		return true, nil
	})
}
