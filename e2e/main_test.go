// Package e2e_test drives the operator the way a user does: a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, KWOK), the operator binary running
// with its webhooks on loopback exactly as `make run` starts it, and kubectl.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"sync"
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

var suite struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{Full: true})
}

// setUp brings up the suite on first use (the shared control plane and one operator on it)
// and returns a namespace of the test's own.
func setUp(tb testing.TB) string {
	tb.Helper()
	cp := testenv.Shared(tb)
	suite.once.Do(func() { suite.err = startSuite(cp) })
	if suite.err != nil {
		tb.Fatalf("e2e suite: %v", suite.err)
	}
	return testenv.NewNamespace(tb, kube)
}

func startSuite(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	cluster = cp
	scheme, err := testenv.NewScheme()
	if err != nil {
		return err
	}
	if kube, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client: %w", err)
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
	testenv.AtExit(func(failed bool) {
		if failed {
			fmt.Fprintf(os.Stderr, "--- operator log (tail) ---\n%s\n", operator.Tail(80))
		}
		if err := operator.Stop(15 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "stop the operator: %v\n", err)
		}
	})
	return testenv.WaitWebhooks(ctx, cp.Config, time.Minute)
}
