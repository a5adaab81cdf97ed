package config_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestChartPodMetadataOfOnlyReservedKeysRenders: podLabels or podAnnotations that set only
// the keys the chart keeps for itself (the selector labels, the default-container annotation)
// pass the schema and must render a Deployment whose pod template carries the chart's own
// labels and annotation, as when they set other keys besides.
func TestChartPodMetadataOfOnlyReservedKeysRenders(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
	}{
		{"podLabels with only a selector label", map[string]any{"podLabels": map[string]any{"control-plane": "mine"}}},
		{"podLabels with only both selector labels", map[string]any{"podLabels": map[string]any{"control-plane": "mine", "app.kubernetes.io/name": "x"}}},
		{"podAnnotations with only default-container", map[string]any{"podAnnotations": map[string]any{"kubectl.kubernetes.io/default-container": "other"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := chartValuesError(t, tt.values); err != nil {
				t.Fatalf("schema rejects %v: %v", tt.values, err)
			}
			dep := decode[appsv1.Deployment](t, renderChart(t, tt.values).find(t, "Deployment", deploymentName))
			pod := dep.Spec.Template
			for k, v := range dep.Spec.Selector.MatchLabels {
				if pod.Labels[k] != v {
					t.Errorf("the selector's %s=%s is not on the pods (%v)", k, v, pod.Labels)
				}
			}
			if pod.Annotations["kubectl.kubernetes.io/default-container"] != "manager" {
				t.Errorf("pod annotations = %v, want default-container manager", pod.Annotations)
			}
		})
	}
}
