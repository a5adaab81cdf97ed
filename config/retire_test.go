package config_test

import (
	"os"
	"path/filepath"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// retiredOverlay is config/default with the image of the installer and the retire-v1alpha1
// component, as a user's overlay adds it.
func retiredOverlay(t *testing.T, img imageRef) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel("default") +
		"\ncomponents:\n- " + rel("components/retire-v1alpha1") +
		"\nimages:\n- name: example.com/task-operator\n  newName: " + img.name + "\n  newTag: \"" + img.tag + "\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRetiredStageInstallsAlike: the kustomize component and the chart value for the retired
// stage of v1alpha1 render the same objects, and the CRD serves every version but v1alpha1,
// which the annotation `task-operator versions` reads names.
func TestRetiredStageInstallsAlike(t *testing.T) {
	installer := renderFile(t, "../dist/install.yaml")
	img := imageOf(t, []byte(installer.yamlOf(func(object) bool { return true })))
	kustomized := render(t, retiredOverlay(t, img))
	charted := renderChart(t, withValues(chartImage(t, img), "crds.retiredVersions", []any{"v1alpha1"}))
	sameObjects(t, without(kustomized, "Namespace"), charted)
	for name, objs := range map[string]rendered{"kustomize": kustomized, "chart": charted} {
		crd := decode[apix.CustomResourceDefinition](t, objs.find(t, "CustomResourceDefinition", "tasks.example.com"))
		if got := crd.Annotations["versions.example.com/retired"]; got != "v1alpha1" {
			t.Errorf("%s: annotation versions.example.com/retired = %q, want v1alpha1", name, got)
		}
		for _, v := range crd.Spec.Versions {
			if v.Served != (v.Name != "v1alpha1") {
				t.Errorf("%s: %s served: %t", name, v.Name, v.Served)
			}
		}
	}
}
