package config_test

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// writeOverlay writes a kustomization in a directory of its own that includes config/<base> and
// adds body, the way a user's own overlay (or Argo CD's) sits on top of ours. (Kustomize wants
// a relative path to a base.)
func writeOverlay(t *testing.T, base, body string) string {
	t.Helper()
	abs, err := filepath.Abs(base)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel + "\n" + body
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestImageOverlay sets the image the way users do, with images: in an overlay of their own,
// and checks that the one setting moves both the manager's image and the image HTTP Tasks run
// in (RUNNER_IMAGE), by tag and by digest, in both overlays.
func TestImageOverlay(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tt := range []struct{ base, images, want string }{
		{"default", "  newName: registry.example.com/team/task-operator\n  newTag: v1.0.0\n", "registry.example.com/team/task-operator:v1.0.0"},
		{"default", "  newTag: v1.2.3\n", "example.com/task-operator:v1.2.3"},
		{"default", "  newName: registry.example.com:5000/task-operator\n  digest: " + digest + "\n", "registry.example.com:5000/task-operator@" + digest},
		{"default-certmanager", "  newName: registry.example.com/team/task-operator\n  newTag: v1.0.0\n", "registry.example.com/team/task-operator:v1.0.0"},
	} {
		t.Run(tt.base+" "+tt.want, func(t *testing.T) {
			dir := writeOverlay(t, tt.base, "images:\n- name: example.com/task-operator\n"+tt.images)
			objs := render(t, dir)
			dep := decode[appsv1.Deployment](t, objs.find(t, "Deployment", deploymentName))
			c := managerContainer(t, dep)
			if c.Image != tt.want {
				t.Errorf("manager image = %q, want %q", c.Image, tt.want)
			}
			if got := envValue(c, "RUNNER_IMAGE"); got != tt.want {
				t.Errorf("RUNNER_IMAGE = %q, want %q: HTTP Tasks would pull another image than the manager's", got, tt.want)
			}
			checkOverlay(t, objs)
		})
	}
}

// TestCRDAlone: config/crd, which `make install` applies and the README's troubleshooting
// mentions, must not point conversion at a Service: alone, that Service does not exist.
func TestCRDAlone(t *testing.T) {
	objs := render(t, "crd")
	if len(objs) != 1 {
		t.Fatalf("config/crd renders %d objects, want the CRD alone", len(objs))
	}
	crd := decode[apix.CustomResourceDefinition](t, objs.find(t, "CustomResourceDefinition", crdName))
	if conv := crd.Spec.Conversion; conv != nil && conv.Strategy != apix.NoneConverter {
		t.Errorf("config/crd sets conversion %+v; only config/default may point it at the Service", conv)
	}
}

// TestLocalOverlay: what `make run` applies is config/default without what runs in the cluster,
// plus the local-only role, bound to the manager's ServiceAccount and to nothing else.
func TestLocalOverlay(t *testing.T) {
	objs := render(t, "local")
	for _, kind := range []string{"Deployment", "PodDisruptionBudget", "Service"} {
		if n := len(objs.ofKind(kind)); n != 0 {
			t.Errorf("config/local renders %d %s; the operator runs outside the cluster", n, kind)
		}
	}
	const localRole = "task-operator-local-role"
	objs.find(t, "ClusterRole", localRole)
	objs.find(t, "Role", localRole)
	objs.find(t, "Secret", webhookSecret)
	objs.find(t, "Namespace", namespace)
	def := render(t, "default")
	for _, o := range def.ofKind("ClusterRole") {
		if o.Metadata.Name == localRole {
			t.Errorf("config/default renders %s: only make run may grant it", localRole)
		}
	}
	checkRBACBindsOnlyManager(t, objs)
}
