package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"example.com/task-operator/e2e/controlplane"
)

// crashHelperEnv turns the test binary into a harness that dies without
// Stop; see TestWatchdogCleansUpAfterCrash.
const crashHelperEnv = "CONTROLPLANE_TEST_CRASH_HELPER"

// The Full control plane is shared by the package's tests (it takes seconds
// to start) and started by the first test that needs it.
var shared struct {
	once sync.Once
	cp   *controlplane.ControlPlane
	err  error
}

func TestMain(m *testing.M) {
	if os.Getenv(crashHelperEnv) == "1" {
		crashHelper()
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	code := m.Run()
	if shared.cp == nil {
		return code
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "shared control plane logs:\n%s", shared.cp.TailLogs(50))
	}
	if err := shared.cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop shared control plane: %v\n", err)
		return 1
	}
	return code
}

// fullCluster returns the shared Full control plane and a client for it.
func fullCluster(t *testing.T) (*controlplane.ControlPlane, kubernetes.Interface) {
	t.Helper()
	shared.once.Do(func() {
		shared.cp, shared.err = controlplane.Start(context.Background(), controlplane.Options{Full: true})
	})
	if shared.err != nil {
		t.Fatalf("shared control plane: %v", shared.err)
	}
	return shared.cp, clientFor(t, shared.cp)
}

func clientFor(t *testing.T, cp *controlplane.ControlPlane) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cs
}

// newNamespace isolates a test's objects in the shared control plane.
func newNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

const waitTimeout = 90 * time.Second

// eventually polls cond until it holds; cond's error explains the current
// state for the failure message.
func eventually(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s; last state: %v", waitTimeout, what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// crashReport is what crashHelper leaves for TestWatchdogCleansUpAfterCrash
// to check.
type crashReport struct {
	PIDs map[string]int
	Dir  string
}

// crashHelper starts an API-only control plane, reports it on stdout and
// SIGKILLs itself, as a test binary hit by a fatal error would die.
func crashHelper() {
	cp, err := controlplane.Start(context.Background(), controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(crashReport{PIDs: cp.PIDs(), Dir: cp.Dir}); err != nil {
		os.Exit(1)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}
