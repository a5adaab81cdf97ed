package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// envEntry is one extraEnv item as a user writes it in values.
func envEntry(name string, fields ...any) map[string]any {
	e := map[string]any{"name": name}
	for i := 0; i+1 < len(fields); i += 2 {
		e[fields[i].(string)] = fields[i+1]
	}
	return e
}

// managerEnv is the manager container's env as the chart renders it with values.
func managerEnv(t *testing.T, values map[string]any) []corev1.EnvVar {
	t.Helper()
	dep := decode[appsv1.Deployment](t, renderChart(t, values).find(t, "Deployment", deploymentName))
	return managerContainer(t, dep).Env
}

// TestChartExtraEnvValuesRenderAsGiven: extraEnv goes through toYaml into a YAML manifest, so a
// value YAML would read as something else (a number, a boolean, null, a comment, a nested map,
// several lines) must still reach the container as the very string given.
func TestChartExtraEnvValuesRenderAsGiven(t *testing.T) {
	values := []string{
		"100", "0755", "0x10", "1e3", "-1", "yes", "on", "off", "true", "null", "~", "",
		`say "hi"`, "it's", "a: b", "# not a comment", "- item", "[1, 2]", "{a: b}",
		"line one\nline two", "trailing newline\n", "  leading spaces", "tab\there",
		"{{ .Release.Name }}", "$(POD_NAMESPACE)", "é ü 日本",
	}
	var extra []any
	var want []corev1.EnvVar
	for i, v := range values {
		name := "V" + string(rune('A'+i))
		extra = append(extra, envEntry(name, "value", v))
		want = append(want, corev1.EnvVar{Name: name, Value: v})
	}
	env := managerEnv(t, map[string]any{"extraEnv": extra})
	if len(env) < len(want) {
		t.Fatalf("manager env = %v, want %d extra entries last", env, len(want))
	}
	if diff := cmp.Diff(want, env[len(env)-len(want):]); diff != "" {
		t.Errorf("extra env differs from the values (-given +rendered):\n%s", diff)
	}
}

// TestChartExtraEnvUnsetRendersNoEntries: an empty or null extraEnv renders the chart's own
// three variables only, exactly as leaving it unset does.
func TestChartExtraEnvUnsetRendersNoEntries(t *testing.T) {
	unset := managerEnv(t, nil)
	if len(unset) != 3 {
		t.Errorf("manager env with extraEnv unset = %v, want the chart's three", unset)
	}
	for name, values := range map[string]map[string]any{
		"empty": {"extraEnv": []any{}},
		"null":  {"extraEnv": nil},
	} {
		t.Run(name, func(t *testing.T) {
			if err := chartInstallError(t, values); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(unset, managerEnv(t, values)); diff != "" {
				t.Errorf("env differs from extraEnv unset (-unset +%s):\n%s", name, diff)
			}
		})
	}
}

// TestChartRejectsExtraEnvTheAPIServerWould: an env entry the apiserver refuses (a value and a
// source at once, a source naming none or two of fieldRef, resourceFieldRef, configMapKeyRef and
// secretKeyRef, a selector missing what it selects by) or that server-side apply refuses (Helm
// 4's default: env is a list keyed by name, so a name given twice) fails `helm install` on the
// values, naming the entry, instead of when the Deployment is applied halfway through an
// install or upgrade.
func TestChartRejectsExtraEnvTheAPIServerWould(t *testing.T) {
	ref := func(kind string, fields ...any) map[string]any {
		sel := map[string]any{}
		for i := 0; i+1 < len(fields); i += 2 {
			sel[fields[i].(string)] = fields[i+1]
		}
		return map[string]any{kind: sel}
	}
	fieldRef := ref("fieldRef", "fieldPath", "spec.nodeName")
	refused := map[string][]any{
		"value and valueFrom":    {envEntry("NODE", "value", "x", "valueFrom", fieldRef)},
		"valueFrom of no source": {envEntry("NODE", "valueFrom", map[string]any{})},
		"valueFrom of two sources": {envEntry("NODE", "valueFrom", map[string]any{
			"fieldRef":     fieldRef["fieldRef"],
			"secretKeyRef": map[string]any{"name": "s", "key": "k"},
		})},
		"valueFrom of an unknown source":              {envEntry("NODE", "valueFrom", ref("nodeRef", "name", "x"))},
		"fieldRef without fieldPath":                  {envEntry("NODE", "valueFrom", ref("fieldRef"))},
		"fieldRef of an unsupported field":            {envEntry("NODE", "valueFrom", ref("fieldRef", "fieldPath", "spec.containers"))},
		"resourceFieldRef without resource":           {envEntry("CPU", "valueFrom", ref("resourceFieldRef", "divisor", "1m"))},
		"resourceFieldRef of another container":       {envEntry("CPU", "valueFrom", ref("resourceFieldRef", "containerName", "sidecar", "resource", "limits.cpu"))},
		"resourceFieldRef of an unsupported resource": {envEntry("CPU", "valueFrom", ref("resourceFieldRef", "resource", "limits.gpu"))},
		"secretKeyRef without key":                    {envEntry("TOKEN", "valueFrom", ref("secretKeyRef", "name", "s"))},
		"secretKeyRef without name":                   {envEntry("TOKEN", "valueFrom", ref("secretKeyRef", "key", "k"))},
		"configMapKeyRef without key":                 {envEntry("MODE", "valueFrom", ref("configMapKeyRef", "name", "c"))},
		"selector with an unknown key":                {envEntry("TOKEN", "valueFrom", ref("secretKeyRef", "name", "s", "key", "k", "namespace", "other"))},
		"a name given twice":                          {envEntry("GOGC", "value", "100"), envEntry("GOGC", "value", "200")},
	}
	for name, extra := range refused {
		t.Run(name, func(t *testing.T) {
			err := chartInstallError(t, map[string]any{"extraEnv": extra})
			if err == nil {
				t.Fatalf("extraEnv %v accepted: the apiserver would refuse the Deployment", extra)
			}
			if !strings.Contains(err.Error(), "extraEnv") {
				t.Errorf("error %q does not name the extraEnv entry", err)
			}
		})
	}
	t.Run("entries the apiserver takes pass", func(t *testing.T) {
		extra := []any{
			envEntry("GOGC", "value", "100"),
			envEntry("EMPTY"),
			envEntry("NODE", "value", "", "valueFrom", fieldRef),
			envEntry("TEAM", "valueFrom", ref("fieldRef", "apiVersion", "v1", "fieldPath", "metadata.labels['team']")),
			envEntry("CPU", "valueFrom", ref("resourceFieldRef", "containerName", "manager", "resource", "limits.cpu", "divisor", "1m")),
			envEntry("MEM", "valueFrom", ref("resourceFieldRef", "resource", "requests.memory", "divisor", 1)),
			envEntry("TOKEN", "valueFrom", ref("secretKeyRef", "name", "s", "key", "k", "optional", true)),
			envEntry("MODE", "valueFrom", ref("configMapKeyRef", "name", "c", "key", "mode.conf")),
		}
		values := map[string]any{"extraEnv": extra}
		if err := chartInstallError(t, values); err != nil {
			t.Fatal(err)
		}
		if env := managerEnv(t, values); len(env) != 3+len(extra) {
			t.Errorf("manager env = %v, want the chart's three and %d extra", env, len(extra))
		}
	})
}
