package config_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/versions"
)

// checkWiring holds for any rendering of the install, whatever its names and namespace: the
// names the manager is told on its command line (--webhook-service, --webhook-secret and the
// two webhook configurations) are the objects that were rendered, the CRD and the webhook
// configurations call that Service, and the roles bound to the manager's ServiceAccount let it
// write exactly those objects by name. Otherwise the operator injects its CA into objects that
// do not exist, serves a certificate for a Service name nobody calls, or is forbidden to.
func checkWiring(t *testing.T, objs rendered) {
	t.Helper()
	deps := objs.ofKind("Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments rendered", len(deps))
	}
	dep := decode[appsv1.Deployment](t, deps[0])
	ns := dep.Namespace
	_, flags := parseArgs(t, managerContainer(t, dep).Args)
	names := map[string]string{}
	for flag, kind := range map[string]string{
		"webhook-service":                  "Service",
		"mutating-webhook-configuration":   "MutatingWebhookConfiguration",
		"validating-webhook-configuration": "ValidatingWebhookConfiguration",
	} {
		name := flags[flag]
		names[kind] = name
		found := false
		for _, o := range objs.ofKind(kind) {
			found = found || (o.Metadata.Name == name && (kind != "Service" || o.Metadata.Namespace == ns))
		}
		if !found {
			t.Errorf("--%s=%s, but no %s of that name is rendered (in %s)", flag, name, kind, ns)
		}
	}
	secret := flags["webhook-secret"]
	secretFound := false
	for _, o := range objs.ofKind("Secret") {
		secretFound = secretFound || (o.Metadata.Name == secret && o.Metadata.Namespace == ns)
	}
	if !secretFound {
		t.Errorf("--webhook-secret=%s, but no such Secret is rendered in %s", secret, ns)
	}

	svc := names["Service"]
	crd := decode[apix.CustomResourceDefinition](t, objs.find(t, "CustomResourceDefinition", crdName))
	if s := crd.Spec.Conversion.Webhook.ClientConfig.Service; s.Name != svc || s.Namespace != ns {
		t.Errorf("the CRD's conversion calls %s/%s, the manager serves (and certifies) %s/%s", s.Namespace, s.Name, ns, svc)
	}
	for _, o := range objs.ofKind("MutatingWebhookConfiguration") {
		for _, w := range decode[admissionv1.MutatingWebhookConfiguration](t, o).Webhooks {
			if s := w.ClientConfig.Service; s.Name != svc || s.Namespace != ns {
				t.Errorf("%s calls %s/%s, the manager serves %s/%s", o, s.Namespace, s.Name, ns, svc)
			}
		}
	}
	for _, o := range objs.ofKind("ValidatingWebhookConfiguration") {
		for _, w := range decode[admissionv1.ValidatingWebhookConfiguration](t, o).Webhooks {
			if s := w.ClientConfig.Service; s.Name != svc || s.Namespace != ns {
				t.Errorf("%s calls %s/%s, the manager serves %s/%s", o, s.Namespace, s.Name, ns, svc)
			}
		}
	}

	// What the manager's ServiceAccount may write, by name.
	sa := dep.Spec.Template.Spec.ServiceAccountName
	bound := map[string]bool{}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		b := decode[rbacv1.ClusterRoleBinding](t, o)
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns {
				bound["ClusterRole/"+b.RoleRef.Name] = true
			}
		}
	}
	for _, o := range objs.ofKind("RoleBinding") {
		b := decode[rbacv1.RoleBinding](t, o)
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns && b.Namespace == ns {
				bound[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
			}
		}
	}
	may := func(resource, verb, name, namespace string) bool {
		var rules []rbacv1.PolicyRule
		for _, o := range objs.ofKind("ClusterRole") {
			if bound["ClusterRole/"+o.Metadata.Name] {
				rules = append(rules, decode[rbacv1.ClusterRole](t, o).Rules...)
			}
		}
		for _, o := range objs.ofKind("Role") {
			if bound["Role/"+o.Metadata.Name] && o.Metadata.Namespace == namespace {
				rules = append(rules, decode[rbacv1.Role](t, o).Rules...)
			}
		}
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
				return true
			}
		}
		return false
	}
	for _, w := range []struct{ resource, verb, name, namespace string }{
		{"mutatingwebhookconfigurations", "update", names["MutatingWebhookConfiguration"], ""},
		{"validatingwebhookconfigurations", "update", names["ValidatingWebhookConfiguration"], ""},
		{"customresourcedefinitions", "update", crdName, ""},
		{"secrets", "update", secret, ns},
		// The record of writers per version, which `versions status` and retire read; its name
		// is fixed in the operator.
		{"configmaps", "patch", versions.UsageConfigMap, ns},
	} {
		if !may(w.resource, w.verb, w.name, w.namespace) {
			t.Errorf("the manager (ServiceAccount %s/%s) may not %s %s %q: the CA cannot be injected, the certificate or the record of writers stored", ns, sa, w.verb, w.resource, w.name)
		}
	}
}

