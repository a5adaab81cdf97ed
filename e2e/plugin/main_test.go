// Package plugin_test runs the kubectl plugin as a user types it: `kubectl task ...` with
// cmd/kubectl-task on PATH, found by kubectl's plugin discovery, against the local control plane
// with the operator running as `make run` starts it. Pods log what podLog says, served by KWOK
// as a kubelet would through the apiserver's pods/log subresource (testenv Options.PodLog).
package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/internal/testenv"
)

// podLog is the log of every container on the fake Nodes.
const podLog = "report: 42 rows\nreport: done\n"

var (
	cluster *testenv.ControlPlane
	kube    client.Client
)

var suite = testenv.Fixture{Name: "plugin suite", Start: startSuite}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{Full: true, PodLog: podLog})
}

// setUp brings the suite up on first use and returns a namespace of the test's own.
func setUp(tb testing.TB) string {
	tb.Helper()
	suite.Use(tb)
	return testenv.NewNamespace(tb, kube)
}

func startSuite(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	cluster = cp
	plugin, err := testenv.PluginBinary()
	if err != nil {
		return err
	}
	// kubectl finds plugins on PATH: every kubectl this process starts (the README blocks'
	// too) sees `kubectl task`.
	if err := os.Setenv("PATH", filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		return err
	}
	if kube, err = testenv.NewClient(cp.Config); err != nil {
		return err
	}
	if err := testenv.CreateNamespace(ctx, kube, testenv.OperatorNamespace); err != nil {
		return err
	}
	operator, err := testenv.StartOperator(ctx, testenv.OperatorOptions{
		Name:       "plugin",
		Kubeconfig: cp.KubeconfigPath,
		Args:       []string{"--rate-limiter-base-delay=20ms"},
	})
	if err != nil {
		return err
	}
	operator.StopAtExit(80)
	return testenv.WaitWebhooks(ctx, cp.Config, time.Minute)
}

// result is what one command printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// kubectl runs `kubectl args...` as a user's shell would, with the cluster's kubeconfig and
// stdin, and returns what it printed and its exit code.
func kubectl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return kubectlWith(t, 2*time.Minute, []string{"KUBECONFIG=" + cluster.KubeconfigPath}, stdin, args...)
}

// kubectlWith runs kubectl with env added to this process's environment, within timeout.
func kubectlWith(t *testing.T, timeout time.Duration, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs kubectl and fails the test unless it exits 0; it returns stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := kubectl(t, "", args...)
	if r.code != 0 {
		t.Fatalf("kubectl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// apply creates objects from YAML in ns.
func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	if r := kubectl(t, manifest, "apply", "-n", ns, "-f", "-"); r.code != 0 {
		t.Fatalf("kubectl apply: exit %d: %s", r.code, r.stderr)
	}
}

func contains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
