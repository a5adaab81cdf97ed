package config_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestInstallerIsCurrent: dist/install.yaml and dist/migration.yaml are committed (kubebuilder's
// convention: users apply them straight from a release tag) and must be what
// `make build-installer IMG=<their image>` renders from config/ now.
func TestInstallerIsCurrent(t *testing.T) {
	for file, base := range map[string]string{"../dist/install.yaml": "default", "../dist/migration.yaml": "migration"} {
		have, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run make build-installer)", err)
		}
		img := imageOf(t, have)
		dir := writeOverlay(t, base, "images:\n- name: example.com/task-operator\n  newName: "+img.name+"\n  newTag: \""+img.tag+"\"\n")
		want, _ := kubectl(t, nil, "kustomize", dir)
		if strings.TrimSpace(want) != strings.TrimSpace(string(have)) {
			t.Errorf("%s is stale: run `make build-installer IMG=%s:%s` and commit it", file, img.name, img.tag)
		}
	}
}

type imageRef struct{ name, tag string }

var imageLine = regexp.MustCompile(`(?m)^\s+image: (\S+):([^:/\s]+)$`)

func imageOf(t *testing.T, manifest []byte) imageRef {
	t.Helper()
	m := imageLine.FindSubmatch(manifest)
	if m == nil {
		t.Fatal("no image: name:tag in the manifest")
	}
	return imageRef{string(m[1]), string(m[2])}
}

// TestMigrationOverlay: the Job runs `task-operator migrate` as its own ServiceAccount, whose
// role allows exactly what migrate does, on the Task CRD alone.
func TestMigrationOverlay(t *testing.T) {
	objs := render(t, "migration")
	job := decode[batchv1.Job](t, objs.find(t, "Job", "task-operator-migrate"))
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != "task-operator-migrate" || pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("migration pod runs as %q with restartPolicy %q, want task-operator-migrate and OnFailure (the checkpoint survives a restart)", pod.ServiceAccountName, pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "migrate" || !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--checkpoint=/var/run/migrate/") }) {
		t.Errorf("migration args = %q, want migrate with a checkpoint in its volume", c.Args)
	}
	if c.Image != "example.com/task-operator:latest" {
		t.Errorf("migration image = %q", c.Image)
	}
	objs.find(t, "ServiceAccount", "task-operator-migrate")
	role := decode[rbacv1.ClusterRole](t, objs.find(t, "ClusterRole", "task-operator-migrate-role"))
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"example.com"}, Resources: []string{"tasks"}, Verbs: []string{"get", "list", "update"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{crdName}, Verbs: []string{"get"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"}, ResourceNames: []string{crdName}, Verbs: []string{"update"}},
	}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
			slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.Verbs, b.Verbs)
	}) {
		t.Errorf("migrate-role rules = %+v, want %+v", role.Rules, want)
	}
	b := decode[rbacv1.ClusterRoleBinding](t, objs.find(t, "ClusterRoleBinding", "task-operator-migrate-rolebinding"))
	if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Name != "task-operator-migrate" || b.Subjects[0].Namespace != namespace {
		t.Errorf("migrate binding = %+v", b)
	}
}