// TestOuterOverlayMovingTheNamespaceStaysWired: a user's own overlay on top of config/default (the README's
// "Your own overlay: resources: [<this repo>/config/default] plus images:") that moves the
// namespace still renders an install whose manager looks for the objects that were rendered and
// may write them.
func TestOuterOverlayMovingTheNamespaceStaysWired(t *testing.T) {
	checkWiring(t, render(t, writeOverlay(t, "default", "namespace: ops\n")))
}

// TestOuterOverlayRenames pins the README's documented limit: an outer namePrefix or nameSuffix
// renames the objects but not the manager's flags. Should kustomize or config/default ever
// carry the names through, this fails, and the README's limit can go.
func TestOuterOverlayRenames(t *testing.T) {
	for _, body := range []string{"namePrefix: acme-\n", "nameSuffix: -prod\n"} {
		objs := render(t, writeOverlay(t, "default", body))
		dep := decode[appsv1.Deployment](t, objs.ofKind("Deployment")[0])
		_, flags := parseArgs(t, managerContainer(t, dep).Args)
		for _, svc := range objs.ofKind("Service") {
			if svc.Metadata.Name == flags["webhook-service"] {
				t.Errorf("overlay %q: --webhook-service=%s follows the rename: drop the README's limit on outer renames", body, svc.Metadata.Name)
			}
		}
	}
}

// TestOuterOverlayMovingTheCertManagerNamespaceKeepsItsNames pins the README's documented limit:
// an outer namespace: over config/default-certmanager moves the objects, but the CA-injection
// annotations and the certificates' DNS names keep task-operator-system. Should kustomize ever
// carry the namespace into them, this fails, and the README's limit can go.
func TestOuterOverlayMovingTheCertManagerNamespaceKeepsItsNames(t *testing.T) {
	objs := render(t, writeOverlay(t, "default-certmanager", "namespace: ops\n"))
	kept := 0
	for _, o := range objs {
		if v := o.Metadata.Annotations["cert-manager.io/inject-ca-from"]; strings.HasPrefix(v, "task-operator-system/") {
			kept++
		}
		if o.Kind == "Certificate" && strings.Contains(string(o.raw), ".task-operator-system.svc") {
			kept++
		}
	}
	if kept == 0 {
		t.Error("an outer namespace: now reaches the CA-injection annotations and the certificates' DNS names: drop the README's limit on moving config/default-certmanager")
	}
}

// renderRelease renders the chart as `helm install NAME charts/task-operator -n NAMESPACE` would
// with the given values; templates that render only comments are left out.
func renderRelease(t *testing.T, name, ns string, values map[string]any) rendered {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	opts := common.ReleaseOptions{Name: name, Namespace: ns, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, common.DefaultCapabilities)
	if err != nil {
		t.Fatalf("chart values: %v", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render chart: %v", err)
	}
	var objs rendered
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		for _, doc := range docSeparator.Split(files[f], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("parse %s: %v\n%s", f, err, doc)
			}
			if o.Kind == "" {
				continue
			}
			o.raw = []byte(doc)
			objs = append(objs, o)
		}
	}
	return objs
}

