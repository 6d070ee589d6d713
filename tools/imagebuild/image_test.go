package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

var testMeta = Meta{Version: "1.2.3", Revision: "0123abcd", Source: "https://example.invalid/threatview", License: "NOASSERTION",
	Created: time.Unix(1700000000, 0).UTC()}

// fakeBase is a small base tree: a CA bundle and a zoneinfo directory with a
// file, a symlink and the "right" and "posix" trees that must be left out.
func fakeBase(t *testing.T) (certs, zoneinfo string) {
	t.Helper()
	dir := t.TempDir()
	certs = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zoneinfo = filepath.Join(dir, "zoneinfo")
	for _, d := range []string{"Etc", "Europe", "right/Etc", "posix/Etc"} {
		if err := os.MkdirAll(filepath.Join(zoneinfo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"Etc/UTC", "Europe/Paris", "right/Etc/UTC", "posix/Etc/UTC"} {
		if err := os.WriteFile(filepath.Join(zoneinfo, f), []byte("TZif2"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("Etc/UTC", filepath.Join(zoneinfo, "UTC")); err != nil {
		t.Fatal(err)
	}
	return certs, zoneinfo
}

type tarEntry struct {
	name     string
	typeflag byte
	mode     int64
	uid      int
	mtime    time.Time
	link     string
	data     string
}

func readTar(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	tr := tar.NewReader(r)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.ModTime, h.Linkname, string(b)})
	}
}

func TestLayerTarIsSortedWithParentsAndFixedTimes(t *testing.T) {
	mtime := time.Unix(1234567890, 0)
	files := []File{
		{Path: "/usr/local/bin/app", Mode: 0o555, Data: []byte("bin")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("p")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/etc/localtime", Mode: 0o777, Symlink: "../usr/share/zoneinfo/UTC"},
	}
	a, err := LayerTar(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(files)
	b, err := LayerTar(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same files in another order gave different tar bytes")
	}
	entries := readTar(t, bytes.NewReader(a))
	var names []string
	for _, e := range entries {
		names = append(names, e.name)
		if !e.mtime.Equal(mtime) {
			t.Errorf("%s: mtime %v, want %v", e.name, e.mtime, mtime)
		}
	}
	want := []string{"etc/", "etc/localtime", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/app"}
	if !slices.Equal(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	if e := entries[1]; e.typeflag != tar.TypeSymlink || e.link != "../usr/share/zoneinfo/UTC" {
		t.Errorf("symlink entry = %+v", e)
	}
	if e := entries[3]; e.mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", e.mode)
	}
	if _, err := LayerTar([]File{{Path: "/a", Data: []byte("x")}, {Path: "a", Data: []byte("y")}}, mtime); err == nil {
		t.Error("a path listed twice was accepted")
	}
}

func TestBaseFilesLeavesOutDuplicateZoneTrees(t *testing.T) {
	certs, zoneinfo := fakeBase(t)
	files, err := BaseFiles(certs, zoneinfo)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		got[f.Path] = f
	}
	for _, p := range []string{CACertsPath, "/etc/passwd", "/etc/group", "/tmp", "/usr/share/zoneinfo/Etc/UTC", "/usr/share/zoneinfo/Europe/Paris"} {
		if _, ok := got[p]; !ok {
			t.Errorf("base has no %s", p)
		}
	}
	if l := got["/usr/share/zoneinfo/UTC"]; l.Symlink != "Etc/UTC" {
		t.Errorf("zoneinfo/UTC = %+v, want a symlink to Etc/UTC", l)
	}
	for p := range got {
		if strings.Contains(p, "/right") || strings.Contains(p, "/posix") {
			t.Errorf("base holds %s", p)
		}
		if strings.HasSuffix(p, "/sh") || strings.HasSuffix(p, "/bash") {
			t.Errorf("base holds a shell: %s", p)
		}
	}
	if !strings.Contains(string(got["/etc/passwd"].Data), "nonroot:x:65532:65532:") {
		t.Errorf("passwd has no nonroot user: %q", got["/etc/passwd"].Data)
	}
	if _, err := BaseFiles(filepath.Join(t.TempDir(), "missing.crt"), zoneinfo); err == nil || !strings.Contains(err.Error(), "ca-certificates") {
		t.Errorf("a missing CA bundle gave %v, want an error naming ca-certificates", err)
	}
}

// testBinary is a real Go binary with build information: this test binary.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestIndexIsReproducibleAndRunsAsNonroot(t *testing.T) {
	certs, zoneinfo := fakeBase(t)
	base, err := BaseFiles(certs, zoneinfo)
	if err != nil {
		t.Fatal(err)
	}
	bin := testBinary(t)
	bins := map[string]string{"linux/amd64": bin, "linux/arm64": bin}
	idx1, sbom1, err := NewIndex("demo", bins, base, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	idx2, sbom2, err := NewIndex("demo", bins, base, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx1.Digest()
	d2, _ := idx2.Digest()
	if d1 != d2 {
		t.Fatalf("two builds of the same input: digests %s and %s", d1, d2)
	}
	if !bytes.Equal(sbom1, sbom2) {
		t.Fatal("two SBOMs of the same binary differ")
	}
	later := testMeta
	later.Revision = "fedc"
	idx3, _, err := NewIndex("demo", bins, base, later)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := idx3.Digest(); d3 == d1 {
		t.Fatal("another revision gave the same digest")
	}

	im, err := idx1.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || len(im.Manifests) != 2 {
		t.Fatalf("index: %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	if im.Annotations["org.opencontainers.image.revision"] != "0123abcd" {
		t.Errorf("index annotations %v", im.Annotations)
	}
	var archs []string
	for _, desc := range im.Manifests {
		archs = append(archs, desc.Platform.Architecture)
		img, err := idx1.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, "demo", desc.Platform.Architecture)
	}
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v", archs)
	}
}

func checkImage(t *testing.T, img v1.Image, name, arch string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("config user %q os %q arch %q", cf.Config.User, cf.OS, cf.Architecture)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/" + name}) {
		t.Errorf("entrypoint %q", cf.Config.Entrypoint)
	}
	for _, k := range []string{"source", "revision", "version", "licenses", "created", "title"} {
		if cf.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("label org.opencontainers.image.%s missing", k)
		}
	}
	if !cf.Created.Time.Equal(testMeta.Created) {
		t.Errorf("created %v", cf.Created)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("manifest %s, config %s", m.MediaType, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Errorf("layer media type %s", l.MediaType)
		}
	}
	fsys := map[string]tarEntry{}
	rc := mutate.Extract(img)
	defer rc.Close()
	for _, e := range readTar(t, rc) {
		fsys[e.name] = e
	}
	bin, ok := fsys["usr/local/bin/"+name]
	if !ok || bin.mode != 0o555 || bin.uid != 0 {
		t.Errorf("binary entry %+v", bin)
	}
	if _, ok := fsys["usr/share/doc/threatview/"+name+".spdx.json"]; !ok {
		t.Error("no SBOM in the image")
	}
	for p := range fsys {
		if strings.HasPrefix(p, "bin/") || strings.HasSuffix(p, "/sh") {
			t.Errorf("image holds %s", p)
		}
	}
}

func TestSBOMListsTheLinkedModules(t *testing.T) {
	b, err := SBOM("demo", testBinary(t), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name         string `json:"name"`
			VersionInfo  string `json:"versionInfo"`
			ExternalRefs []struct {
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
		Relationships []struct {
			Type string `json:"relationshipType"`
		} `json:"relationships"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	found := map[string]string{}
	for _, p := range doc.Packages {
		found[p.Name] = p.VersionInfo
	}
	if v := found["github.com/google/go-containerregistry"]; v != "v0.22.1" {
		t.Errorf("go-containerregistry version in SBOM = %q, want v0.22.1", v)
	}
	if v := found["stdlib"]; v != strings.TrimPrefix(runtime.Version(), "go") {
		t.Errorf("stdlib version %q, want %s", v, runtime.Version())
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages (want DESCRIBES plus one DEPENDS_ON each)", len(doc.Relationships), len(doc.Packages))
	}
}

func TestCommandsFollowTheCmdDirectories(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("services/a/cmd/alpha/main.go", "package main\n\nfunc main() {}\n")
	write("services/b/cmd/beta/main.go", "// Command beta.\npackage main\n")
	write("services/b/cmd/geoipgen/main.go", "package main\n")
	write("services/c/cmd/notyet/doc.go", "package notyet\n")
	write("services/c/cmd/empty/.keep", "")
	write("migrations/cmd/migrate/main.go", "package main\n")
	write("deploy/smoketest/cmd/smoketest/main.go", "package main\n")
	cmds, err := Commands(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, c.Name+"="+c.Dir)
	}
	want := []string{"alpha=services/a/cmd/alpha", "beta=services/b/cmd/beta", "migrate=migrations/cmd/migrate", "smoketest=deploy/smoketest/cmd/smoketest"}
	if !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	write("services/d/cmd/alpha/main.go", "package main\n")
	if _, err := Commands(root); err == nil {
		t.Error("two commands named alpha were accepted")
	}
}

func TestWriteArchiveIsAReadableLayout(t *testing.T) {
	certs, zoneinfo := fakeBase(t)
	base, err := BaseFiles(certs, zoneinfo)
	if err != nil {
		t.Fatal(err)
	}
	idx, _, err := NewIndex("demo", map[string]string{"linux/amd64": testBinary(t)}, base, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.oci.tar"), filepath.Join(dir, "b.oci.tar")
	for _, f := range []string{a, b} {
		if err := WriteArchive(f, idx, "1.2.3", testMeta.Created); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("two archives of one index differ")
	}
	unpacked := t.TempDir()
	if err := Untar(a, unpacked); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if len(om.Manifests) != 1 || om.Manifests[0].Digest != want || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.2.3" {
		t.Fatalf("index.json %+v, want one entry %s tagged 1.2.3", om.Manifests, want)
	}
}

func TestPushWritesTheIndexToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	certs, zoneinfo := fakeBase(t)
	base, err := BaseFiles(certs, zoneinfo)
	if err != nil {
		t.Fatal(err)
	}
	bin := testBinary(t)
	idx, sbom, err := NewIndex("demo", map[string]string{"linux/amd64": bin, "linux/arm64": bin}, base, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, err := Push(context.Background(), host+"/threatview/", "demo", "1.2.3", idx, sbom)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if ref != host+"/threatview/demo@"+want.String() {
		t.Errorf("pushed %s, want %s/threatview/demo@%s", ref, host, want)
	}
	tag, err := name.ParseReference(host + "/threatview/demo:1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("the registry's index %s, want %s", d, want)
	}
	if _, err := PushRef("Not A Registry!", "demo", "1.2.3"); err == nil {
		t.Error("an invalid PUSH prefix was accepted")
	}
}
