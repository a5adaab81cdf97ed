package controlplane

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BuildOperator builds the operator binary from the repository into dir and returns its path,
// for tests that run the operator as a process, the way a user does.
func BuildOperator(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "task-operator")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/task-operator")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build operator: %w\n%s", err, out)
	}
	return bin, nil
}
