package config_test

// The Helm chart (charts/task-operator) must install what the kustomize overlays install: it is
// rendered here with the Helm Go SDK (helm.sh/helm/v4, which resolves against this module's
// k8s.io v0.37 without moving any of its versions) and compared object by object, for the
// default values and for each toggle against the overlay it mirrors.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const chartDir = "../charts/task-operator"

// renderChart renders the chart as `helm install task-operator charts/task-operator
// --namespace task-operator-system` would with the given values.
func renderChart(t *testing.T, values map[string]any) rendered {
	t.Helper()
	return renderRelease(t, "task-operator", namespace, values)
}

// helmOnly are the differences Helm makes on purpose: its own labels, and keeping the CRD (and
// every Task) on uninstall. normalize drops them.
var (
	helmLabels      = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"}
	helmAnnotations = []string{"helm.sh/resource-policy"}
)

func normalize(t *testing.T, o object) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(o.raw, &m); err != nil {
		t.Fatalf("decode %s: %v", o, err)
	}
	meta, _ := m["metadata"].(map[string]any)
	for field, keys := range map[string][]string{"labels": helmLabels, "annotations": helmAnnotations} {
		values, _ := meta[field].(map[string]any)
		for _, k := range keys {
			delete(values, k)
		}
		if len(values) == 0 {
			delete(meta, field)
		}
	}
	return m
}

func byIdentity(t *testing.T, objs rendered) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		key := fmt.Sprintf("%s %s %s/%s", o.APIVersion, o.Kind, o.Metadata.Namespace, o.Metadata.Name)
		if _, dup := out[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		out[key] = normalize(t, o)
	}
	return out
}

// sameObjects compares two renderings object by object.
func sameObjects(t *testing.T, kustomized, charted rendered) {
	t.Helper()
	want, got := byIdentity(t, kustomized), byIdentity(t, charted)
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("the chart does not render %s", key)
			continue
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s differs (-kustomize +chart):\n%s", key, diff)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("the chart renders %s, which kustomize does not", key)
		}
	}
}

// chartImage are the values setting the image dist/install.yaml was built with.
func chartImage(t *testing.T, img imageRef) map[string]any {
	t.Helper()
	return map[string]any{"image": map[string]any{"repository": img.name, "tag": img.tag}}
}

func withValues(base map[string]any, path string, v any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	keys := strings.Split(path, ".")
	m := out
	for _, k := range keys[:len(keys)-1] {
		next, _ := m[k].(map[string]any)
		next = maps.Clone(next)
		if next == nil {
			next = map[string]any{}
		}
		m[k] = next
		m = next
	}
	m[keys[len(keys)-1]] = v
	return out
}

func without(objs rendered, kind string) rendered {
	return slices.DeleteFunc(slices.Clone(objs), func(o object) bool { return o.Kind == kind })
}

// TestChartMatchesInstaller: `helm install` with the image of dist/install.yaml installs the
// objects of dist/install.yaml, and each toggle adds what its overlay adds.
func TestChartMatchesInstaller(t *testing.T) {
	installer := renderFile(t, "../dist/install.yaml")
	img := imageOf(t, []byte(installer.yamlOf(func(object) bool { return true })))
	base := chartImage(t, img)
	overlay := func(dir string) rendered {
		return render(t, writeOverlay(t, dir, "images:\n- name: example.com/task-operator\n  newName: "+img.name+"\n  newTag: \""+img.tag+"\"\n"))
	}

	t.Run("defaults", func(t *testing.T) {
		// Helm creates the namespace (--create-namespace) unless asked to render it.
		sameObjects(t, without(installer, "Namespace"), renderChart(t, base))
	})
	t.Run("namespace.create", func(t *testing.T) {
		sameObjects(t, installer, renderChart(t, withValues(base, "namespace.create", true)))
	})
	t.Run("certManager.enabled", func(t *testing.T) {
		sameObjects(t, without(overlay("default-certmanager"), "Namespace"), renderChart(t, withValues(base, "certManager.enabled", true)))
	})
	t.Run("metrics", func(t *testing.T) {
		v := withValues(withValues(base, "metrics.serviceMonitor.enabled", true), "metrics.prometheusRule.enabled", true)
		sameObjects(t, append(without(installer, "Namespace"), render(t, "prometheus")...), renderChart(t, v))
	})
	t.Run("metrics.dashboard.enabled", func(t *testing.T) {
		sameObjects(t, append(without(installer, "Namespace"), render(t, "grafana")...), renderChart(t, withValues(base, "metrics.dashboard.enabled", true)))
	})
	t.Run("networkPolicy.enabled", func(t *testing.T) {
		sameObjects(t, append(without(installer, "Namespace"), render(t, "network-policy")...), renderChart(t, withValues(base, "networkPolicy.enabled", true)))
	})
}

// TestChartValues: the values that are not toggles of an overlay do what they say.
func TestChartValues(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs := renderChart(t, map[string]any{
		"image":        map[string]any{"repository": "registry.example.com/task-operator", "digest": digest},
		"replicaCount": 3,
		"resources":    map[string]any{"limits": map[string]any{"memory": "1Gi"}},
	})
	var dep struct {
		Spec struct {
			Replicas int `json:"replicas"`
			Template struct {
				Spec struct {
					Containers []struct {
						Image     string `json:"image"`
						Env       []struct{ Name, Value string }
						Resources map[string]map[string]string `json:"resources"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs.find(t, "Deployment", deploymentName).raw, &dep); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	want := "registry.example.com/task-operator@" + digest
	if dep.Spec.Replicas != 3 || c.Image != want || c.Resources["limits"]["memory"] != "1Gi" {
		t.Errorf("replicas %d, image %q, resources %v; want 3, %s, limits.memory 1Gi", dep.Spec.Replicas, c.Image, c.Resources, want)
	}
	for _, e := range c.Env {
		if e.Name == "RUNNER_IMAGE" && e.Value != want {
			t.Errorf("RUNNER_IMAGE = %q, want the manager's image %q", e.Value, want)
		}
	}
}

func renderFile(t *testing.T, path string) rendered {
	t.Helper()
	data := readFile(t, path)
	var objs rendered
	for _, doc := range docSeparator.Split(data, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		o.raw = []byte(doc)
		objs = append(objs, o)
	}
	return objs
}
