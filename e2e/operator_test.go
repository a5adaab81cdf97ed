package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"example.com/task-operator/e2e/controlplane"
)

const operatorNamespace = "task-operator-system"

// operatorProcess is the operator binary running outside the cluster, as `make run` runs it.
type operatorProcess struct {
	cmd         *exec.Cmd
	logPath     string
	metricsAddr string
	dir         string
	done        chan struct{}
}

func startOperator(ctx context.Context, cp *controlplane.ControlPlane) (*operatorProcess, error) {
	dir, err := os.MkdirTemp("", "task-operator-e2e-")
	if err != nil {
		return nil, err
	}
	bin, err := controlplane.BuildOperator(dir)
	if err != nil {
		return nil, err
	}
	if _, err := kubectl("", "create", "namespace", operatorNamespace); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = controlplane.FreePort(); err != nil {
			return nil, err
		}
	}
	webhookPort, metricsPort, probePort := ports[0], ports[1], ports[2]
	p := &operatorProcess{
		logPath:     filepath.Join(dir, "operator.log"),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
		dir:         dir,
		done:        make(chan struct{}),
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, "manager",
		"--install-crd",
		"--leader-elect=false",
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", webhookPort),
		fmt.Sprintf("--webhook-local-url=https://localhost:%d", webhookPort),
		"--webhook-namespace="+operatorNamespace,
		"--webhook-cert-dir="+filepath.Join(dir, "certs"),
		"--cert-check-interval=2s",
		"--metrics-bind-address="+p.metricsAddr, "--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--rate-limiter-base-delay=20ms",
	)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start operator: %w", err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	if err := p.waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *operatorProcess) waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("operator exited during start-up:\n%s", p.tail(40))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return waitForWebhookTrust(ctx)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("operator not ready after 90s:\n%s", p.tail(40))
}

// waitForWebhookTrust waits until the apiserver trusts the injected CA: a dry-run create at
// v1alpha1 passes through the conversion and admission webhooks.
func waitForWebhookTrust(context.Context) error {
	const probe = `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"probe","namespace":"default"},"spec":{"type":"shell","shell":"true"}}`
	var lastErr error
	for range 120 {
		if _, lastErr = kubectl(probe, "create", "--dry-run=server", "-f", "-"); lastErr == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("webhooks not reachable through the apiserver: %w", lastErr)
}

func (p *operatorProcess) stop() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = os.RemoveAll(p.dir)
}

func (p *operatorProcess) tail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kubectl runs kubectl against the test cluster with stdin, returning stdout; the error
// carries stderr.
func kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.KubeconfigPath)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
