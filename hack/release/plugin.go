package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// PluginOptions are the inputs of the kubectl plugin's release: its binaries, one per
// platform, and where the archives will be downloaded from.
type PluginOptions struct {
	Binaries  string   // folder of kubectl-task-<os>-<arch>
	Platforms []string // os/arch
	URL       string   // the folder URL the archives are published at
	Template  string   // the krew manifest's template
}

// PluginArchive is one platform's archive.
type PluginArchive struct {
	OS, Arch string
	Path     string // in the release folder
	URI      string // where krew downloads it
	SHA256   string
}

// pluginArchiveName is kubectl-task_vX.Y.Z_os_arch.tar.gz.
func pluginArchiveName(version, os, arch string) string {
	return fmt.Sprintf("kubectl-task_%s_%s_%s.tar.gz", version, os, arch)
}

// writePlugin writes a tar.gz of each platform's kubectl-task, their sha256 sums
// (kubectl-task_vX.Y.Z_checksums.txt, as sha256sum -c reads them) and the krew manifest
// plugins/task.yaml, all into out.
func writePlugin(o PluginOptions, version string, created time.Time, out string) ([]PluginArchive, error) {
	var archives []PluginArchive
	var sums strings.Builder
	for _, p := range o.Platforms {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || arch == "" {
			return nil, fmt.Errorf("--plugin-platforms: %q is not os/arch", p)
		}
		name := pluginArchiveName(version, goos, arch)
		a := PluginArchive{OS: goos, Arch: arch, Path: filepath.Join(out, name), URI: strings.TrimSuffix(o.URL, "/") + "/" + name}
		sum, err := writeArchive(filepath.Join(o.Binaries, "kubectl-task-"+goos+"-"+arch), a.Path, created)
		if err != nil {
			return nil, fmt.Errorf("kubectl-task for %s: %w", p, err)
		}
		a.SHA256 = sum
		fmt.Fprintf(&sums, "%s  %s\n", sum, name)
		archives = append(archives, a)
	}
	if err := os.WriteFile(filepath.Join(out, "kubectl-task_"+version+"_checksums.txt"), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return archives, writeKrewManifest(o.Template, version, archives, filepath.Join(out, "plugins", "task.yaml"))
}

// writeArchive packs binary as kubectl-task (mode 0755, the release's time, no owner: the
// archive is reproducible) into a tar.gz at path and returns its sha256.
func writeArchive(binary, path string, created time.Time) (string, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: "kubectl-task", Mode: 0o755, Size: int64(len(data)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// writeKrewManifest renders the template with the version and the archives.
func writeKrewManifest(tmplPath, version string, archives []PluginArchive, path string) error {
	raw, err := os.ReadFile(tmplPath)
	if err != nil {
		return fmt.Errorf("krew manifest template: %w", err)
	}
	tmpl, err := template.New(filepath.Base(tmplPath)).Option("missingkey=error").Parse(string(raw))
	if err != nil {
		return fmt.Errorf("krew manifest template %s: %w", tmplPath, err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, struct {
		Version   string
		Platforms []PluginArchive
	}{version, archives}); err != nil {
		return fmt.Errorf("krew manifest template %s: %w", tmplPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
