package controlplane

import (
	"testing"
	"time"
)

// StartT starts a control plane for a test and stops it in t.Cleanup; a
// failed test also gets the end of every component's log. Failing to start
// is fatal, missing binaries included: CI always builds them first.
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("control plane (%s) started in %s; KUBECONFIG=%s", cp.Mode(), cp.StartedIn.Round(time.Millisecond), cp.KubeconfigPath)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.TailLogs(logTailLines))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// Mode is "full" or "api-only".
func (cp *ControlPlane) Mode() string {
	if cp.opts.Full {
		return "full"
	}
	return "api-only"
}
