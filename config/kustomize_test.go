package config_test

// These tests render the kustomize overlays under config/ with kubectl (whose built-in
// kustomize is what users run) and check what comes out: first offline, by reading the
// rendered objects, then against a real kube-apiserver with a server-side dry run, which
// runs the apiserver's own validation, strict field checking and admission.

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// What config/default promises; the operator's flag defaults (webhook.DefaultOptions) use the
// same names.
const (
	namespace          = "task-operator-system"
	webhookService     = "task-operator-webhook-service"
	mutatingConfig     = "task-operator-mutating-webhook-configuration"
	validatingConfig   = "task-operator-validating-webhook-configuration"
	deploymentName     = "task-operator-controller-manager"
	serviceAccountName = "task-operator-controller-manager"
	webhookSecret      = "task-operator-webhook-cert"
	certificateName    = "task-operator-serving-cert"
	certDir            = "/tmp/k8s-webhook-server/serving-certs"
	crdName            = taskv1.CRDName
	injectCAFrom       = "cert-manager.io/inject-ca-from"
)

// clusterScoped lists the kinds rendered without a namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true,
	"ClusterRoleBinding": true, "MutatingWebhookConfiguration": true,
	"ValidatingWebhookConfiguration": true,
}

// object is one rendered manifest: its identity plus the YAML it came from.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	raw []byte
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s", o.Kind, o.Metadata.Namespace, o.Metadata.Name)
}

// group is the API group of the object ("" for the core group).
func (o object) group() string {
	if g, _, ok := strings.Cut(o.APIVersion, "/"); ok {
		return g
	}
	return ""
}

type rendered []object

// find returns the one object of the given kind and name, failing the test otherwise.
func (r rendered) find(t *testing.T, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range r {
		if o.Kind == kind && o.Metadata.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q in the rendered output, found %d", kind, name, len(found))
	}
	return found[0]
}