// TestChartUnderAnyReleaseNameStaysWired: `helm install` under another release name, namespace or
// fullnameOverride renders an install that is wired together.
func TestChartUnderAnyReleaseNameStaysWired(t *testing.T) {
	for _, tt := range []struct {
		name, release, ns string
		values            map[string]any
	}{
		{"default", "task-operator", namespace, nil},
		{"release foo in ops", "foo", "ops", nil},
		{"release my-task-operator", "my-task-operator", "tools", nil},
		{"fullnameOverride", "x", "ops", map[string]any{"fullnameOverride": "tasks"}},
		{"long fullnameOverride", "x", "ops", map[string]any{"fullnameOverride": "a-very-long-name-for-the-task-operator-release"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkWiring(t, renderRelease(t, tt.release, tt.ns, tt.values))
		})
	}
}

// TestChartLongNamesStayValidServiceNames: the chart truncates its fullname to 40 characters so that every
// name it derives stays valid; a Service name must be a DNS-1035 label (63 characters at most),
// or `helm install` is refused by the apiserver. A release named as teams name things
// ("platform-team-task-operator-prod") or any fullnameOverride the chart accepts must install.
func TestChartLongNamesStayValidServiceNames(t *testing.T) {
	for _, tt := range []struct {
		release string
		values  map[string]any
	}{
		{"platform-team-task-operator-prod", nil},
		{"x", map[string]any{"fullnameOverride": strings.Repeat("a", 40)}},
	} {
		objs := renderRelease(t, tt.release, "ops", tt.values)
		for _, o := range objs.ofKind("Service") {
			if errs := validation.IsDNS1035Label(o.Metadata.Name); len(errs) != 0 {
				t.Errorf("release %q %v: Service %q is not a valid name: %v", tt.release, tt.values, o.Metadata.Name, errs)
			}
		}
	}
}

// TestUndeployRemovesTheMigrationRBAC: the README's upgrade runs `make migrate`, which
// applies config/migration: a ServiceAccount and Job in the operator's namespace, and a
// ClusterRole and ClusterRoleBinding that may update every Task in the cluster and the CRD's
// status. `make undeploy` ("then everything make deploy installed") deletes the namespace, but
// the cluster-scoped pair survives it: after the uninstall, a binding that grants rights over all
// Tasks to system:serviceaccount:task-operator-system:task-operator-migrate is left behind, for
// whoever creates that ServiceAccount next. Run `make undeploy` with a kubectl that records what
// it is asked to delete.
func TestUndeployRemovesTheMigrationRBAC(t *testing.T) {
	real, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	bin := t.TempDir()
	deleted := filepath.Join(bin, "deleted.yaml")
	fake := `#!/usr/bin/env bash
# Records what would be deleted; the CRD is "there" so that the Tasks are deleted first.
case "$1" in
get) exit 0 ;;
delete)
  prev=""
  for a in "$@"; do
    if [[ "$prev" == "-k" ]]; then ` + real + ` kustomize "$a" >>` + deleted + `; echo --- >>` + deleted + `; fi
    if [[ "$prev" == "-f" ]]; then cat "$a" >>` + deleted + `; echo --- >>` + deleted + `; fi
    prev="$a"
  done
  exit 0 ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "undeploy")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	data, err := os.ReadFile(deleted)
	if err != nil {
		t.Fatalf("make undeploy deleted nothing: %v", err)
	}
	gone := map[string]bool{}
	for _, doc := range docSeparator.Split(string(data), -1) {
		var o object
		if strings.TrimSpace(doc) == "" || yaml.Unmarshal([]byte(doc), &o) != nil || o.Kind == "" {
			continue
		}
		gone[o.Kind+"/"+o.Metadata.Name] = true
	}
	for _, o := range render(t, "migration") {
		if clusterScoped[o.Kind] && !gone[o.Kind+"/"+o.Metadata.Name] {
			t.Errorf("`make migrate` creates %s, which `make undeploy` leaves in the cluster", o)
		}
	}
}
