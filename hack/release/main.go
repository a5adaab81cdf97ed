// Command release assembles a release's artifacts from binaries built for each architecture
// (`make release` builds them): the multi-architecture image as an OCI layout, without a Docker
// engine, an SPDX SBOM of each architecture's binary (its Go modules), and the Helm chart
// packaged with the release's version, and the kubectl plugin's archives per platform with
// their sha256 sums and krew manifest (plugin.go). `make release` also writes
// dist/install.yaml with the release's image.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/internal/image"
)

// Options are the release's inputs.
type Options struct {
	Version  string   // vX.Y.Z[-pre]
	Repo     string   // the image's name without a tag
	Arches   []string // linux architectures
	Binaries string   // folder of task-operator-linux-<arch>
	Revision string
	Source   string
	Created  time.Time
	Chart    string // the chart's folder
	Out      string // where the artifacts go
	Plugin   PluginOptions
}

// Artifacts are what Run wrote.
type Artifacts struct {
	Layout string // OCI layout of the image index
	Ref    string // repo:version
	Digest string // of the image index
	Chart  string // the packaged chart
	Plugin []PluginArchive
}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	var o Options
	var arches, pluginPlatforms string
	flag.StringVar(&o.Version, "version", "", "the release, vX.Y.Z (required)")
	flag.StringVar(&o.Repo, "repo", "example.com/task-operator", "image name without a tag")
	flag.StringVar(&arches, "arch", "amd64,arm64", "linux architectures, comma-separated")
	flag.StringVar(&o.Binaries, "binaries", "bin/image", "folder of task-operator-linux-<arch>")
	flag.StringVar(&o.Revision, "revision", "", "revision label (commit)")
	flag.StringVar(&o.Source, "source", "", "source label (repository URL)")
	flag.StringVar(&o.Chart, "chart", "charts/task-operator", "the chart's folder")
	flag.StringVar(&o.Out, "out", "", "output folder (required)")
	flag.StringVar(&o.Plugin.Binaries, "plugin-binaries", "", "folder of kubectl-task-<os>-<arch>; empty: no plugin archives")
	flag.StringVar(&pluginPlatforms, "plugin-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "the plugin's platforms, os/arch comma-separated")
	flag.StringVar(&o.Plugin.URL, "plugin-url", "", "URL of the folder the plugin archives are published at (the krew manifest's uri)")
	flag.StringVar(&o.Plugin.Template, "krew-template", "hack/krew/task.yaml.tmpl", "the krew manifest's template")
	flag.Parse()
	o.Arches = strings.Split(arches, ",")
	o.Plugin.Platforms = strings.Split(pluginPlatforms, ",")
	created, err := sourceDateEpoch()
	if err == nil {
		o.Created = created
		var a Artifacts
		if a, err = Run(o); err == nil {
			fmt.Printf("image %s (%s) %s: OCI layout %s\nchart %s\n", a.Ref, strings.Join(o.Arches, ", "), a.Digest, a.Layout, a.Chart)
			for _, p := range a.Plugin {
				fmt.Printf("kubectl-task %s/%s: %s sha256 %s\n", p.OS, p.Arch, p.Path, p.SHA256)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// Run writes the release's image layout and packaged chart into o.Out.
func Run(o Options) (Artifacts, error) {
	if !semver.MatchString(o.Version) {
		return Artifacts{}, fmt.Errorf("--version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", o.Version)
	}
	if o.Out == "" {
		return Artifacts{}, fmt.Errorf("--out is required")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Artifacts{}, err
	}
	a := Artifacts{Ref: o.Repo + ":" + o.Version, Layout: filepath.Join(o.Out, "image")}
	var imgs []v1.Image
	for _, arch := range o.Arches {
		img, err := image.Build(image.Options{
			Binary: filepath.Join(o.Binaries, "task-operator-linux-"+arch), OS: "linux", Arch: arch,
			Version: o.Version, Revision: o.Revision, Source: o.Source, Created: o.Created,
		})
		if err != nil {
			return a, fmt.Errorf("image for %s: %w", arch, err)
		}
		imgs = append(imgs, img)
		bin := filepath.Join(o.Binaries, "task-operator-linux-"+arch)
		if err := writeSBOM(bin, arch, o.Version, o.Created, filepath.Join(o.Out, "sbom-linux-"+arch+".spdx.json")); err != nil {
			return a, err
		}
	}
	idx, err := image.Index(imgs...)
	if err != nil {
		return a, err
	}
	d, err := idx.Digest()
	if err != nil {
		return a, err
	}
	a.Digest = d.String()
	if err := image.WriteIndexLayout(idx, a.Layout, a.Ref); err != nil {
		return a, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "image.txt"), []byte(o.Repo+":"+o.Version+"@"+a.Digest+"\n"), 0o644); err != nil {
		return a, err
	}
	if a.Chart, err = packageChart(o); err != nil {
		return a, err
	}
	if o.Plugin.Binaries != "" {
		if o.Plugin.URL == "" {
			return a, fmt.Errorf("--plugin-url is required with --plugin-binaries (the krew manifest's uri)")
		}
		a.Plugin, err = writePlugin(o.Plugin, o.Version, o.Created, o.Out)
	}
	return a, err
}

// packageChart writes the chart with version X.Y.Z and appVersion vX.Y.Z (the image tag it
// installs by default), and Artifact Hub's image list and pre-release flag to match.
func packageChart(o Options) (string, error) {
	ch, err := loader.Load(o.Chart)
	if err != nil {
		return "", fmt.Errorf("load chart %s: %w", o.Chart, err)
	}
	ch.Metadata.Version = strings.TrimPrefix(o.Version, "v")
	ch.Metadata.AppVersion = o.Version
	images, err := yaml.Marshal([]map[string]string{{"name": "task-operator", "image": o.Repo + ":" + o.Version}})
	if err != nil {
		return "", err
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	ch.Metadata.Annotations["artifacthub.io/images"] = string(images)
	ch.Metadata.Annotations["artifacthub.io/prerelease"] = fmt.Sprint(strings.Contains(o.Version, "-"))
	if err := setRepository(ch.Raw, o.Repo); err != nil {
		return "", err
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s: %w", o.Chart, err)
	}
	path, err := chartutil.Save(ch, o.Out)
	if err != nil {
		return "", fmt.Errorf("package chart: %w", err)
	}
	return path, nil
}

// defaultRepoLine is values.yaml's image.repository, which a release to another registry
// replaces (the values file is packaged as written, comments and all).
const defaultRepoLine = "\n  repository: example.com/task-operator\n"

func setRepository(raw []*common.File, repo string) error {
	for _, f := range raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if !bytes.Contains(f.Data, []byte(defaultRepoLine)) {
			return fmt.Errorf("values.yaml has no line %q to set the image's repository in", strings.TrimSpace(defaultRepoLine))
		}
		f.Data = bytes.Replace(f.Data, []byte(defaultRepoLine), []byte("\n  repository: "+repo+"\n"), 1)
		return nil
	}
	return fmt.Errorf("the chart has no values.yaml")
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (the Makefile sets the commit time), else the Unix
// epoch: a fixed time keeps the digests reproducible.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscan(s, &sec); err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