func (r rendered) ofKind(kind string) []object {
	var out []object
	for _, o := range r {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// yamlOf joins the objects into one multi-document stream for kubectl.
func (r rendered) yamlOf(keep func(object) bool) []byte {
	var b bytes.Buffer
	for _, o := range r {
		if keep(o) {
			b.WriteString("---\n")
			b.Write(o.raw)
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// decode reads the object into a typed API struct, refusing fields the type does not have,
// so that a misspelt field in a manifest fails here rather than being dropped on apply.
func decode[T any](t *testing.T, o object) *T {
	t.Helper()
	v := new(T)
	if err := yaml.UnmarshalStrict(o.raw, v); err != nil {
		t.Fatalf("decode %s: %v", o, err)
	}
	return v
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// kubectl runs kubectl with the given stdin and returns what it printed; a failure ends the
// test.
func kubectl(t *testing.T, stdin []byte, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	stdout, stderr, err := testenv.Kubectl(ctx, "", stdin, args...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, stdout)
	}
	return stdout, stderr
}

// render builds a kustomization directory (relative to config/) with kubectl's kustomize.
func render(t *testing.T, dir string) rendered {
	t.Helper()
	out, _ := kubectl(t, nil, "kustomize", dir)
	var objs rendered
	for _, doc := range docSeparator.Split(out, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parse a document rendered from %s: %v\n%s", dir, err, doc)
		}
		if o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("document rendered from %s has no kind or name:\n%s", dir, doc)
		}
		o.raw = []byte(doc)
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return objs
}

// parseArgs splits the manager's command line into its subcommand and its --name[=value]
// flags; a bare flag maps to "true".
func parseArgs(t *testing.T, args []string) (string, map[string]string) {
	t.Helper()
	if len(args) == 0 {
		t.Fatal("manager container has no args")
	}
	flags := map[string]string{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			t.Errorf("manager arg %q is not a flag", a)
		}
		if !ok {
			value = "true"
		}
		if _, dup := flags[name]; dup {
			t.Errorf("manager flag --%s given twice", name)
		}
		flags[name] = value
	}
	return args[0], flags
}

func managerContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container named manager", d.Name)
	return corev1.Container{}
}

// checkOverlay holds what both overlays must get right; it returns the manager's flags and
// its webhook-certs volume for the overlay-specific checks.
func checkOverlay(t *testing.T, objs rendered) (map[string]string, corev1.Volume) {
	t.Helper()

	// Everything namespaced lands in the operator's namespace, which is itself rendered.
	objs.find(t, "Namespace", namespace)
	for _, o := range objs {
		if clusterScoped[o.Kind] {
			if o.Metadata.Namespace != "" {
				t.Errorf("cluster-scoped %s has a namespace", o)
			}
		} else if o.Metadata.Namespace != namespace {
			t.Errorf("%s is not in namespace %s", o, namespace)
		}
	}

	// The Deployment: two replicas under the restricted Pod Security Standard.
	dep := decode[appsv1.Deployment](t, objs.find(t, "Deployment", deploymentName))
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %v, want 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != serviceAccountName {
		t.Errorf("pod serviceAccountName = %q, want %q", pod.ServiceAccountName, serviceAccountName)
	}
	if pod.TerminationGracePeriodSeconds == nil {
		t.Error("pod has no terminationGracePeriodSeconds")
	}
	if len(pod.TopologySpreadConstraints) == 0 && (pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil) {
		t.Error("pod neither spreads over nodes nor has pod anti-affinity")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	c := managerContainer(t, dep)
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Error("manager container has no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("manager container allows privilege escalation")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("manager container's root filesystem is writable")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("manager container capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("manager container is privileged")
	}
	if c.Image == "" || c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Requests.Memory().String() != "128Mi" ||
		c.Resources.Limits.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "512Mi" {
		t.Errorf("manager image %q, resources %+v: want an image, requests 100m/128Mi and limits 1/512Mi", c.Image, c.Resources)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, want := range map[string]int32{"webhook-server": 9443, "metrics": 8443, "health": 8081} {
		if ports[name] != want {
			t.Errorf("manager port %q = %d, want %d", name, ports[name], want)
		}
	}
	for _, pw := range []struct {
		probe *corev1.Probe
		want  string
	}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		probe, want := pw.probe, pw.want
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want ||
			(probe.HTTPGet.Port != intstr.FromInt32(8081) && probe.HTTPGet.Port != intstr.FromString("health")) {
			t.Errorf("probe for %s = %+v, want an HTTP GET of %s on port 8081", want, probe, want)
		}
	}
	podNamespaceEnv := false
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNamespaceEnv = true
		}
	}
	if !podNamespaceEnv {
		t.Error("manager has no POD_NAMESPACE from metadata.namespace (--webhook-namespace defaults to it)")
	}

	// The command line names exactly the objects that were rendered.
	command, flags := parseArgs(t, c.Args)
	if command != "manager" {
		t.Errorf("manager container runs %q, want the manager subcommand", command)
	}
	for name, want := range map[string]string{
		"leader-elect":                     "true",
		"metrics-bind-address":             ":8443",
		"health-probe-bind-address":        ":8081",
		"webhook-port":                     "9443",
		"webhook-cert-dir":                 certDir,
		"webhook-service":                  webhookService,
		"mutating-webhook-configuration":   mutatingConfig,
		"validating-webhook-configuration": validatingConfig,
		"webhook-secret":                   webhookSecret,
	} {
		if flags[name] != want {
			t.Errorf("manager flag --%s = %q, want %q", name, flags[name], want)
		}
	}
	// HTTP Tasks run in the manager's own image: RUNNER_IMAGE must be the container's image
	// (TestImageOverlay checks that one images: setting keeps them together).
	if _, ok := flags["runner-image"]; ok {
		t.Error("manager sets --runner-image, which an overlay's images: cannot reach; RUNNER_IMAGE is what kustomize rewrites")
	}
	if got := envValue(c, "RUNNER_IMAGE"); got != c.Image {
		t.Errorf("manager RUNNER_IMAGE = %q, want the container's image %q", got, c.Image)
	}
	checkShutdown(t, flags, pod.TerminationGracePeriodSeconds)
	var certVolume corev1.Volume
	for _, v := range pod.Volumes {
		if v.Name == "webhook-certs" {
			certVolume = v
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == certDir && m.Name == certVolume.Name && certVolume.Name != "" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("no volume webhook-certs is mounted at %s", certDir)
	}

	// The PodDisruptionBudget and both Services select the manager's pods.
	podLabels := dep.Spec.Template.Labels
	selects := func(sel map[string]string) bool {
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if dep.Spec.Selector == nil || !selects(dep.Spec.Selector.MatchLabels) {
		t.Errorf("Deployment selector %v does not match its pod labels %v", dep.Spec.Selector, podLabels)
	}
	pdbs := objs.ofKind("PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, found %d", len(pdbs))
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, pdbs[0])
	// maxUnavailable 1 never blocks a node drain, even at one replica (minAvailable 1 would),
	// and AlwaysAllow lets a crash-looping pod be evicted.
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) ||
		pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow ||
		pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget spec = %+v, want maxUnavailable 1, unhealthyPodEvictionPolicy AlwaysAllow, over the manager's pods", pdb.Spec)
	}
	webhookSvc := decode[corev1.Service](t, objs.find(t, "Service", webhookService))
	if !selects(webhookSvc.Spec.Selector) || len(webhookSvc.Spec.Ports) != 1 || webhookSvc.Spec.Ports[0].Port != 443 ||
		(webhookSvc.Spec.Ports[0].TargetPort != intstr.FromInt32(9443) && webhookSvc.Spec.Ports[0].TargetPort != intstr.FromString("webhook-server")) {
		t.Errorf("webhook Service spec = %+v, want port 443 to the manager pods' 9443", webhookSvc.Spec)
	}
	metricsSvc := decode[corev1.Service](t, objs.find(t, "Service", "task-operator-controller-manager-metrics-service"))
	if !selects(metricsSvc.Spec.Selector) || len(metricsSvc.Spec.Ports) != 1 || metricsSvc.Spec.Ports[0].Port != 8443 ||
		(metricsSvc.Spec.Ports[0].TargetPort != intstr.FromInt32(8443) && metricsSvc.Spec.Ports[0].TargetPort != intstr.FromString("metrics")) {
		t.Errorf("metrics Service spec = %+v, want port 8443 to the manager pods' 8443", metricsSvc.Spec)
	}

	// Conversion and admission both go to the webhook Service in the operator's namespace.
	crd := decode[apix.CustomResourceDefinition](t, objs.find(t, "CustomResourceDefinition", crdName))
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apix.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil ||
		conv.Webhook.ClientConfig.Service == nil {
		t.Fatalf("CRD conversion = %+v, want strategy Webhook through a Service", conv)
	}
	if s := conv.Webhook.ClientConfig.Service; s.Name != webhookService || s.Namespace != namespace || s.Path == nil || *s.Path != "/convert" {
		t.Errorf("CRD conversion service = %s/%s path %v, want %s/%s path /convert", s.Namespace, s.Name, s.Path, namespace, webhookService)
	}
	if !slices.Equal(conv.Webhook.ConversionReviewVersions, []string{"v1"}) {
		t.Errorf("CRD conversionReviewVersions = %v, want [v1]", conv.Webhook.ConversionReviewVersions)
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	slices.Sort(versions)
	if !slices.Equal(versions, []string{"v1", "v1alpha1", "v1beta1"}) {
		t.Errorf("CRD versions = %v, want v1alpha1, v1beta1 and v1", versions)
	}
	checkService := func(what string, s *admissionv1.ServiceReference) {
		if s == nil || s.Name != webhookService || s.Namespace != namespace {
			t.Errorf("%s calls service %+v, want %s/%s", what, s, namespace, webhookService)
		}
	}
	mwc := decode[admissionv1.MutatingWebhookConfiguration](t, objs.find(t, "MutatingWebhookConfiguration", mutatingConfig))
	vwc := decode[admissionv1.ValidatingWebhookConfiguration](t, objs.find(t, "ValidatingWebhookConfiguration", validatingConfig))
	if len(mwc.Webhooks) == 0 || len(vwc.Webhooks) == 0 {
		t.Error("a webhook configuration has no webhooks")
	}
	for _, w := range mwc.Webhooks {
		checkService("mutating webhook "+w.Name, w.ClientConfig.Service)
	}
	for _, w := range vwc.Webhooks {
		checkService("validating webhook "+w.Name, w.ClientConfig.Service)
	}

	checkRBAC(t, objs)
	return flags, certVolume
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkShutdown: the pod's grace period covers the drain (readiness fails, webhooks keep
// being served) plus the manager's graceful shutdown, with time to spare, so the kubelet
// never SIGKILLs a replica that is still finishing requests.
func checkShutdown(t *testing.T, flags map[string]string, grace *int64) {
	t.Helper()
	var total time.Duration
	for _, name := range []string{"shutdown-delay", "graceful-shutdown-timeout"} {
		d, err := time.ParseDuration(flags[name])
		if err != nil || d <= 0 {
			t.Errorf("manager flag --%s = %q, want a positive duration", name, flags[name])
		}
		total += d
	}
	const margin = 5 * time.Second
	if grace == nil || time.Duration(*grace)*time.Second < total+margin {
		t.Errorf("terminationGracePeriodSeconds = %v, want at least --shutdown-delay + --graceful-shutdown-timeout + %s = %s", grace, margin, total+margin)
	}
}

// checkRBAC: no wildcards anywhere, the manager's ServiceAccount holds the generated role,
// leader election and metrics authentication, and every binding points at a rendered role.
func checkRBAC(t *testing.T, objs rendered) {
	t.Helper()
	noWildcard := func(o object, rules []rbacv1.PolicyRule) {
		for i, r := range rules {
			for field, values := range map[string][]string{
				"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs,
				"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
			} {
				for _, v := range values {
					if strings.Contains(v, "*") {
						t.Errorf("%s rule %d has %q in %s", o, i, v, field)
					}
				}
			}
			for _, v := range r.Verbs {
				if v == "escalate" || v == "bind" || v == "impersonate" {
					t.Errorf("%s rule %d grants %q", o, i, v)
				}
			}
		}
	}
	roles := map[string][]rbacv1.PolicyRule{} // "Kind/name" -> rules
	for _, o := range objs.ofKind("ClusterRole") {
		cr := decode[rbacv1.ClusterRole](t, o)
		if cr.AggregationRule != nil {
			t.Errorf("%s aggregates other roles", o)
		}
		noWildcard(o, cr.Rules)
		roles["ClusterRole/"+cr.Name] = cr.Rules
	}
	for _, o := range objs.ofKind("Role") {
		r := decode[rbacv1.Role](t, o)
		noWildcard(o, r.Rules)
		roles["Role/"+r.Name] = r.Rules
	}
	if len(roles) == 0 {
		t.Fatal("no roles rendered")
	}
	if rules := roles["ClusterRole/task-operator-metrics-reader"]; len(rules) != 1 ||
		!slices.Equal(rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics-reader rules = %+v, want get on /metrics only", rules)
	}

	// What the manager's ServiceAccount is bound to.
	held := map[string]bool{}
	check := func(o object, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
		if _, ok := roles[ref.Kind+"/"+ref.Name]; !ok {
			t.Errorf("%s refers to %s %q, which is not rendered", o, ref.Kind, ref.Name)
		}
		for _, s := range subjects {
			if s.Kind == "ServiceAccount" && s.Name == serviceAccountName && s.Namespace == namespace {
				held[ref.Kind+"/"+ref.Name] = true
			} else {
				t.Errorf("%s binds %+v; only the manager's ServiceAccount is expected", o, s)
			}
		}
	}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		b := decode[rbacv1.ClusterRoleBinding](t, o)
		check(o, b.RoleRef, b.Subjects)
	}

	for _, o := range objs.ofKind("RoleBinding") {
		b := decode[rbacv1.RoleBinding](t, o)
		check(o, b.RoleRef, b.Subjects)
	}
	for _, want := range []string{
		"ClusterRole/task-operator-manager-role",
		"ClusterRole/task-operator-metrics-auth-role",
		"Role/task-operator-leader-election-role",
	} {
		if !held[want] {
			t.Errorf("the manager's ServiceAccount is not bound to %s", want)
		}
	}
	for role := range held {
		checkConfinedWrites(t, objs, role, roles[role])
	}
	checkAggregation(t, objs)
	objs.find(t, "ServiceAccount", serviceAccountName)
	leases := false
	for _, r := range roles["Role/task-operator-leader-election-role"] {
		if slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") {
			leases = true
		}
	}
	if !leases {
		t.Error("the leader election Role does not cover leases")
	}
}

