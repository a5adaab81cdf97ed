package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestREADMEByHand runs the README's "Local control plane by hand" block exactly as written:
// make cluster-up, the operator installing its own CRD and webhooks, a v1alpha1 sample Task run
// to success, make cluster-down. It uses the repository's default cluster directory and the
// ports the README names, as a person would.
func TestREADMEByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".cache", "cluster", readyFile)); err == nil {
		t.Skip("a cluster started with make cluster-up is running in .cache/cluster; the block would stop it")
	}
	block := testenv.READMEBlocks(t, "by-hand")["by-hand"]
	t.Cleanup(func() {
		// Should the block fail half way, leave nothing running.
		if err := stopCluster(filepath.Join(root, ".cache", "cluster")); err != nil {
			t.Logf("stop the cluster: %v", err)
		}
	})
	env := "CONTROLPLANE_BIN=" + os.Getenv(testenv.BinDirEnv)
	if os.Getenv(testenv.BinDirEnv) == "" {
		env = "PATH=" + os.Getenv("PATH")
	}
	testenv.RunREADMEWith(t, env, "by-hand", block, 8*time.Minute)
}
