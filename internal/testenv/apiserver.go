package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startAPIServer runs etcd and kube-apiserver through envtest and installs
// the CRDs.
func (cp *ControlPlane) startAPIServer() error {
	env, err := cp.newEnvironment()
	if err != nil {
		return err
	}
	cp.env = env
	cfg, startErr := env.Start()
	// envtest always puts its (unused) webhook certificates in a new temp dir.
	if d := env.WebhookInstallOptions.LocalServingCertDir; d != "" {
		if err := cp.watchdog.removeOnCrash(d); err != nil {
			return errors.Join(startErr, err)
		}
	}
	// Record the pids even after a failed start: envtest may leave the
	// processes running when, say, installing the CRDs fails.
	if err := cp.recordEnvtestPIDs(); err != nil {
		return errors.Join(startErr, err)
	}
	if startErr != nil {
		return cp.envtestError(startErr)
	}
	cp.Config = cfg
	cp.EtcdEndpoint = env.ControlPlane.Etcd.URL.String()

	user, err := env.AddUser(envtest.User{Name: adminUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	if cp.kubeconfig, err = user.KubeConfig(); err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cp.KubeconfigPath = filepath.Join(cp.Dir, "kubeconfig")
	return cp.WriteKubeconfig(cp.KubeconfigPath)
}

// newEnvironment configures envtest to run the binaries of BinDir with all
// state below Dir.
func (cp *ControlPlane) newEnvironment() (*envtest.Environment, error) {
	etcdDir := filepath.Join(cp.Dir, "etcd")
	certDir := filepath.Join(cp.Dir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	etcdLog, err := cp.openLog(Etcd)
	if err != nil {
		return nil, err
	}
	apiLog, err := cp.openLog(KubeAPIServer)
	if err != nil {
		return nil, err
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory:    cp.opts.BinDir,
		CRDDirectoryPaths:        cp.opts.CRDPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	// Explicit paths: KUBEBUILDER_ASSETS or TEST_ASSET_* in the environment
	// must not swap in other binaries than BinDir's.
	env.ControlPlane.Etcd = &envtest.Etcd{
		Path:    filepath.Join(cp.opts.BinDir, Etcd),
		DataDir: etcdDir,
		Out:     etcdLog,
		Err:     etcdLog,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(cp.opts.BinDir, KubeAPIServer)
	api.CertDir = certDir
	api.Out, api.Err = apiLog, apiLog
	// A loopback advertise address is only accepted without the endpoint
	// reconciler, which would publish it in the kubernetes Service.
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	if cp.opts.PodLog != "" {
		// The fake Nodes' Hostname (kwok-node-0) resolves nowhere; their InternalIP is where
		// KWOK serves pod logs (podlogs.go).
		api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	}
	if len(cp.opts.StandInNamespaces) > 0 {
		// Webhook and conversion Services, and aggregated APIs, are resolved through their
		// EndpointSlices to a pod IP, not to a ClusterIP that needs kube-proxy.
		api.Configure().Set("enable-aggregator-routing", "true")
		// A stand-in pod may serve an aggregated API (Kueue's visibility API does).
		flags, err := frontProxyFlags(filepath.Join(certDir, "front-proxy"))
		if err != nil {
			return nil, err
		}
		for k, v := range flags {
			api.Configure().Set(k, v)
		}
	}
	return env, nil
}

func (cp *ControlPlane) openLog(component string) (*os.File, error) {
	f, err := os.Create(cp.logPath(component))
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", component, err)
	}
	cp.envLogs = append(cp.envLogs, f)
	return f, nil
}

// recordEnvtestPIDs finds etcd and kube-apiserver among our children (their
// command lines name our Dir) so that Stop, PIDs and the watchdog can reach
// them; envtest does not expose them.
func (cp *ControlPlane) recordEnvtestPIDs() error {
	found, err := FindProcesses(cp.Dir, os.Getpid())
	if err != nil {
		return err
	}
	for pid, name := range found {
		if name != Etcd && name != KubeAPIServer {
			continue
		}
		cp.envPIDs[name] = pid
		if err := cp.watchdog.watch(pid); err != nil {
			return err
		}
	}
	return nil
}

// envtestError quotes both logs: envtest's errors rarely say which of its
// two processes failed.
func (cp *ControlPlane) envtestError(err error) error {
	return cp.componentError(KubeAPIServer+" and "+Etcd, fmt.Errorf("envtest: %w", err), KubeAPIServer, Etcd)
}
