package plugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/testenv"
)

// clusterWithoutCRD is an API-only control plane of the test's own, without the Task CRD, and a
// way to run the plugin against it as kubectl finds it, with a discovery cache of the test's own.
func clusterWithoutCRD(t *testing.T) (*testenv.ControlPlane, func(args ...string) result) {
	t.Helper()
	plugin, err := testenv.PluginBinary()
	if err != nil {
		t.Fatal(err)
	}
	cp := testenv.StartT(t, testenv.Options{CRDPaths: []string{}})
	cache := t.TempDir()
	env := []string{"KUBECONFIG=" + cp.KubeconfigPath, "PATH=" + filepath.Dir(plugin) + string(os.PathListSeparator) + os.Getenv("PATH")}
	run := func(args ...string) result {
		t.Helper()
		return kubectlWith(t, time.Minute, env, "", append(append([]string{"task"}, args...), "--cache-dir", cache)...)
	}
	return cp, run
}

// TestVersionWithoutTheCRDStillPrintsTheClusterAndNoOperator: `version` on a cluster the
// operator is not installed in (no CRD) prints the Kubernetes version and that no operator is
// found, and exits 0: what one wants to see while debugging an install.
func TestVersionWithoutTheCRDStillPrintsTheClusterAndNoOperator(t *testing.T) {
	_, task := clusterWithoutCRD(t)
	r := task("version")
	if r.code != 0 {
		t.Fatalf("version: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	contains(t, "kubectl task version", r.stdout, "Client: kubectl-task ", "Kubernetes: v1.", "Operator: not found in the cluster")
	if r.stderr != "" {
		t.Errorf("version: stderr %q", r.stderr)
	}
}

// TestACRDRemovedSinceDiscoveryWasCachedIsReportedAsNotInstalled: once the CRD is deleted, a
// command whose cached discovery still lists Tasks says the CRD is not installed, not that the
// Task is not found.
func TestACRDRemovedSinceDiscoveryWasCachedIsReportedAsNotInstalled(t *testing.T) {
	cp, task := clusterWithoutCRD(t)
	notServed := `error: the cluster does not serve Task example.com/v1: is the task-operator's CRD installed?`
	if r := task("status", "x", "-n", "default"); r.code == 0 || strings.TrimSpace(r.stderr) != notServed {
		t.Fatalf("status before the CRD is installed: exit %d, stderr %q, want %q", r.code, r.stderr, notServed)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.InstallCRDs(t.Context(), filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
	// Discovery is cached now, Tasks included (a cache that lacked them is refreshed).
	notFound := `error: task "x" not found in namespace "default"`
	if r := task("status", "x", "-n", "default"); r.code == 0 || strings.TrimSpace(r.stderr) != notFound {
		t.Fatalf("status with the CRD installed: exit %d, stderr %q, want %q", r.code, r.stderr, notFound)
	}
	c, err := testenv.NewClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "tasks.example.com"
	if err := c.Delete(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the CRD is gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, errors.Join(err, errors.New("the CRD is still there"))
	})
	for _, args := range [][]string{{"status", "x"}, {"runs", "x"}, {"suspend", "x"}} {
		if r := task(append(args, "-n", "default")...); r.code == 0 || strings.TrimSpace(r.stderr) != notServed {
			t.Errorf("%s after the CRD was deleted: exit %d, stderr %q, want %q", strings.Join(args, " "), r.code, r.stderr, notServed)
		}
	}
	if r := task("version"); r.code != 0 {
		t.Errorf("version after the CRD was deleted: exit %d, stderr %q", r.code, r.stderr)
	}
}
