package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	"example.com/task-operator/internal/image"
)

const version = "v1.2.3-rc.1"

// TestReleaseArtifactsNameTheVersion: the image layout holds one image index with an image
// per architecture, tagged and labelled with the version, and the packaged chart has the
// version, installs that image and says so to Artifact Hub. The binaries are stand-ins: what
// is checked is the packaging, not what runs (make release builds the real ones).
func TestReleaseArtifactsNameTheVersion(t *testing.T) {
	bins := t.TempDir()
	arches := []string{"amd64", "arm64"}
	self, err := os.Executable() // a Go binary with build information, as the SBOM needs
	if err != nil {
		t.Fatal(err)
	}
	binary, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range arches {
		if err := os.WriteFile(filepath.Join(bins, "task-operator-linux-"+arch), binary, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const repo = "registry.example.com/team/task-operator"
	out := t.TempDir()
	a, err := Run(Options{Version: version, Repo: repo, Arches: arches, Binaries: bins, Revision: "abc123",
		Created: time.Unix(1700000000, 0).UTC(), Chart: "../../charts/task-operator", Out: out})
	if err != nil {
		t.Fatal(err)
	}

	idx, ref, err := image.ReadIndexLayout(a.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if ref != repo+":"+version {
		t.Errorf("layout tag %q, want %s:%s", ref, repo, version)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
			t.Errorf("%s image labelled version %q, want %s", desc.Platform, got, version)
		}
		if desc.Platform.Architecture != cfg.Architecture {
			t.Errorf("index says %s, the image's config %s", desc.Platform, cfg.Architecture)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	if d, _ := idx.Digest(); d.String() != a.Digest || !strings.Contains(readFile(t, filepath.Join(out, "image.txt")), "@"+a.Digest) {
		t.Errorf("image.txt does not name the index digest %s", a.Digest)
	}

	for _, arch := range arches {
		var sbom struct {
			SPDXVersion string
			Name        string
			Packages    []struct{ Name, VersionInfo string }
		}
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "sbom-linux-"+arch+".spdx.json"))), &sbom); err != nil {
			t.Fatal(err)
		}
		if sbom.SPDXVersion != "SPDX-2.3" || !strings.Contains(sbom.Name, version) || len(sbom.Packages) < 2 || sbom.Packages[0].VersionInfo != version {
			t.Errorf("SBOM for %s: %s, %s, %d packages, the first %+v", arch, sbom.SPDXVersion, sbom.Name, len(sbom.Packages), sbom.Packages[0])
		}
		if !slices.ContainsFunc(sbom.Packages, func(p struct{ Name, VersionInfo string }) bool { return p.Name == "helm.sh/helm/v4" }) {
			t.Errorf("SBOM for %s does not list the modules linked in (helm.sh/helm/v4)", arch)
		}
	}

	if filepath.Base(a.Chart) != "task-operator-1.2.3-rc.1.tgz" {
		t.Errorf("chart packaged as %s", a.Chart)
	}
	ch, err := loader.Load(a.Chart)
	if err != nil {
		t.Fatal(err)
	}
	md := ch.Metadata
	if md.Version != "1.2.3-rc.1" || md.AppVersion != version {
		t.Errorf("chart version %q, appVersion %q; want 1.2.3-rc.1 and %s", md.Version, md.AppVersion, version)
	}
	if !strings.Contains(md.Annotations["artifacthub.io/images"], repo+":"+version) || md.Annotations["artifacthub.io/prerelease"] != "true" {
		t.Errorf("Artifact Hub annotations: images %q, prerelease %q", md.Annotations["artifacthub.io/images"], md.Annotations["artifacthub.io/prerelease"])
	}
	vals, err := chartutil.ToRenderValues(ch, nil, common.ReleaseOptions{Name: "task-operator", Namespace: "task-operator-system", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	if dep := files["task-operator/templates/manager.yaml"]; !strings.Contains(dep, "image: "+repo+":"+version+"\n") {
		t.Errorf("the packaged chart does not install %s:%s:\n%s", repo, version, dep)
	}
}

func TestReleaseRefusesAVersionThatIsNotSemver(t *testing.T) {
	for _, v := range []string{"", "1.2.3", "v1.2", "latest", "v1.2.3+build"} {
		if _, err := Run(Options{Version: v, Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--version") {
			t.Errorf("version %q: err %v, want one naming --version", v, err)
		}
	}
}

// TestMakeReleasePinsTheVersion: `make release` builds each architecture's binary with the
// version, packages with it, and renders dist/install.yaml with the image of that version.
// The Makefile's commands are read with make -n (nothing is built); build-installer is run for
// real into a folder of the test's own.
func TestMakeReleasePinsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make and kubectl")
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-n", "release", "VERSION="+version, "DIST="+dist)
	cmd.Dir = "../.."
	plan, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n release: %v\n%s", err, plan)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`GOARCH=amd64 go build .*internal/version\.version=` + regexp.QuoteMeta(version) + `\b`),
		regexp.MustCompile(`GOARCH=arm64 go build .*internal/version\.version=` + regexp.QuoteMeta(version) + `\b`),
		regexp.MustCompile(`(?s)go run ./hack/release --version ` + regexp.QuoteMeta(version) + ` .*--arch amd64,arm64 `),
		regexp.MustCompile(`kubectl kustomize .* > ` + regexp.QuoteMeta(dist) + `/install.yaml`),
	} {
		if !want.Match(plan) {
			t.Errorf("make release does not run %s:\n%s", want, plan)
		}
	}

	cmd = exec.Command("make", "build-installer", "IMG=example.com/task-operator:"+version, "DIST="+dist)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	for _, f := range []string{"install.yaml", "migration.yaml"} {
		images := regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(readFile(t, filepath.Join(dist, f)), -1)
		if len(images) == 0 {
			t.Errorf("%s names no image", f)
		}
		for _, m := range images {
			if m[1] != "example.com/task-operator:"+version {
				t.Errorf("%s runs %s, want example.com/task-operator:%s", f, m[1], version)
			}
		}
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
