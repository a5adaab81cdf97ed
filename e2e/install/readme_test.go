package install_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

var readmeBlock = regexp.MustCompile("(?s)<!-- test: ([a-z-]+) -->\\s*```sh\\n(.*?)```")

// readmeBlocks are the README's shell blocks marked <!-- test: NAME -->, by name.
func readmeBlocks(t *testing.T) map[string]string {
	t.Helper()
	root, err := testenv.RepoRoot()
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
	for _, want := range []string{"deploy", "upgrade", "uninstall", "troubleshooting"} {
		if blocks[want] == "" {
			t.Fatalf("README has no block marked <!-- test: %s -->", want)
		}
	}
	return blocks
}

// runREADME runs a README block exactly as written, from the repository root, with the control
// plane's kubeconfig, stopping at the first command that fails.
func runREADME(t *testing.T, cp *testenv.ControlPlane, name, block string, timeout time.Duration) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("README %s (%s):\n%s", name, time.Since(began).Round(time.Millisecond), indent(out.String()))
	if err != nil {
		t.Fatalf("README %s, as written, failed: %v", name, err)
	}
	return out.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
