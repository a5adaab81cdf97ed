package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"example.com/task-operator/internal/kubelet"
	"example.com/task-operator/internal/testenv"
)

// serve is the daemon: it runs the control plane until SIGTERM (from down)
// or until a component dies, and stops everything either way.
func serve(args []string) error {
	var nodes int
	var timeout time.Duration
	var withKueue bool
	dir, err := stateFlags(serveCommand, args, func(fs *flag.FlagSet) {
		fs.IntVar(&nodes, "nodes", 1, "number of fake nodes")
		fs.DurationVar(&timeout, "timeout", 3*time.Minute, "start-up timeout")
		fs.BoolVar(&withKueue, "kueue", false, "also install and run Kueue")
	})
	if err != nil {
		return err
	}
	// First, so that an empty log says the daemon died before it began.
	fmt.Fprintf(os.Stderr, "daemon (pid %d) starting the control plane in %s\n", os.Getpid(), dir)
	// Ask for the signals before starting, so that a `down` racing the
	// start-up still gets a clean Stop.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()

	var standIns []string
	if withKueue {
		if err := kubelet.PodNetworksSupported(); err != nil {
			return fmt.Errorf("kueue's manager runs in a network namespace of its own: %w", err)
		}
		_ = kubelet.CleanStalePodNetworks()
		standIns = []string{testenv.KueueNamespace}
	}
	cp, err := testenv.Start(ctx, testenv.Options{
		Full:  true,
		Nodes: nodes,
		// A bare cluster, as kind would give: the CRD comes from whatever installs the
		// operator (config/local in make run, --install-crd, make install), and a CRD already
		// written by another field manager would make their server-side apply conflict.
		CRDPaths:          []string{},
		Dir:               filepath.Join(dir, runDir),
		LogDir:            filepath.Join(dir, logDir),
		StartTimeout:      timeout,
		StandInNamespaces: standIns,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop: %v\n", err)
		}
		fmt.Fprintln(os.Stderr, "cluster stopped")
	}()
	if withKueue {
		began := time.Now()
		kueue, err := cp.InstallKueue(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = kueue.Stop() }()
		fmt.Fprintf(os.Stderr, "kueue ready in %s\n", time.Since(began).Round(time.Millisecond))
	}
	if err := publish(dir, cp); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cluster ready in %s: pids %v\n", cp.StartedIn.Round(time.Millisecond), cp.PIDs())
	return watch(ctx, cp)
}

// publish writes what `up` and `down` read; the ready file comes last
// because `up` takes it as the signal that the kubeconfig is in place.
func publish(dir string, cp *testenv.ControlPlane) error {
	if err := cp.WriteKubeconfig(filepath.Join(dir, kubeconfigFile)); err != nil {
		return err
	}
	pids, err := json.Marshal(cp.PIDs())
	if err != nil {
		return fmt.Errorf("encode pids: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidsFile), pids, 0o644); err != nil {
		return fmt.Errorf("write pids: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), nil, 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}

// watch returns nil on a stop signal and an error when a component dies;
// a half-dead cluster is worse than none.
func watch(ctx context.Context, cp *testenv.ControlPlane) error {
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "stop signal received")
			return nil
		case <-ticker.C:
			if err := cp.Alive(); err != nil {
				return err
			}
		}
	}
}