// TestPrometheusOverlay: the ServiceMonitor finds the metrics Service and its port, and every
// alert reads metrics the operator (or controller-runtime) exports.
func TestPrometheusOverlay(t *testing.T) {
	objs := render(t, "prometheus")
	metricsSvc := decode[corev1.Service](t, render(t, "default").find(t, "Service", "task-operator-controller-manager-metrics-service"))
	var monitor struct {
		Metadata struct{ Namespace string } `json:"metadata"`
		Spec     struct {
			Endpoints []struct{ Port, Scheme string } `json:"endpoints"`
			Selector  struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs.find(t, "ServiceMonitor", "task-operator-controller-manager-metrics-monitor").raw, &monitor); err != nil {
		t.Fatal(err)
	}
	for k, v := range monitor.Spec.Selector.MatchLabels {
		if metricsSvc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the metrics Service (labels %v) lacks", k, v, metricsSvc.Labels)
		}
	}
	if len(monitor.Spec.Endpoints) != 1 || monitor.Spec.Endpoints[0].Port != metricsSvc.Spec.Ports[0].Name || monitor.Spec.Endpoints[0].Scheme != "https" {
		t.Errorf("ServiceMonitor endpoints = %+v, want https on port %q", monitor.Spec.Endpoints, metricsSvc.Spec.Ports[0].Name)
	}
	var full serviceMonitor
	if err := yaml.Unmarshal(objs.find(t, "ServiceMonitor", "task-operator-controller-manager-metrics-monitor").raw, &full); err != nil {
		t.Fatal(err)
	}
	if _, ok := full.Spec.Endpoints[0]["bearerTokenFile"]; ok {
		t.Error("the endpoint uses the deprecated bearerTokenFile")
	}
	checkScraperToken(t, append(render(t, "default"), objs...), full.Spec.Endpoints[0])
	rules := string(objs.find(t, "PrometheusRule", "task-operator-alerts").raw)
	for _, metric := range []string{"taskoperator_conversion_requests_total", "controller_runtime_reconcile_errors_total", `taskoperator_tasks{phase="Pending"}`, "leader_election_master_status",
		"taskoperator_task_failing", "taskoperator_task_next_run_timestamp_seconds"} {
		if !strings.Contains(rules, metric) {
			t.Errorf("no alert reads %s", metric)
		}
	}
}

// TestNetworkPolicyOverlay: the policies select the manager's pods and open exactly the webhook
// and metrics ports, which are the container's.
func TestNetworkPolicyOverlay(t *testing.T) {
	objs := render(t, "network-policy")
	dep := decode[appsv1.Deployment](t, render(t, "default").find(t, "Deployment", deploymentName))
	ports := map[int32]bool{}
	for _, p := range managerContainer(t, dep).Ports {
		ports[p.ContainerPort] = true
	}
	opened := map[int32]bool{}
	for _, o := range objs.ofKind("NetworkPolicy") {
		np := decode[networkingv1.NetworkPolicy](t, o)
		for k, v := range np.Spec.PodSelector.MatchLabels {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("%s selects %s=%s, which the manager pods lack", o, k, v)
			}
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil || p.Port.Type != intstr.Int || !ports[p.Port.IntVal] {
					t.Errorf("%s opens %v, not a port of the manager", o, p.Port)
					continue
				}
				opened[p.Port.IntVal] = true
			}
		}
	}
	if !opened[9443] || !opened[8443] || len(opened) != 2 {
		t.Errorf("ports opened = %v, want the webhook (9443) and metrics (8443) ports only", opened)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestAlertsLinkRunbooks: every alert has a summary, a severity and a runbook_url whose page
// exists in docs/runbooks/, and the chart ships the same rules.
func TestAlertsLinkRunbooks(t *testing.T) {
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string
					Labels      map[string]string
					Annotations map[string]string
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "prometheus/rules.yaml")), &rule); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			n++
			url := r.Annotations["runbook_url"]
			page, ok := strings.CutPrefix(url, "https://example.com/task-operator/blob/main/")
			if !ok || !strings.HasPrefix(page, "docs/runbooks/") {
				t.Errorf("%s: runbook_url %q is not a page of docs/runbooks/", r.Alert, url)
				continue
			}
			if _, err := os.Stat("../" + page); err != nil {
				t.Errorf("%s: runbook %s: %v", r.Alert, page, err)
			} else if !strings.Contains(readFile(t, "../"+page), "# "+r.Alert) {
				t.Errorf("%s: %s is not its runbook", r.Alert, page)
			}
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: no summary or severity", r.Alert)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d alerts, want at least the six of docs/runbooks", n)
	}
	if readFile(t, "prometheus/rules.yaml") != readFile(t, "../charts/task-operator/files/rules.yaml") {
		t.Error("charts/task-operator/files/rules.yaml is not config/prometheus/rules.yaml: run make manifests")
	}
}
