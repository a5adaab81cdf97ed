package image

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index makes one multi-platform image of images (one per OS/architecture, as Build makes
// them): an OCI image index whose entries carry each image's platform, so that a pull picks
// the node's.
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		p := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture}
		if seen[p.String()] {
			return nil, fmt.Errorf("two images for %s", p)
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	if len(adds) == 0 {
		return nil, fmt.Errorf("no image to index")
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// WriteIndexLayout writes idx into an OCI image layout at dir (replacing one there), tagged
// ref: `skopeo copy oci:DIR:REF docker://...` or `crane push` pushes every platform at once.
func WriteIndexLayout(idx v1.ImageIndex, dir, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("create layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref})); err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return nil
}

// ReadIndexLayout reads the one image index of the OCI layout at dir, and its ref.
func ReadIndexLayout(dir string) (v1.ImageIndex, string, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("read layout %s: %w", dir, err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("read layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, "", fmt.Errorf("layout %s holds %d manifests, want one image index", dir, len(m.Manifests))
	}
	idx, err := root.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("read index of %s: %w", dir, err)
	}
	return idx, m.Manifests[0].Annotations[RefNameAnnotation], nil
}
