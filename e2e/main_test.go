// Package e2e_test drives the operator the way a user does: a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, KWOK), the operator binary running
// with its webhooks on loopback exactly as `make run` starts it, and kubectl.
package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/internal/testenv"
)

// The suite the tests share, brought up by the first setUp.
var (
	cluster  *testenv.ControlPlane
	operator *testenv.Operator
	kube     client.Client
)

var suite = testenv.Fixture{Name: "e2e suite", Start: startSuite}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{Full: true})
}

// setUp brings up the suite on first use (the shared control plane and one operator on it)
// and returns a namespace of the test's own.
func setUp(tb testing.TB) string {
	tb.Helper()
	suite.Use(tb)
	return testenv.NewNamespace(tb, kube)
}

func startSuite(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	cluster = cp
	var err error
	if kube, err = testenv.NewClient(cp.Config); err != nil {
		return err
	}
	if err := testenv.CreateNamespace(ctx, kube, testenv.OperatorNamespace); err != nil {
		return err
	}
	operator, err = testenv.StartOperator(ctx, testenv.OperatorOptions{
		Name:       "e2e",
		Kubeconfig: cp.KubeconfigPath,
		// Fast certificate checks for the rotation test, fast retries for everything.
		Args: []string{"--cert-check-interval=2s", "--rate-limiter-base-delay=20ms"},
	})
	if err != nil {
		return err
	}
	operator.StopAtExit(80)
	return testenv.WaitWebhooks(ctx, cp.Config, time.Minute)
}