// confined lists the resources whose writes can take over other components: a webhook
// configuration can intercept any API call, a CRD's conversion webhook every read of it, and a
// Secret holds credentials. The manager may write them only by name, and only its own.
var confined = map[string]bool{
	"customresourcedefinitions": true, "mutatingwebhookconfigurations": true,
	"validatingwebhookconfigurations": true, "secrets": true,
}

func checkConfinedWrites(t *testing.T, objs rendered, role string, rules []rbacv1.PolicyRule) {
	t.Helper()
	own := map[string]bool{crdName: true, mutatingConfig: true, validatingConfig: true, webhookSecret: true}
	for i, r := range rules {
		writes := slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
		if !writes || !slices.ContainsFunc(r.Resources, func(res string) bool { return confined[res] }) {
			continue
		}
		if slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "delete") || slices.Contains(r.Verbs, "deletecollection") {
			t.Errorf("%s rule %d lets the manager create or delete %v", role, i, r.Resources)
		}
		if len(r.ResourceNames) == 0 {
			t.Errorf("%s rule %d lets the manager %v any of %v; want resourceNames", role, i, r.Verbs, r.Resources)
		}
		for _, name := range r.ResourceNames {
			if !own[name] {
				t.Errorf("%s rule %d names %q, which is not one of the operator's objects", role, i, name)
			}
		}
	}
}

