package config_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	v2util "helm.sh/helm/v4/pkg/chart/v2/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// chartValuesError is what `helm install` says of the values before rendering anything: the
// chart's values.schema.json is checked by the SDK's ToRenderValues, as by the helm command.
func chartValuesError(t *testing.T, values map[string]any) error {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	opts := common.ReleaseOptions{Name: "task-operator", Namespace: namespace, Revision: 1, IsInstall: true}
	_, err = chartutil.ToRenderValues(ch, values, opts, common.DefaultCapabilities)
	return err
}

// TestChartSchemaRejectsBadValues: values of the wrong type, out of range or unknown (a typo
// that would otherwise be ignored) fail the install with an error that names the value.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string // in the error
	}{
		{"replicaCount not a number", map[string]any{"replicaCount": "abc"}, "/replicaCount"},
		{"replicaCount zero", map[string]any{"replicaCount": 0}, "/replicaCount"},
		{"unknown top-level key", map[string]any{"replicas": 3}, "replicas"},
		{"unknown nested key", withValues(nil, "metrics.serviceMonitor.enable", true), "enable"},
		{"toggle not a boolean", withValues(nil, "certManager.enabled", "yes"), "/certManager/enabled"},
		{"pullPolicy not a policy", withValues(nil, "image.pullPolicy", "Sometimes"), "/image/pullPolicy"},
		{"digest not a digest", withValues(nil, "image.digest", "latest"), "/image/digest"},
		{"extraArgs not a flag", map[string]any{"extraArgs": []any{"kube-api-qps=5"}}, "/extraArgs/0"},
		{"extraEnv names a variable the chart sets", map[string]any{"extraEnv": []any{map[string]any{"name": "GOMEMLIMIT", "value": "1GiB"}}}, "/extraEnv/0/name"},
		{"extraEnv entry without a name", map[string]any{"extraEnv": []any{map[string]any{"value": "100"}}}, "/extraEnv/0"},
		{"extraEnv value not a string", map[string]any{"extraEnv": []any{map[string]any{"name": "GOGC", "value": 100}}}, "/extraEnv/0/value"},
		{"nodeSelector value not a string", map[string]any{"nodeSelector": map[string]any{"disktype": 1}}, "/nodeSelector/disktype"},
		{"imagePullSecrets of strings", map[string]any{"imagePullSecrets": []any{"regcred"}}, "/imagePullSecrets/0"},
		{"monitor labels not strings", withValues(nil, "metrics.serviceMonitor.labels", map[string]any{"release": true}), "/metrics/serviceMonitor/labels/release"},
		{"the storage version retired", withValues(nil, "crds.retiredVersions", []any{"v1"}), "/crds/retiredVersions/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := chartValuesError(t, tt.values)
			if err == nil {
				t.Fatalf("values %v accepted", tt.values)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error does not name %s:\n%v", tt.want, err)
			}
		})
	}
	t.Run("the defaults and every documented value pass", func(t *testing.T) {
		if err := chartValuesError(t, podSettings); err != nil {
			t.Error(err)
		}
	})
}

// podSettings sets every value that reaches the manager's pod template.
var podSettings = map[string]any{
	"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
	"extraArgs":        []any{"--kube-api-qps=100", "--zap-log-level=debug"},
	"extraEnv":         []any{map[string]any{"name": "GOGC", "value": "100"}},
	"podAnnotations":   map[string]any{"example.com/team": "batch", "kubectl.kubernetes.io/default-container": "other"},
	"podLabels":        map[string]any{"team": "batch", "control-plane": "mine"},
	"nodeSelector":     map[string]any{"kubernetes.io/os": "linux"},
	"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}},
	"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64", "arm64"}}}}},
	}}},
}

// TestChartPodSettings: scheduling, pull secrets, pod metadata, extra flags and environment
// variables reach the pod template as given, after the chart's own, without changing what
// selects the pods.
func TestChartPodSettings(t *testing.T) {
	dep := decode[appsv1.Deployment](t, renderChart(t, podSettings).find(t, "Deployment", deploymentName))
	pod := dep.Spec.Template
	if got := pod.Spec.ImagePullSecrets; len(got) != 1 || got[0].Name != "regcred" {
		t.Errorf("imagePullSecrets = %v", got)
	}
	if got := pod.Spec.NodeSelector; !maps.Equal(got, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("nodeSelector = %v", got)
	}
	if got := pod.Spec.Tolerations; len(got) != 1 || got[0].Key != "dedicated" || got[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("tolerations = %v", got)
	}
	if a := pod.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("affinity = %+v", a)
	}
	if pod.Annotations["example.com/team"] != "batch" || pod.Annotations["kubectl.kubernetes.io/default-container"] != "manager" {
		t.Errorf("pod annotations = %v, want the extra one and default-container still manager", pod.Annotations)
	}
	if pod.Labels["team"] != "batch" || pod.Labels["control-plane"] != "controller-manager" {
		t.Errorf("pod labels = %v, want team=batch and the selector's control-plane=controller-manager", pod.Labels)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pods (%v)", k, v, pod.Labels)
		}
	}
	args := managerContainer(t, dep).Args
	if n := len(args); n < 2 || args[n-2] != "--kube-api-qps=100" || args[n-1] != "--zap-log-level=debug" {
		t.Errorf("manager args = %q, want the extra args last", args)
	}
	env := managerContainer(t, dep).Env
	if n := len(env); n < 2 || env[n-1].Name != "GOGC" || env[n-1].Value != "100" || env[n-2].Name != "GOMEMLIMIT" {
		t.Errorf("manager env = %v, want the chart's own (GOMEMLIMIT last of them) and then GOGC=100", env)
	}
}

