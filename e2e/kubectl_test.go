package e2e_test

import (
	"context"
	"testing"

	"example.com/task-operator/internal/testenv"
)

// kubectl runs kubectl on the test cluster with stdin and returns stdout; the error quotes
// stderr.
func kubectl(stdin string, args ...string) (string, error) {
	stdout, _, err := testenv.Kubectl(context.Background(), cluster.KubeconfigPath, []byte(stdin), args...)
	return stdout, err
}

func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
