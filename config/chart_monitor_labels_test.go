package config_test

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChartMonitoringLabelsAreTheUsers: the extra labels of the ServiceMonitor, the
// PrometheusRule and the dashboard ConfigMap are what a Prometheus or Grafana selects them by,
// so each object carries them as given, even a key the chart also sets (a selector such as
// app.kubernetes.io/instance: monitoring); the rendered metadata must not hold the key twice.
func TestChartMonitoringLabelsAreTheUsers(t *testing.T) {
	labels := map[string]any{"app.kubernetes.io/instance": "monitoring", "release": "prom"}
	values := map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": labels},
		"prometheusRule": map[string]any{"enabled": true, "labels": labels},
		"dashboard":      map[string]any{"enabled": true, "labels": labels},
	}}
	if err := chartValuesError(t, values); err != nil {
		t.Fatalf("schema: %v", err)
	}
	for _, o := range renderChart(t, values) {
		if o.Kind != "ServiceMonitor" && o.Kind != "PrometheusRule" && !(o.Kind == "ConfigMap" && o.Metadata.Name == "task-operator-dashboard") {
			continue
		}
		var strict struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(o.raw, &strict); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if err := yaml.UnmarshalStrict(o.raw, &map[string]any{}); err != nil {
			t.Errorf("%s: %v", o, err)
		}
		if got := strict.Metadata.Labels["app.kubernetes.io/instance"]; got != "monitoring" {
			t.Errorf("%s: label app.kubernetes.io/instance = %q, want the user's monitoring", o, got)
		}
	}
}