// serviceMonitor is the part of a ServiceMonitor the chart sets.
type serviceMonitor struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Endpoints []map[string]any `json:"endpoints"`
	} `json:"spec"`
}

// TestChartServiceMonitor: the monitor carries the labels a Prometheus selects by, scrapes
// with the token of a ServiceAccount that may get /metrics and nothing else, and verifies the
// certificate whenever cert-manager issues it.
func TestChartServiceMonitor(t *testing.T) {
	const monitorName = "task-operator-controller-manager-metrics-monitor"
	for _, certManager := range []bool{false, true} {
		t.Run(map[bool]string{false: "self-signed", true: "cert-manager"}[certManager], func(t *testing.T) {
			v := withValues(withValues(nil, "metrics.serviceMonitor.labels", map[string]any{"release": "kube-prometheus-stack"}), "certManager.enabled", certManager)
			v = withValues(v, "metrics.serviceMonitor.enabled", true)
			v = withValues(v, "metrics.prometheusRule.labels", map[string]any{"release": "kube-prometheus-stack"})
			v = withValues(v, "metrics.prometheusRule.enabled", true)
			objs := renderChart(t, v)
			var m serviceMonitor
			if err := yaml.Unmarshal(objs.find(t, "ServiceMonitor", monitorName).raw, &m); err != nil {
				t.Fatal(err)
			}
			if m.Metadata.Labels["release"] != "kube-prometheus-stack" {
				t.Errorf("ServiceMonitor labels = %v, want release=kube-prometheus-stack", m.Metadata.Labels)
			}
			var rule serviceMonitor // only its labels
			if err := yaml.Unmarshal(objs.find(t, "PrometheusRule", "task-operator-alerts").raw, &rule); err != nil || rule.Metadata.Labels["release"] != "kube-prometheus-stack" {
				t.Errorf("PrometheusRule labels = %v (%v), want release=kube-prometheus-stack", rule.Metadata.Labels, err)
			}
			if len(m.Spec.Endpoints) != 1 {
				t.Fatalf("%d endpoints", len(m.Spec.Endpoints))
			}
			ep := m.Spec.Endpoints[0]
			if _, ok := ep["bearerTokenFile"]; ok {
				t.Error("the endpoint uses the deprecated bearerTokenFile")
			}
			checkScraperToken(t, objs, ep)
			tls, _ := ep["tlsConfig"].(map[string]any)
			if !certManager {
				if tls["insecureSkipVerify"] != true {
					t.Errorf("tlsConfig = %v; the operator's own certificate is self-signed", tls)
				}
				return
			}
			if _, ok := tls["insecureSkipVerify"]; ok {
				t.Errorf("tlsConfig = %v: skips verification of cert-manager's certificate", tls)
			}
			checkVerifiesMetricsCert(t, objs, tls)
		})
	}
}

// checkScraperToken: the endpoint's bearer token is a ServiceAccount token Secret, of a
// ServiceAccount bound to the metrics-reader ClusterRole.
func checkScraperToken(t *testing.T, objs rendered, ep map[string]any) {
	t.Helper()
	var auth struct {
		Type        string
		Credentials struct{ Name, Key string }
	}
	raw, _ := yaml.Marshal(ep["authorization"])
	if err := yaml.Unmarshal(raw, &auth); err != nil || auth.Type != "Bearer" || auth.Credentials.Key != "token" {
		t.Fatalf("authorization = %s (%v), want Bearer from a Secret's key token", raw, err)
	}
	secret := decode[corev1.Secret](t, objs.find(t, "Secret", auth.Credentials.Name))
	sa := secret.Annotations[corev1.ServiceAccountNameKey]
	if secret.Type != corev1.SecretTypeServiceAccountToken || secret.Namespace != namespace {
		t.Errorf("Secret %s is %q in %s, want a ServiceAccount token in %s", secret.Name, secret.Type, secret.Namespace, namespace)
	}
	objs.find(t, "ServiceAccount", sa)
	reader := decode[rbacv1.ClusterRole](t, objs.find(t, "ClusterRole", "task-operator-metrics-reader"))
	bound := false
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		b := decode[rbacv1.ClusterRoleBinding](t, o)
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace {
				if b.RoleRef.Name != reader.Name {
					t.Errorf("%s binds the scraper to %s; only the metrics reader is expected", o, b.RoleRef.Name)
				}
				bound = true
			}
		}
	}
	if !bound {
		t.Errorf("the scraper ServiceAccount %s is bound to nothing", sa)
	}
}

