package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Component names, as used by Logs and PIDs.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	KWOK                  = "kwok"
)

// Pod labels understood by the KWOK stages (see stages/*.yaml).
const (
	// OutcomeLabel selects how a pod on a fake Node ends.
	OutcomeLabel = "e2e.example.com/outcome"
	// OutcomeFail makes the pod end Failed: containers exit 1 with reason Error.
	OutcomeFail = "fail"
	// OutcomeHang keeps the pod Running until it is deleted.
	OutcomeHang = "hang"
	// RunSecondsLabel sets how long a pod runs before it ends: a number of
	// seconds ("3", "0.5") or a Go duration ("2m"). The default is one second.
	RunSecondsLabel = "e2e.example.com/run-seconds"
)

// Fake Node identity: KWOK manages Nodes carrying FakeNodeAnnotation=fake.
const (
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	NodeTypeLabel      = "type"
	NodeTypeKWOK       = "kwok"
)

// BinDirEnv overrides the default binary directory.
const BinDirEnv = "CONTROLPLANE_BIN"

const defaultStartTimeout = 2 * time.Minute

// Options configures Start. The zero value starts an API-only control plane
// with the project's CRDs.
type Options struct {
	// Full adds kube-controller-manager, kube-scheduler and KWOK with fake Nodes.
	Full bool
	// Nodes is the number of fake Nodes in Full mode (default 1).
	Nodes int
	// CRDPaths are CRD files or directories to install. nil means
	// <repo>/config/crd/bases; an empty, non-nil slice installs none.
	CRDPaths []string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok and kwok-stages/ (default $CONTROLPLANE_BIN, else
	// <repo>/bin/controlplane).
	BinDir string
	// LogDir receives one <component>.log per process (default <Dir>/logs).
	// Unlike the default, a LogDir given here outlives Stop.
	LogDir string
	// Dir holds all state (certificates, etcd data, kubeconfig). Empty means
	// a fresh temporary directory that Stop removes; a given Dir is kept.
	Dir string
	// StartTimeout bounds the whole start-up, readiness waits included
	// (default 2m).
	StartTimeout time.Duration
	// StandInNamespaces (Full mode) are namespaces whose pods real processes stand in for
	// (RunStandIns): KWOK starts them without making them Ready and leaves their readiness,
	// termination and removal alone. Setting it also has the apiserver call webhook Services
	// through their EndpointSlices (--enable-aggregator-routing: there is no kube-proxy), and
	// runs the Deployment, ReplicaSet, EndpointSlice and disruption controllers.
	StandInNamespaces []string
	// PodLog (Full mode), when set, is the log of every container of every pod on the fake
	// Nodes, read through the apiserver's pods/log subresource (kubectl logs): KWOK serves it
	// as a kubelet would (see podlogs.go). Empty: pods have no logs, and reading one fails.
	PodLog string
}

// withDefaults fills the zero fields of opts, resolving paths against the
// repository root only when a default actually needs it.
func (opts Options) withDefaults() (Options, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	if opts.BinDir == "" {
		opts.BinDir = os.Getenv(BinDirEnv)
	}
	if opts.BinDir == "" || opts.CRDPaths == nil {
		root, err := RepoRoot()
		if err != nil {
			return opts, err
		}
		if opts.BinDir == "" {
			opts.BinDir = filepath.Join(root, "bin", "controlplane")
		}
		if opts.CRDPaths == nil {
			opts.CRDPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		}
	}
	var err error
	if opts.BinDir, err = filepath.Abs(opts.BinDir); err != nil {
		return opts, fmt.Errorf("resolve bin dir: %w", err)
	}
	return opts, nil
}

// requiredBinaries lists what BinDir must hold for the given mode.
func (opts Options) requiredBinaries() []string {
	bins := []string{Etcd, KubeAPIServer}
	if opts.Full {
		bins = append(bins, KubeControllerManager, KubeScheduler, KWOK)
	}
	return bins
}

// checkBinaries fails early, with the fix in the message, instead of letting
// envtest retry a missing binary five times.
func (opts Options) checkBinaries() error {
	var missing []error
	for _, b := range opts.requiredBinaries() {
		p := filepath.Join(opts.BinDir, b)
		info, err := os.Stat(p)
		if err == nil && info.Mode()&0o111 == 0 {
			err = errors.New("not executable")
		}
		if err != nil {
			missing = append(missing, fmt.Errorf("%s: %w", p, err))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control plane binaries missing in %s (build them with hack/controlplane.sh): %w",
			opts.BinDir, errors.Join(missing...))
	}
	return nil
}
