package queues_test

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

// TestREADMEQueues runs the README's Queues block (marked <!-- test: queues -->) as written,
// from the repository root, on the suite's cluster: Kueue and the operator running, as after
// `make run QUEUES=1`.
func TestREADMEQueues(t *testing.T) {
	setUp(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range readmeBlock.FindAllStringSubmatch(string(data), -1) {
		if m[1] == "queues" {
			block = m[2]
		}
	}
	if block == "" {
		t.Fatal("README has no block marked <!-- test: queues -->")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.KubeconfigPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("README queues (%s):\n    %s", time.Since(began).Round(time.Millisecond),
		strings.ReplaceAll(strings.TrimRight(out.String(), "\n"), "\n", "\n    "))
	if err != nil {
		t.Fatalf("README queues, as written, failed: %v", err)
	}
}
