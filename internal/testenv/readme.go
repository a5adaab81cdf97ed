package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock matches a shell block of the README marked for a test: <!-- test: NAME -->.
var readmeBlock = regexp.MustCompile("(?s)<!-- test: ([a-z-]+) -->\\s*```sh\\n(.*?)```")

// READMEBlocks returns the README's shell blocks marked <!-- test: NAME -->, by name, failing the
// test when one of want is missing.
func READMEBlocks(t testing.TB, want ...string) map[string]string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range readmeBlock.FindAllStringSubmatch(string(data), -1) {
		blocks[m[1]] = m[2]
	}
	for _, name := range want {
		if blocks[name] == "" {
			t.Fatalf("README has no block marked <!-- test: %s -->", name)
		}
	}
	return blocks
}

// RunREADME runs a README block exactly as written, from the repository root, with the control
// plane's kubeconfig, stopping at the first command that fails; it returns the block's output.
func RunREADME(t testing.TB, cp *ControlPlane, name, block string, timeout time.Duration) string {
	t.Helper()
	return RunREADMEWith(t, "KUBECONFIG="+cp.KubeconfigPath, name, block, timeout)
}

// RunREADMEWith is RunREADME with env added to the block's environment instead of a control
// plane's kubeconfig, for a block that starts its own cluster.
func RunREADMEWith(t testing.TB, env, name, block string, timeout time.Duration) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env)
	// Its own process group, so that whatever the block left in the background (a failed block
	// never reaches its kill %1) is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second // a background process still holding the output
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("README %s (%s):\n    %s", name, time.Since(began).Round(time.Millisecond),
		strings.ReplaceAll(strings.TrimRight(out.String(), "\n"), "\n", "\n    "))
	if err != nil {
		t.Fatalf("README %s, as written, failed: %v", name, err)
	}
	return out.String()
}