// checkAggregation: the Task roles join the built-in admin, edit and view roles.
func checkAggregation(t *testing.T, objs rendered) {
	t.Helper()
	for name, labels := range map[string][]string{
		"task-operator-task-editor-role": {"admin", "edit"},
		"task-operator-task-viewer-role": {"view"},
	} {
		cr := decode[rbacv1.ClusterRole](t, objs.find(t, "ClusterRole", name))
		for _, to := range labels {
			if cr.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
				t.Errorf("ClusterRole %s is not aggregated to %s", name, to)
			}
		}
	}
}

func TestDefaultOverlay(t *testing.T) {
	objs := render(t, "default")
	flags, certs := checkOverlay(t, objs)
	// Self-managed certificates: the operator writes them into an emptyDir and injects the CA.
	if m := flags["cert-management"]; m != "" && m != "self" {
		t.Errorf("--cert-management = %q, want self (or unset)", m)
	}
	if certs.EmptyDir == nil || certs.Secret != nil {
		t.Errorf("webhook-certs volume = %+v, want an emptyDir", certs.VolumeSource)
	}
	// The operator only updates its certificate Secret; config/default ships it, empty.
	secret := decode[corev1.Secret](t, objs.find(t, "Secret", webhookSecret))
	if len(secret.Data) > 0 || len(secret.StringData) > 0 || secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s = %+v, want an empty Opaque Secret for the operator to fill", webhookSecret, secret)
	}
	for _, o := range objs {
		if _, ok := o.Metadata.Annotations[injectCAFrom]; ok {
			t.Errorf("%s has %s, but config/default does not use cert-manager", o, injectCAFrom)
		}
		if o.group() == "cert-manager.io" {
			t.Errorf("config/default renders the cert-manager object %s", o)
		}
	}
}

