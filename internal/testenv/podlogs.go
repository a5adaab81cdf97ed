package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Pod logs on the fake Nodes: KWOK has no containers, but its kubelet server answers the
// kubelet's containerLogs endpoint from a file that a ClusterLogs configuration names. With
// Options.PodLog set, KWOK serves that endpoint over TLS on a loopback port that the fake Nodes
// advertise (status.daemonEndpoints.kubeletEndpoint.port) at their InternalIP, 127.0.0.1, and
// the apiserver calls Nodes by that address, so `kubectl logs` and every client of the pods/log
// subresource read PodLog through the apiserver's real path, as from a kubelet.
//
// The apiserver does not verify the kubelet's certificate (no --kubelet-certificate-authority,
// as in most clusters); KWOK does not check the apiserver's client certificate.

// podLogArgs are KWOK's flags for serving Options.PodLog as the log of every container.
func (cp *ControlPlane) podLogArgs() ([]string, error) {
	dir := filepath.Join(cp.Dir, "kwok-logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kwok pod logs: %w", err)
	}
	if _, err := WriteSelfSignedCert(dir); err != nil {
		return nil, fmt.Errorf("kwok pod logs: %w", err)
	}
	logFile := filepath.Join(dir, "pod.log")
	if err := os.WriteFile(logFile, criLog(cp.opts.PodLog, time.Now()), 0o644); err != nil {
		return nil, fmt.Errorf("kwok pod logs: %w", err)
	}
	config := filepath.Join(dir, "cluster-logs.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(clusterLogsConfig, logFile)), 0o644); err != nil {
		return nil, fmt.Errorf("kwok pod logs: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return []string{
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--node-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + filepath.Join(dir, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "tls.key"),
		"--config=" + config,
	}, nil
}

// clusterLogsConfig serves one file (%s) as the log of every container of every pod.
const clusterLogsConfig = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-pod
spec:
  logs:
  - logsFile: %q
`

// criLog writes text in the CRI log format the kubelet reads container logs in: one
// "<RFC 3339 time> stdout F <line>" per line.
func criLog(text string, at time.Time) []byte {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), line)
	}
	return []byte(b.String())
}
