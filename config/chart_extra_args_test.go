package config_test

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// chartInstallError is what `helm install` says of values: the schema's verdict, else the
// template's (a fail in a template).
func chartInstallError(t *testing.T, values map[string]any) error {
	t.Helper()
	if err := chartValuesError(t, values); err != nil {
		return err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	opts := common.ReleaseOptions{Name: "task-operator", Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, common.DefaultCapabilities)
	if err != nil {
		return err
	}
	_, err = engine.Render(ch, vals)
	return err
}

// TestChartRejectsExtraArgsThatUndoTheChartsWiring: the flags the chart sets itself wire the
// manager to the objects it renders (the ports its Services, probes and NetworkPolicy name,
// the webhook configurations and Secret it patches, leader election for its two replicas).
// extraArgs comes last and the last value of a flag wins, so giving one of them again
// silently unwires the install (e.g. --webhook-port=8000 leaves the webhook Service on 9443
// and every Task read at another version fails conversion; --leader-elect=false has both
// replicas reconcile). The install must refuse it, naming the flag.
func TestChartRejectsExtraArgsThatUndoTheChartsWiring(t *testing.T) {
	for _, arg := range []string{
		"--leader-elect=false",
		"--metrics-bind-address=:9090",
		"--health-probe-bind-address=:9091",
		"--webhook-port=8000",
		"--webhook-cert-dir=/certs",
		"--webhook-service=other",
		"--mutating-webhook-configuration=other",
		"--validating-webhook-configuration=other",
		"--webhook-secret=other",
	} {
		t.Run(arg, func(t *testing.T) {
			if err := chartInstallError(t, map[string]any{"extraArgs": []any{arg}}); err == nil {
				t.Errorf("extraArgs [%s] accepted: it overrides the chart's own flag and unwires the install", arg)
			}
		})
	}
	t.Run("flags the chart does not set pass", func(t *testing.T) {
		if err := chartInstallError(t, map[string]any{"extraArgs": []any{"--kube-api-qps=100", "--zap-log-level=debug"}}); err != nil {
			t.Error(err)
		}
	})
}
