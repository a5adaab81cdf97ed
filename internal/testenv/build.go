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

	pluginBinOnce sync.Once
	pluginBin     string
	pluginBinErr  error
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
	operatorBinOnce.Do(func() { operatorBin, operatorBinErr = buildCached(operatorPackage, "operator", "task-operator") })
	return operatorBin, operatorBinErr
}

// PluginBinary returns the kubectl plugin, cmd/kubectl-task, built from the working tree as
// OperatorBinary is, in <repo>/.cache/plugin/path/<hash>/kubectl-task: a directory of its own, to
// put on PATH so that kubectl finds `kubectl task` under the name it looks for.
func PluginBinary() (string, error) {
	pluginBinOnce.Do(func() { pluginBin, pluginBinErr = buildPlugin() })
	return pluginBin, pluginBinErr
}

func buildPlugin() (string, error) {
	bin, err := buildCached(pluginPackage, "plugin", "kubectl-task")
	if err != nil {
		return "", err
	}
	// kubectl looks plugins up by their exact name: a hard link per build under that name.
	link := filepath.Join(filepath.Dir(bin), "path", hashOf(bin), "kubectl-task")
	if _, err := os.Stat(link); err == nil {
		return link, nil
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return "", fmt.Errorf("build plugin: %w", err)
	}
	if err := os.Link(bin, link); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("build plugin: %w", err)
	}
	return link, nil
}

// hashOf is the sources hash a binary built by buildCached ends with.
func hashOf(bin string) string {
	base := filepath.Base(bin)
	return base[strings.LastIndexByte(base, '-')+1:]
}

// buildCached builds pkg into <repo>/.cache/<cache>/<name>-<hash of its sources>, once per state
// of those sources, under a lock that the test packages building it at once share.
func buildCached(pkg, cache, name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	key, err := sourcesHash(root, pkg)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", cache, err)
	}
	dir := filepath.Join(root, ".cache", cache)
	bin := filepath.Join(dir, name+"-"+key)
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
	if err := goBuild(root, pkg, bin); err != nil {
		return "", err
	}
	pruneOtherBinaries(dir, name, bin)
	return bin, nil
}

// goBuild builds pkg into a temporary name and renames it, so that no one ever runs a
// half-written binary.
func goBuild(root, pkg, bin string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

// pruneOtherBinaries removes the binaries of earlier states of the sources. A process still
// running one keeps its file open; unlinking it does not disturb it.
func pruneOtherBinaries(dir, name, keep string) {
	others, _ := filepath.Glob(filepath.Join(dir, name+"-*"))
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

// operatorPackage is what OperatorBinary builds, pluginPackage what PluginBinary builds.
const (
	operatorPackage = "./cmd/task-operator"
	pluginPackage   = "./cmd/kubectl-task"
)

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
