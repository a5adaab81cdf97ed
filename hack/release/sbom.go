package main

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// spdx is the part of an SPDX 2.3 document an SBOM of a Go binary needs: the main module and
// every module linked into it, from the build information the Go toolchain embeds (what
// `go version -m` prints), so the list is what the binary holds, not what go.mod allows.
type spdx struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      spdxCreation   `json:"creationInfo"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []spdxRelation `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string       `json:"name"`
	SPDXID           string       `json:"SPDXID"`
	VersionInfo      string       `json:"versionInfo"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
}

type spdxExtRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelation struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// writeSBOM writes the SPDX document of the binary at path, built for arch, to out.
func writeSBOM(path, arch, version string, created time.Time, out string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("SBOM of %s: %w", path, err)
	}
	doc := spdx{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "task-operator " + version + " linux/" + arch,
		DocumentNamespace: "https://example.com/task-operator/spdx/" + version + "/linux-" + arch,
		CreationInfo:      spdxCreation{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Tool: task-operator hack/release", "Tool: " + info.GoVersion}},
	}
	add := func(path, ver string) string {
		id := "SPDXRef-Package-" + strings.NewReplacer("/", "-", ".", "-", "~", "-").Replace(path)
		p := spdxPackage{Name: path, SPDXID: id, VersionInfo: ver, DownloadLocation: "NOASSERTION",
			ExternalRefs: []spdxExtRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + ver}}}
		doc.Packages = append(doc.Packages, p)
		return id
	}
	root := add(info.Main.Path, version)
	doc.Relationships = append(doc.Relationships, spdxRelation{"SPDXRef-DOCUMENT", "DESCRIBES", root})
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		id := add(m.Path, m.Version)
		doc.Relationships = append(doc.Relationships, spdxRelation{root, "DEPENDS_ON", id})
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}