func TestCertManagerOverlay(t *testing.T) {
	objs := render(t, "default-certmanager")
	flags, certs := checkOverlay(t, objs)
	if flags["cert-management"] != "external" {
		t.Errorf("--cert-management = %q, want external", flags["cert-management"])
	}
	if certs.Secret == nil || certs.EmptyDir != nil || certs.Secret.SecretName != webhookSecret {
		t.Errorf("webhook-certs volume = %+v, want only the Secret %s", certs.VolumeSource, webhookSecret)
	}
	want := namespace + "/" + certificateName
	for _, o := range []object{
		objs.find(t, "CustomResourceDefinition", crdName),
		objs.find(t, "MutatingWebhookConfiguration", mutatingConfig),
		objs.find(t, "ValidatingWebhookConfiguration", validatingConfig),
	} {
		if got := o.Metadata.Annotations[injectCAFrom]; got != want {
			t.Errorf("%s annotation %s = %q, want %q", o, injectCAFrom, got, want)
		}
	}

	// The Certificate covers the webhook Service and writes the Secret the pods mount; its
	// Issuer is rendered beside it. (Typed cert-manager structs are not in the module graph.)
	var cert struct {
		Spec struct {
			DNSNames   []string `json:"dnsNames"`
			SecretName string   `json:"secretName"`
			IssuerRef  struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"issuerRef"`
		} `json:"spec"`
	}
	certObj := objs.find(t, "Certificate", certificateName)
	if err := yaml.Unmarshal(certObj.raw, &cert); err != nil {
		t.Fatalf("decode %s: %v", certObj, err)
	}
	if certObj.group() != "cert-manager.io" || certObj.Metadata.Namespace != namespace {
		t.Errorf("Certificate is %s in %s", certObj.APIVersion, certObj.Metadata.Namespace)
	}
	svcDNS := webhookService + "." + namespace + ".svc"
	if !slices.Equal(cert.Spec.DNSNames, []string{svcDNS, svcDNS + ".cluster.local"}) {
		t.Errorf("Certificate dnsNames = %v, want %s and %s.cluster.local", cert.Spec.DNSNames, svcDNS, svcDNS)
	}
	if cert.Spec.SecretName != webhookSecret {
		t.Errorf("Certificate secretName = %q, want %q", cert.Spec.SecretName, webhookSecret)
	}
	issuer := objs.find(t, cert.Spec.IssuerRef.Kind, cert.Spec.IssuerRef.Name)
	if !strings.Contains(string(issuer.raw), "selfSigned:") {
		t.Errorf("Issuer %s is not self-signed", issuer)
	}
}

func TestSamples(t *testing.T) {
	objs := render(t, "samples")
	names := map[string]string{}
	for _, o := range objs {
		if o.Kind != taskv1.Kind || o.group() != taskv1.Group {
			t.Errorf("samples render %s %s, want only Tasks", o.APIVersion, o.Kind)
		}
		if o.Metadata.Namespace != "" {
			t.Errorf("sample %s sets a namespace; samples go wherever they are applied", o)
		}
		names[o.Metadata.Name] = o.APIVersion
	}
	for name, apiVersion := range map[string]string{
		"sample-v1alpha1":  "example.com/v1alpha1",
		"sample-v1beta1":   "example.com/v1beta1",
		"sample-v1":        "example.com/v1",
		"sample-scheduled": "example.com/v1",
		"sample-http":      "example.com/v1",
	} {
		if names[name] != apiVersion {
			t.Errorf("sample %s is %q, want %s", name, names[name], apiVersion)
		}
	}
}

// TestServerDryRun hands the rendered manifests to a real kube-apiserver (with etcd, the
// Task CRD from config/crd/bases installed as the control plane starts) with a server-side
// dry run. That exercises the apiserver's schema validation, strict field validation and
// admission (Pod Security included) without anything having to run.
//
// A dry run persists nothing, so objects cannot depend on each other inside one dry run: the
// namespaced objects would be refused because task-operator-system does not exist. Hence two
// steps: first the Namespace is created for real, then the whole rendering is dry-run,
// Namespace and CRD included (they come out as "configured", which still validates them).
// The samples are dry-run as well, one per served version, against the CRD as installed
// from config/crd/bases: it has no conversion webhook, so nothing needs to answer one, and
// each sample is checked against the schema and CEL rules of its own version.
func TestServerDryRun(t *testing.T) {
	cp := testenv.StartT(t, testenv.Options{}) // skips with -short
	kc := "--kubeconfig=" + cp.KubeconfigPath

	defaults := render(t, "default")
	isNamespace := func(o object) bool { return o.Kind == "Namespace" }
	out, stderr := kubectl(t, defaults.yamlOf(isNamespace), kc, "apply", "-f", "-")
	t.Logf("step 1, for real:\n%s%s", out, stderr)

	dryRun := func(name string, objs rendered, keep func(object) bool, extra ...string) {
		t.Helper()
		want := 0
		for _, o := range objs {
			if keep(o) {
				want++
			}
		}
		args := append([]string{kc, "apply", "--dry-run=server", "-f", "-"}, extra...)
		out, stderr := kubectl(t, objs.yamlOf(keep), args...)
		t.Logf("%s, server dry run:\n%s%s", name, out, stderr)
		if got := strings.Count(out, "(server dry run)"); got != want {
			t.Errorf("%s: %d objects accepted, want %d", name, got, want)
		}
		if strings.Contains(stderr, "PodSecurity") {
			t.Errorf("%s: Pod Security admission warns:\n%s", name, stderr)
		}
	}
	all := func(object) bool { return true }
	dryRun("config/default", defaults, all)

	// cert-manager's own CRDs are not installed here; everything else of that overlay is.
	certManager := render(t, "default-certmanager")
	dryRun("config/default-certmanager", certManager, func(o object) bool { return o.group() != "cert-manager.io" })

	dryRun("config/migration", render(t, "migration"), all)
	dryRun("config/network-policy", render(t, "network-policy"), all)
	dryRun("config/local", render(t, "local"), all)
	dryRun("config/samples", render(t, "samples"), all, "--namespace=default")

	// The chart's pod settings, scraper identity and dashboard, which no overlay renders; the
	// Prometheus Operator's CRDs are not installed here.
	withEverything := withValues(withValues(podSettings, "metrics.serviceMonitor.enabled", true), "metrics.dashboard.enabled", true)
	dryRun("helm chart, every value set", renderChart(t, withEverything), func(o object) bool { return o.group() != "monitoring.coreos.com" })

	// The Helm chart, rendered with the Helm SDK, applied for real with server-side apply (as
	// Helm 4 does), with the network policies on. Its CRD replaces the one from
	// config/crd/bases, conversion webhook and all.
	chart := renderChart(t, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
	out, stderr = kubectl(t, chart.yamlOf(all), kc, "apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", "-")
	t.Logf("helm chart, server-side apply:\n%s%s", out, stderr)
	if got := strings.Count(out, "serverside-applied"); got != len(chart) {
		t.Errorf("helm chart: %d of %d objects applied", got, len(chart))
	}
	live, _ := kubectl(t, nil, kc, "get", "-n", namespace, "deployment,service,secret,poddisruptionbudget,networkpolicy", "-o", "name")
	for _, want := range []string{"deployment.apps/" + deploymentName, "service/" + webhookService, "secret/" + webhookSecret,
		"poddisruptionbudget.policy/" + deploymentName, "networkpolicy.networking.k8s.io/task-operator-allow-webhook-traffic"} {
		if !strings.Contains(live, want) {
			t.Errorf("after applying the chart, %s is missing:\n%s", want, live)
		}
	}
}

// checkRBACBindsOnlyManager: every binding rendered binds the manager's ServiceAccount alone.
func checkRBACBindsOnlyManager(t *testing.T, objs rendered) {
	t.Helper()
	check := func(o object, subjects []rbacv1.Subject) {
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Name != serviceAccountName || s.Namespace != namespace {
				t.Errorf("%s binds %+v; only the manager's ServiceAccount is expected", o, s)
			}
		}
	}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		check(o, decode[rbacv1.ClusterRoleBinding](t, o).Subjects)
	}
	for _, o := range objs.ofKind("RoleBinding") {
		check(o, decode[rbacv1.RoleBinding](t, o).Subjects)
	}
}
