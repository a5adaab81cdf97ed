package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/testenv"
)

// crashHelperEnv turns the test binary into a harness that dies without
// Stop; see TestWatchdogCleansUpAfterCrash.
const crashHelperEnv = "CONTROLPLANE_TEST_CRASH_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(crashHelperEnv) == "1" {
		crashHelper()
		return
	}
	testenv.Main(m, testenv.Options{Full: true})
}

// fullCluster returns the shared Full control plane, a client for it and a namespace of the
// test's own.
func fullCluster(t *testing.T) (*testenv.ControlPlane, kubernetes.Interface, string) {
	t.Helper()
	cp := testenv.Shared(t)
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cp, cs, testenv.NewNamespace(t, c)
}

const waitTimeout = 90 * time.Second

// crashReport is what crashHelper leaves for TestWatchdogCleansUpAfterCrash
// to check.
type crashReport struct {
	PIDs map[string]int
	Dir  string
}

// crashHelper starts an API-only control plane, reports it on stdout and
// SIGKILLs itself, as a test binary hit by a fatal error would die.
func crashHelper() {
	cp, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(crashReport{PIDs: cp.PIDs(), Dir: cp.Dir}); err != nil {
		os.Exit(1)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}
