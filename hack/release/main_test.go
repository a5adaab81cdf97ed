package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
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
	"sigs.k8s.io/yaml"

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
	platforms := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}
	for _, p := range platforms {
		if err := os.WriteFile(filepath.Join(bins, "kubectl-task-"+strings.ReplaceAll(p, "/", "-")), []byte("kubectl-task for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const repo = "registry.example.com/team/task-operator"
	const downloads = "https://example.com/task-operator/releases/download/" + version
	out := t.TempDir()
	a, err := Run(Options{Version: version, Repo: repo, Arches: arches, Binaries: bins, Revision: "abc123",
		Created: time.Unix(1700000000, 0).UTC(), Chart: "../../charts/task-operator", Out: out,
		Plugin: PluginOptions{Binaries: bins, Platforms: platforms, URL: downloads, Template: "../krew/task.yaml.tmpl"}})
	if err != nil {
		t.Fatal(err)
	}
	checkPluginRelease(t, out, platforms, downloads)

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
	var imagePlatforms []string
	for _, desc := range m.Manifests {
		imagePlatforms = append(imagePlatforms, desc.Platform.String())
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
	if !slices.Equal(imagePlatforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", imagePlatforms)
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
		regexp.MustCompile(`GOOS=darwin GOARCH=arm64 go build .*internal/version\.version=` + regexp.QuoteMeta(version) + `\b.* -o \S+/kubectl-task-darwin-arm64 ./cmd/kubectl-task`),
		regexp.MustCompile(`GOOS=linux GOARCH=amd64 go build .*internal/version\.version=` + regexp.QuoteMeta(version) + `\b.* -o \S+/kubectl-task-linux-amd64 ./cmd/kubectl-task`),
		regexp.MustCompile(`(?s)go run ./hack/release --version ` + regexp.QuoteMeta(version) + ` .*--plugin-platforms linux/amd64,linux/arm64,darwin/amd64,darwin/arm64 .*--plugin-url \S+/` + regexp.QuoteMeta(version) + ` `),
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

// checkPluginRelease: a tar.gz of kubectl-task per platform, named with the version, whose
// sha256 the checksums file and the krew manifest give; the manifest names the version and
// downloads each archive from the release's URL.
func checkPluginRelease(t *testing.T, out string, platforms []string, downloads string) {
	t.Helper()
	sums := map[string]string{} // archive name -> sha256 of its bytes
	for _, p := range platforms {
		goos, arch, _ := strings.Cut(p, "/")
		name := "kubectl-task_" + version + "_" + goos + "_" + arch + ".tar.gz"
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("no plugin archive for %s: %v", p, err)
			continue
		}
		sum := sha256.Sum256(data)
		sums[name] = hex.EncodeToString(sum[:])
		if got := archived(t, data); len(got) != 1 || got["kubectl-task"] != "kubectl-task for "+p {
			t.Errorf("%s holds %v, want kubectl-task alone, the %s binary", name, got, p)
		}
	}
	var listed []string
	for line := range strings.Lines(readFile(t, filepath.Join(out, "kubectl-task_"+version+"_checksums.txt"))) {
		sum, name, _ := strings.Cut(strings.TrimSpace(line), "  ")
		listed = append(listed, name)
		if sums[name] != sum {
			t.Errorf("checksums file: %s %s, the archive's sha256 is %s", sum, name, sums[name])
		}
	}
	if len(listed) != len(platforms) {
		t.Errorf("checksums file lists %v, want the %d archives", listed, len(platforms))
	}

	var plugin struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			Version   string
			Platforms []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, SHA256, Bin string
				Files            []struct{ From, To string }
			}
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(out, "plugins", "task.yaml"))), &plugin); err != nil {
		t.Fatalf("plugins/task.yaml: %v", err)
	}
	if plugin.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || plugin.Kind != "Plugin" || plugin.Metadata.Name != "task" || plugin.Spec.Version != version {
		t.Errorf("krew manifest %s %s %q at version %q, want a Plugin task at %s", plugin.APIVersion, plugin.Kind, plugin.Metadata.Name, plugin.Spec.Version, version)
	}
	if len(plugin.Spec.Platforms) != len(platforms) {
		t.Fatalf("krew manifest has %d platforms, want %d", len(plugin.Spec.Platforms), len(platforms))
	}
	for i, pl := range plugin.Spec.Platforms {
		labels := pl.Selector.MatchLabels
		name := "kubectl-task_" + version + "_" + labels["os"] + "_" + labels["arch"] + ".tar.gz"
		if labels["os"]+"/"+labels["arch"] != platforms[i] || pl.URI != downloads+"/"+name || pl.SHA256 != sums[name] || sums[name] == "" {
			t.Errorf("krew platform %v: uri %s, sha256 %s; want %s, %s/%s and %s", labels, pl.URI, pl.SHA256, platforms[i], downloads, name, sums[name])
		}
		if pl.Bin != "kubectl-task" || len(pl.Files) != 1 || pl.Files[0].From != "kubectl-task" {
			t.Errorf("krew platform %v installs %q from %v", labels, pl.Bin, pl.Files)
		}
	}
}

// archived is the files of a tar.gz, by name, with their contents; a file that is not a
// regular one of mode 0755 fails the test.
func archived(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 {
			t.Errorf("archive entry %s: type %c, mode %o; want a regular file, 0755", hdr.Name, hdr.Typeflag, hdr.Mode)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(body)
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
