package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"example.com/task-operator/internal/process"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// stopGrace is how long a component may take to shut down on SIGTERM.
	stopGrace = 10 * time.Second
	// logTailLines is how much of a component's log errors quote.
	logTailLines = 50
	// adminUser is the system:masters identity of the kubeconfig and of the
	// controller-manager, scheduler and KWOK.
	adminUser = "testenv-admin"
)

// ControlPlane is a running local control plane. Stop it when done.
type ControlPlane struct {
	// Config is a system:masters client config.
	Config *rest.Config
	// KubeconfigPath is an admin kubeconfig file usable by kubectl.
	KubeconfigPath string
	// EtcdEndpoint is etcd's client URL, e.g. http://127.0.0.1:41234.
	EtcdEndpoint string
	// Dir holds the control plane's state.
	Dir string
	// LogDir holds one <component>.log per process.
	LogDir string
	// StartedIn is how long Start took.
	StartedIn time.Duration

	opts       Options
	ownsDir    bool
	kubeconfig []byte
	env        *envtest.Environment
	envLogs    []*os.File
	envPIDs    map[string]int      // etcd and kube-apiserver, started by envtest
	procs      []*process.Proc     // started by us
	args       map[string][]string // each of procs' arguments, by name, for RestartComponent
	watchdog   *watchdog

	etcdMu sync.Mutex
	etcd   *clientv3.Client // see Etcd

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane and waits until it is ready: in Full mode
// until a pod gets scheduled onto a Ready fake Node and completes. On error
// everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	began := time.Now()
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if err := opts.checkBinaries(); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cp, err := newControlPlane(opts)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			_ = cp.Stop()
			panic(r)
		}
		if err != nil {
			err = errors.Join(fmt.Errorf("start control plane: %w", err), cp.Stop())
		}
	}()

	if cp.watchdog, err = startWatchdog(cp.Dir, cp.logPath("watchdog")); err != nil {
		return nil, err
	}
	if cp.ownsDir {
		if err := cp.watchdog.removeOnCrash(cp.Dir); err != nil {
			return nil, err
		}
	}
	if err := cp.startAPIServer(); err != nil {
		return nil, err
	}
	if opts.Full {
		if err := cp.startCluster(ctx); err != nil {
			return nil, err
		}
	}
	cp.StartedIn = time.Since(began)
	return cp, nil
}

// newControlPlane prepares the state and log directories.
func newControlPlane(opts Options) (*ControlPlane, error) {
	cp := &ControlPlane{opts: opts, Dir: opts.Dir, LogDir: opts.LogDir, envPIDs: map[string]int{}}
	if cp.Dir == "" {
		dir, err := os.MkdirTemp("", "controlplane-")
		if err != nil {
			return nil, fmt.Errorf("create state dir: %w", err)
		}
		cp.Dir, cp.ownsDir = dir, true
	} else if err := requireEmptyDir(cp.Dir); err != nil {
		return nil, err
	}
	var err error
	if cp.Dir, err = filepath.Abs(cp.Dir); err != nil {
		return nil, fmt.Errorf("resolve state dir: %w", err)
	}
	if cp.LogDir == "" {
		cp.LogDir = filepath.Join(cp.Dir, "logs")
	}
	if err := os.MkdirAll(cp.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	return cp, nil
}

// requireEmptyDir refuses leftovers: envtest would reuse stale certificates
// from an old apiserver dir and fail obscurely.
func requireEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("read state dir: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("state dir %s is not empty", dir)
	}
	return nil
}

// Stop stops every process the control plane started, and removes Dir if
// Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() { cp.stopErr = cp.stop() })
	return cp.stopErr
}

func (cp *ControlPlane) stop() error {
	// Clients of the apiserver go first so they don't spend their shutdown
	// retrying against a vanished apiserver.
	errs := []error{cp.closeEtcd(), process.StopAll(cp.procs, stopGrace)}
	if cp.env != nil {
		if err := cp.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop envtest: %w", err))
		}
	}
	// envtest gives up after its stop timeout; make sure nothing survives.
	for name, pid := range cp.envPIDs {
		if err := KillGroup(pid, cp.Dir, 10*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
		}
	}
	for _, f := range cp.envLogs {
		f.Close()
	}
	if cp.watchdog != nil {
		if err := cp.watchdog.release(); err != nil {
			errs = append(errs, err)
		}
	}
	if cp.ownsDir {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove state dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Mode is "full" or "api-only".
func (cp *ControlPlane) Mode() string {
	if cp.opts.Full {
		return "full"
	}
	return "api-only"
}

// WriteKubeconfig writes the admin kubeconfig to path.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	if err := os.WriteFile(path, cp.kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// InstallCRDs installs the CRDs found in the given files or directories and
// waits until they are served.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, paths ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	_, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	if err != nil {
		return fmt.Errorf("install CRDs from %v: %w", paths, err)
	}
	return nil
}
