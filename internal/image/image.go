// Package image assembles the operator's container image without a Docker engine, with
// go-containerregistry (the library ko is built on): a static binary on a minimal base layer
// that this package writes itself — /etc/passwd and /etc/group with the nonroot user 65532, the
// CA certificates HTTP Tasks need to call https URLs (Mozilla's roots, as
// golang.org/x/crypto/x509roots/fallback ships them, so every build holds the same bytes), and
// /tmp. No base image is pulled: the build works offline and is reproducible.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// What the image promises; tests read it back.
const (
	Entrypoint = "/task-operator"
	User       = "65532:65532"
	CAFile     = "/etc/ssl/certs/ca-certificates.crt"
	// RefNameAnnotation tags an image in an OCI layout's index.
	RefNameAnnotation = "org.opencontainers.image.ref.name"
)

// Options describe one image.
type Options struct {
	// Binary is the statically linked task-operator for OS/Arch.
	Binary string
	OS     string // default linux
	Arch   string // default amd64
	// Version and Revision become the OCI labels; Created the image's creation time (keep it
	// fixed, e.g. the commit time, for reproducible digests).
	Version  string
	Revision string
	Source   string
	Created  time.Time
}

// Build assembles the image.
func Build(o Options) (v1.Image, error) {
	if o.OS == "" {
		o.OS = "linux"
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	base, err := baseLayer(o.Created)
	if err != nil {
		return nil, err
	}
	app, err := layerOf(o.Created, file{Entrypoint, 0o755, binary})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = o.OS, o.Arch
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=" + CAFile},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "task-operator",
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.source":   o.Source,
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

type file struct {
	path string
	mode int64
	data []byte // nil for a directory
}

func baseLayer(created time.Time) (v1.Layer, error) {
	cas, err := caBundle()
	if err != nil {
		return nil, err
	}
	return layerOf(created,
		file{"/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		file{"/etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		file{CAFile, 0o644, cas},
		file{"/home/nonroot", 0o700, nil},
		file{"/tmp", 0o1777, nil},
	)
}

// caBundle is Mozilla's root store as PEM. Roots with a distrust-after date are left out: a PEM
// bundle cannot carry that constraint.
func caBundle() ([]byte, error) {
	var b bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, fmt.Errorf("encode CA certificate: %w", err)
		}
	}
	return b.Bytes(), nil
}

// layerOf writes the files into one gzipped tar layer, parent directories first, owned by
// root except the nonroot user's home.
func layerOf(created time.Time, files ...file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		if err := writeParents(tw, f.path, created, dirs); err != nil {
			return nil, err
		}
		if err := writeEntry(tw, f, created); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func writeParents(tw *tar.Writer, path string, created time.Time, done map[string]bool) error {
	for i := 1; i < len(path); i++ {
		if path[i] != '/' || done[path[:i]] {
			continue
		}
		done[path[:i]] = true
		if err := writeEntry(tw, file{path[:i], 0o755, nil}, created); err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(tw *tar.Writer, f file, created time.Time) error {
	h := &tar.Header{Name: f.path[1:], Mode: f.mode, ModTime: created, Format: tar.FormatPAX}
	if f.path == "/home/nonroot" {
		h.Uid, h.Gid = 65532, 65532
	}
	if f.data == nil {
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
	} else {
		h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if _, err := tw.Write(f.data); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// WriteLayout writes img into an OCI image layout at dir (replacing one there), tagged ref.
func WriteLayout(img v1.Image, dir, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("create layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref})); err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout reads the one image of the OCI layout at dir.
func ReadLayout(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("read layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("read layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("layout %s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("read image of %s: %w", dir, err)
	}
	return img, m.Manifests[0].Annotations[RefNameAnnotation], nil
}

// WriteTarball writes img as a tarball that `docker load` (or `podman load`, `kind load
// image-archive`) reads, tagged ref.
func WriteTarball(img v1.Image, path, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Push uploads img to ref's registry with the credentials of ~/.docker/config.json (or a
// credential helper), as docker push would.
func Push(ctx context.Context, img v1.Image, ref string, opts ...name.Option) (name.Digest, error) {
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// CompressedSize is what a pull transfers: the config and the compressed layers.
func CompressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, fmt.Errorf("read manifest: %w", err)
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
