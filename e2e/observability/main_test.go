// Package observability_test runs the operator as it runs in a cluster (leader election, its
// own webhook certificates) on a real control plane and checks what operators of the operator
// read: the metrics that the Grafana dashboard and the alerts query, and the log of a start.
package observability_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

var (
	kube     client.Client
	dyn      dynamic.Interface
	operator *testenv.Operator
	suite    = testenv.Fixture{Name: "observability suite", Start: startSuite}
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{Full: true})
}

// setUp brings the suite up on first use.
func setUp(tb testing.TB) {
	tb.Helper()
	suite.Use(tb)
}

// startSuite starts one operator, with leader election as deployed, on a control plane where
// it has never run: its first start, certificates and all.
func startSuite(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	var err error
	if kube, err = testenv.NewClient(cp.Config); err != nil {
		return err
	}
	if dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if err := testenv.CreateNamespace(ctx, kube, testenv.OperatorNamespace); err != nil {
		return err
	}
	operator, err = testenv.StartOperator(ctx, testenv.OperatorOptions{Name: "observability", Kubeconfig: cp.KubeconfigPath, LeaderElect: true})
	if err != nil {
		return err
	}
	operator.StopAtExit(60)
	return testenv.WaitWebhooks(ctx, cp.Config, 2*time.Minute)
}

// createTask creates a one-shot shell Task at v1 in namespace ns and reads it back at
// v1alpha1, which goes through the conversion webhook.
func createTask(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}}
	if _, err := dyn.Resource(taskv1.ResourceAt("v1")).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Task %s/%s: %v", ns, name, err)
	}
	if _, err := dyn.Resource(taskv1.ResourceAt("v1alpha1")).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("read Task %s/%s at v1alpha1: %v", ns, name, err)
	}
}