// checkVerifiesMetricsCert: the CA is read from the Secret cert-manager writes the metrics
// certificate to, and the server name is one of that certificate's DNS names.
func checkVerifiesMetricsCert(t *testing.T, objs rendered, tls map[string]any) {
	t.Helper()
	var cfg struct {
		CA struct {
			Secret struct{ Name, Key string }
		}
		ServerName string `json:"serverName"`
	}
	raw, _ := yaml.Marshal(tls)
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var cert struct {
		Spec struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(objs.find(t, "Certificate", "task-operator-metrics-cert").raw, &cert); err != nil {
		t.Fatal(err)
	}
	if cfg.CA.Secret.Name != cert.Spec.SecretName || cfg.CA.Secret.Key != "ca.crt" {
		t.Errorf("tlsConfig.ca = %+v, want key ca.crt of the metrics certificate's Secret %s", cfg.CA, cert.Spec.SecretName)
	}
	if !slices.Contains(cert.Spec.DNSNames, cfg.ServerName) {
		t.Errorf("tlsConfig.serverName %q is none of the certificate's names %v", cfg.ServerName, cert.Spec.DNSNames)
	}
}

// TestChartMetadata: Chart.yaml says which clusters it installs on, where it comes from, and
// what Artifact Hub shows: the CRD at its storage version, the v1 sample, the default image.
func TestChartMetadata(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	md := ch.Metadata
	if err := md.Validate(); err != nil {
		t.Errorf("Chart.yaml: %v", err)
	}
	if !v2util.IsCompatibleRange(md.KubeVersion, "v1.37.2") || v2util.IsCompatibleRange(md.KubeVersion, "v1.29.0") {
		t.Errorf("kubeVersion %q: want it to admit 1.37 (what the tests run on) and refuse 1.29", md.KubeVersion)
	}
	if md.Home == "" || len(md.Sources) == 0 || md.Icon == "" {
		t.Errorf("home %q, sources %v, icon %q: want all three", md.Home, md.Sources, md.Icon)
	}

	var crds []struct{ Kind, Version, Name, DisplayName, Description string }
	annotation(t, md.Annotations, "artifacthub.io/crds", &crds)
	crd := renderChart(t, nil).find(t, "CustomResourceDefinition", crdName)
	var spec struct {
		Spec struct {
			Names    struct{ Kind string }
			Versions []struct {
				Name    string
				Storage bool
			}
		}
	}
	if err := yaml.Unmarshal(crd.raw, &spec); err != nil {
		t.Fatal(err)
	}
	storage := ""
	for _, v := range spec.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if len(crds) != 1 || crds[0].Name != crdName || crds[0].Kind != spec.Spec.Names.Kind || crds[0].Version != storage {
		t.Errorf("artifacthub.io/crds = %+v, want %s %s at %s", crds, crdName, spec.Spec.Names.Kind, storage)
	}

	var examples []map[string]any
	annotation(t, md.Annotations, "artifacthub.io/crdsExamples", &examples)
	var sample map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, "samples/v1_task.yaml")), &sample); err != nil {
		t.Fatal(err)
	}
	if len(examples) != 1 || !equalJSON(t, examples[0], sample) {
		t.Errorf("artifacthub.io/crdsExamples is not config/samples/v1_task.yaml:\n%v", examples)
	}

	var images []struct{ Name, Image string }
	annotation(t, md.Annotations, "artifacthub.io/images", &images)
	dep := decode[appsv1.Deployment](t, renderChart(t, nil).find(t, "Deployment", deploymentName))
	if img := managerContainer(t, dep).Image; len(images) != 1 || images[0].Image != img {
		t.Errorf("artifacthub.io/images = %+v, want the image the chart installs, %s", images, img)
	}
}

func annotation(t *testing.T, annotations map[string]string, key string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(annotations[key]), into); err != nil || annotations[key] == "" {
		t.Errorf("annotation %s: %v\n%s", key, err, annotations[key])
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := yaml.Marshal(a)
	jb, err2 := yaml.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}
