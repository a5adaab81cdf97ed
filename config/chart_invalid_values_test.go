package config_test

import "testing"

// TestChartSchemaRejectsValuesTheAPIServerWould: values of the right JSON type that make an
// object the apiserver refuses (a name that is not a DNS label, a quantity that does not
// parse) fail `helm install` before anything is applied, naming the value, instead of
// failing halfway through an install or upgrade.
func TestChartSchemaRejectsValuesTheAPIServerWould(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
	}{
		{"fullnameOverride with capitals", map[string]any{"fullnameOverride": "TaskOperator"}},
		{"fullnameOverride with a dot (Service names are DNS labels)", map[string]any{"fullnameOverride": "task.operator"}},
		{"fullnameOverride with an underscore", map[string]any{"fullnameOverride": "task_operator"}},
		{"memory limit not a quantity", withValues(nil, "resources.limits", map[string]any{"memory": "lots"})},
		{"cpu request not a quantity", withValues(nil, "resources.requests", map[string]any{"cpu": "fast"})},
		{"shellImage with a space", map[string]any{"shellImage": "busybox 1.37"}},
		{"image tag with a colon", withValues(nil, "image.tag", "v1:latest")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := chartInstallError(t, tt.values); err == nil {
				t.Errorf("values %v accepted", tt.values)
			}
		})
	}
}
