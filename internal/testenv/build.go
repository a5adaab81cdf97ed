package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	workDirOnce sync.Once
	workDir     string
	workDirErr  error

	operatorBinOnce sync.Once
	operatorBin     string
	operatorBinErr  error
)

// WorkDir is this process's scratch directory, where operators keep their logs and
// certificates. Main removes it at the end; other programs call RemoveWorkDir.
func WorkDir() (string, error) {
	workDirOnce.Do(func() {
		workDir, workDirErr = os.MkdirTemp("", "testenv-")
	})
	return workDir, workDirErr
}

// RemoveWorkDir removes WorkDir if it was made.
func RemoveWorkDir() error {
	if workDir == "" {
		return nil
	}
	return os.RemoveAll(workDir)
}

// OperatorBinary returns cmd/task-operator built from the working tree. It is built at most
// once per state of its sources (see sourcesHash), into <repo>/.cache/operator under a name
// that hashes them: the test packages that run the operator, which go test runs in parallel,
// share one binary instead of each linking its own, and never overwrite one another's.
func OperatorBinary() (string, error) {
	operatorBinOnce.Do(func() { operatorBin, operatorBinErr = buildOperator() })
	return operatorBin, operatorBinErr
}

func buildOperator() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	key, err := sourcesHash(root, operatorPackage)
	if err != nil {
		return "", fmt.Errorf("build operator: %w", err)
	}
	dir := filepath.Join(root, ".cache", "operator")
	bin := filepath.Join(dir, "task-operator-"+key)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build operator: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", fmt.Errorf("build operator: %w", err)
	}
	defer unlock()
	// Another process may have built it while this one waited for the lock.
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := goBuild(root, bin); err != nil {
		return "", err
	}
	pruneOtherBinaries(dir, bin)
	return bin, nil
}

// goBuild builds the operator into a temporary name and renames it, so that no one ever runs
// a half-written binary.
func goBuild(root, bin string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, operatorPackage)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("build operator: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("build operator: %w", err)
	}
	return nil
}

// pruneOtherBinaries removes the binaries of earlier states of the sources. A process still
// running one keeps its file open; unlinking it does not disturb it.
func pruneOtherBinaries(dir, keep string) {
	others, _ := filepath.Glob(filepath.Join(dir, "task-operator-*"))
	for _, path := range others {
		if path != keep && !strings.HasSuffix(path, ".tmp") {
			_ = os.Remove(path)
		}
	}
}

func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// operatorPackage is what OperatorBinary builds.
const operatorPackage = "./cmd/task-operator"

// sourcesHash hashes what a build of pkg reads from the module: the Go version, go.mod,
// go.sum, and the Go and embedded files of every package of the module that pkg depends on.
// Dependencies outside the module are pinned by go.sum.
func sourcesHash(root, pkg string) (string, error) {
	h := sha256.New()
	version, err := exec.Command("go", "version").Output()
	if err != nil {
		return "", fmt.Errorf("go version: %w", err)
	}
	h.Write(version)
	files, err := moduleFiles(root, pkg)
	if err != nil {
		return "", err
	}
	for _, rel := range append([]string{"go.mod", "go.sum"}, files...) {
		if err := hashFile(h, root, rel); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// moduleFiles lists, relative to root, the files of the module's packages that pkg depends on.
func moduleFiles(root, pkg string) ([]string, error) {
	const format = `{{if and .Module .Module.Main}}{{$dir := .Dir}}` +
		`{{range .GoFiles}}{{$dir}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$dir}}/{{.}}{{"\n"}}{{end}}` +
		`{{range .EmbedFiles}}{{$dir}}/{{.}}{{"\n"}}{{end}}{{end}}`
	cmd := exec.Command("go", "list", "-deps", "-f", format, pkg)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", pkg, err, stderr.String())
	}
	var files []string
	for _, path := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}

func hashFile(h io.Writer, root, rel string) error {
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\x00", rel)
	_, err = io.Copy(h, f)
	return err
}
