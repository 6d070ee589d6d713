package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// SPDX 2.3 document, the subset written here.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string        `json:"name"`
	SPDXID           string        `json:"SPDXID"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	PrimaryPurpose   string        `json:"primaryPackagePurpose,omitempty"`
	Checksums        []spdxSum     `json:"checksums,omitempty"`
	ExternalRefs     []spdxExtRef  `json:"externalRefs,omitempty"`
	Annotations      []spdxComment `json:"annotations,omitempty"`
}

type spdxSum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxComment struct {
	Annotator string `json:"annotator"`
	Date      string `json:"annotationDate"`
	Type      string `json:"annotationType"`
	Comment   string `json:"comment"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + strings.Trim(spdxIDUnsafe.ReplaceAllString(name, "-"), "-")
}

// SBOM is an SPDX 2.3 JSON document for the binary: the main module, the Go
// standard library of the toolchain that built it, and every module linked in
// (path, version, go.sum hash, package URL), from its embedded build
// information. The document is deterministic: same binary, same bytes.
func SBOM(name, binary string, m Meta) ([]byte, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("build information of %s: %w", binary, err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bin)
	created := m.Created.UTC().Format(time.RFC3339)
	var settings []string
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	mainID := spdxID("Package", bi.Main.Path)
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              "threatview-" + name + "-" + m.Version,
		DocumentNamespace: "https://spdx.org/spdxdocs/threatview-" + name + "-" + m.Version + "-" + hex.EncodeToString(sum[:8]),
		CreationInfo: spdxCreation{
			Created:  created,
			Creators: []string{"Tool: threatview-imagebuild", "Organization: Threat View"},
		},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name:             bi.Main.Path,
		SPDXID:           mainID,
		VersionInfo:      m.Version,
		DownloadLocation: orNoAssertion(m.Source),
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  orNoAssertion(m.License),
		CopyrightText:    "NOASSERTION",
		PrimaryPurpose:   "APPLICATION",
		Checksums:        []spdxSum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
		ExternalRefs: []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl",
			Locator: "pkg:golang/" + bi.Main.Path + "@" + m.Version}},
		Annotations: []spdxComment{{Annotator: "Tool: threatview-imagebuild", Date: created, Type: "OTHER",
			Comment: "binary " + name + " (" + bi.Path + "), build settings: " + strings.Join(settings, " ")}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID})
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	stdID := spdxID("Package", "golang-stdlib")
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: "stdlib", SPDXID: stdID, VersionInfo: goVersion, DownloadLocation: "https://go.dev/dl/",
		LicenseConcluded: "NOASSERTION", LicenseDeclared: "BSD-3-Clause", CopyrightText: "NOASSERTION",
		PrimaryPurpose: "LIBRARY",
		ExternalRefs:   []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/stdlib@" + goVersion}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", stdID})
	deps := append([]*debugModule(nil), modules(bi)...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].path < deps[j].path })
	for _, d := range deps {
		id := spdxID("Package", d.path+"-"+d.version)
		p := spdxPackage{
			Name: d.path, SPDXID: id, VersionInfo: d.version,
			DownloadLocation: "NOASSERTION", LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION",
			CopyrightText: "NOASSERTION", PrimaryPurpose: "LIBRARY",
			ExternalRefs: []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl",
				Locator: "pkg:golang/" + d.path + "@" + d.version}},
		}
		if strings.HasPrefix(d.version, "v") && !strings.HasPrefix(d.path, "threatview/") {
			p.DownloadLocation = "https://proxy.golang.org/" + strings.ToLower(d.path) + "/@v/" + d.version + ".zip"
		}
		if d.sum != "" {
			p.Annotations = []spdxComment{{Annotator: "Tool: threatview-imagebuild", Date: created, Type: "OTHER",
				Comment: "go.sum hash " + d.sum}}
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type debugModule struct{ path, version, sum string }

// modules are the linked modules, a replacement taking the place of what it replaces.
func modules(bi *buildinfo.BuildInfo) []*debugModule {
	var out []*debugModule
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		out = append(out, &debugModule{path: d.Path, version: d.Version, sum: d.Sum})
	}
	return out
}

func orNoAssertion(s string) string {
	if s == "" {
		return "NOASSERTION"
	}
	return s
}
