// Command cluster runs a Full local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, KWOK with fake Nodes; no CRDs) in the background, for a person to use with kubectl:
//
//	eval "$(go run ./hack/cluster up)"     # prints: export KUBECONFIG=<path>
//	go run ./hack/cluster down
//	go run ./hack/cluster ports 3          # three free loopback ports, one a line
//
// Both take --dir (default <repo>/.cache/cluster) for the state: the pid
// files, the kubeconfig, etcd's data and the logs (logs/, daemon.log).
// `up` re-executes itself as a daemon in a new session, so the cluster
// outlives `go run`; `down` stops the daemon and every process it started.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"example.com/task-operator/internal/testenv"
)

// Files in the state directory.
const (
	pidFile        = "daemon.pid" // the daemon's pid
	pidsFile       = "pids.json"  // the control plane's pids, by component
	readyFile      = "ready"      // exists once the cluster is ready
	kubeconfigFile = "kubeconfig" // the admin kubeconfig
	daemonLog      = "daemon.log" // the daemon's own output
	runDir         = "run"        // the control plane's Dir
	logDir         = "logs"       // the components' logs
	serveCommand   = "serve"      // the hidden daemon subcommand
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(args)
	case "down":
		err = down(args)
	case "ports":
		err = ports(os.Stdout, args)
	case serveCommand:
		err = serve(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up [--dir DIR] [--nodes N] [--timeout D] [--kueue] | cluster down [--dir DIR] | cluster ports N")
	os.Exit(2)
}

// stateFlags parses the flags every subcommand shares, plus extra ones.
func stateFlags(name string, args []string, extra func(*flag.FlagSet)) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (default <repo>/.cache/cluster)")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("%s: unexpected arguments %v", name, fs.Args())
	}
	return resolveStateDir(*dir)
}

func resolveStateDir(dir string) (string, error) {
	if dir == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "cluster")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve state dir: %w", err)
	}
	return abs, nil
}

func removeIfExists(path string) error {
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
