// Package queues_test runs Tasks through Kueue on the local control plane: Kueue's release
// manifests applied as shipped, its manager pod a stand-in process (testenv.InstallKueue), the
// operator running with its webhooks on loopback as `make run` starts it.
package queues_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/internal/kubelet"
	"example.com/task-operator/internal/testenv"
)

// The suite the tests share, brought up by the first setUp.
var (
	cluster  *testenv.ControlPlane
	kueue    *testenv.Kueue
	operator *testenv.Operator
	kube     client.Client
	dyn      dynamic.Interface
)

var suite struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if err := kubelet.CleanStalePodNetworks(); err != nil {
		fmt.Fprintln(os.Stderr, "clean stale pod networks:", err)
	}
	testenv.Main(m, testenv.Options{Full: true, StandInNamespaces: []string{testenv.KueueNamespace}})
}

// setUp brings up the suite on first use (the shared control plane with Kueue) and returns a
// namespace of the test's own. Kueue's manager runs in a network namespace of its own: without
// root and ip (iproute2) the test is skipped.
func setUp(tb testing.TB) string {
	tb.Helper()
	if err := kubelet.PodNetworksSupported(); err != nil {
		tb.Skipf("Kueue's manager pod runs in a network namespace of its own: %v", err)
	}
	cp := testenv.Shared(tb)
	suite.once.Do(func() { suite.err = startSuite(cp) })
	if suite.err != nil {
		tb.Fatalf("queues suite: %v", suite.err)
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
	if dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		return err
	}
	began := time.Now()
	if kueue, err = cp.InstallKueue(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kueue ready in %s\n", time.Since(began).Round(time.Second))
	testenv.AtExit(func(failed bool) {
		if failed {
			fmt.Fprintln(os.Stderr, kueue.LogTail(60))
		}
		if err := kueue.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop kueue: %v\n", err)
		}
	})
	// The operator starts once Kueue's API is served, so it watches Workloads.
	if err := testenv.CreateNamespace(ctx, kube, testenv.OperatorNamespace); err != nil {
		return err
	}
	operator, err = testenv.StartOperator(ctx, testenv.OperatorOptions{
		Name:       "queues",
		Kubeconfig: cp.KubeconfigPath,
		Args:       []string{"--rate-limiter-base-delay=20ms"},
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
