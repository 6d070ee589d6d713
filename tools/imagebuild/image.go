package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID and GID every image runs as (distroless's "nonroot").
const (
	UID = 65532
	GID = 65532
)

// Paths inside every image.
const (
	BinDir      = "/usr/local/bin"
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	ZoneInfoDir = "/usr/share/zoneinfo"
	SBOMDir     = "/usr/share/doc/threatview"
)

// Meta is what every image of one build shares.
type Meta struct {
	Version  string
	Revision string
	Source   string
	License  string
	Created  time.Time // every file time and the image's creation time
}

// File is one entry of a layer. Dirs are implied by paths unless listed.
type File struct {
	Path     string // absolute, slash-separated
	Mode     int64  // permission bits
	Dir      bool
	Symlink  string // target, for a symbolic link
	Data     []byte
	UID, GID int
}

// BaseFiles is the base layer: the CA bundle, the time zone database (without
// the duplicate "right" and "posix" trees), passwd and group files naming the
// non-root user, and a world-writable /tmp. No shell, no package manager.
func BaseFiles(caCerts, zoneinfo string) ([]File, error) {
	certs, err := os.ReadFile(caCerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w (install Debian's ca-certificates)", err)
	}
	if !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caCerts)
	}
	files := []File{
		{Path: CACertsPath, Mode: 0o644, Data: certs},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true, UID: UID, GID: GID},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
	}
	n := 0
	err = filepath.WalkDir(zoneinfo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(zoneinfo, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == "right" || rel == "posix") {
			return filepath.SkipDir
		}
		dst := path.Join(ZoneInfoDir, rel)
		switch {
		case d.IsDir():
			files = append(files, File{Path: dst, Mode: 0o755, Dir: true})
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if strings.HasPrefix(t, "posix/") || strings.HasPrefix(t, "right/") || strings.Contains(t, "/posix/") {
				return nil // into a skipped tree
			}
			files = append(files, File{Path: dst, Mode: 0o777, Symlink: t})
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: dst, Mode: 0o644, Data: b})
			n++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("time zone data: %w (install Debian's tzdata)", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("no time zone files under %s", zoneinfo)
	}
	return files, nil
}

// LayerTar writes files as a tar with every parent directory, sorted by path,
// owned by root unless stated, all times set to mtime: the same files give the
// same bytes.
func LayerTar(files []File, mtime time.Time) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		f.Path = p
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("layer: %s listed twice", p)
		}
		byPath[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Mode: 0o755, Dir: true}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case f.Symlink != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.Symlink
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func layerFrom(files []File, mtime time.Time) (v1.Layer, error) {
	b, err := LayerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Labels are the OCI annotations and config labels of an image.
func Labels(name string, m Meta) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "threatview-" + name,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.licenses": m.License,
		"org.opencontainers.image.created":  m.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.vendor":   "Threat View",
	}
}

// NewImage is one platform's image: the base layer, then the binary and its
// SBOM, running as UID 65532 with the binary as entrypoint.
func NewImage(name, platform, binary string, base []File, sbom []byte, m Meta) (v1.Image, error) {
	goos, arch, _ := strings.Cut(platform, "/")
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	baseLayer, err := layerFrom(base, m.Created)
	if err != nil {
		return nil, err
	}
	appLayer, err := layerFrom([]File{
		{Path: path.Join(BinDir, name), Mode: 0o555, Data: bin},
		{Path: path.Join(SBOMDir, name+".spdx.json"), Mode: 0o444, Data: sbom},
	}, m.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "imagebuild: CA certificates, time zone data, nonroot user", Comment: "base"}},
		mutate.Addendum{Layer: appLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "imagebuild: go build -trimpath (CGO_ENABLED=0) ./" + name, Comment: "binary and SBOM"}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	labels := Labels(name, m)
	cf.Created = created
	cf.OS = goos
	cf.Architecture = arch
	cf.Author = "Threat View"
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{path.Join(BinDir, name)},
		Env: []string{
			"PATH=" + BinDir,
			"SSL_CERT_FILE=" + CACertsPath,
			"HOME=/home/nonroot",
		},
		WorkingDir: "/",
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	out, ok := mutate.Annotations(img, labels).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating %s: not an image", name)
	}
	return out, nil
}

// NewIndex is the multi-platform image index of one command (bins maps
// "os/arch" to the binary built for it), with the SPDX SBOM of its binary.
func NewIndex(name string, bins map[string]string, base []File, m Meta) (v1.ImageIndex, []byte, error) {
	platforms := make([]string, 0, len(bins))
	for p := range bins {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	// The SBOM describes the module graph, which is the same for every platform:
	// take it from the first platform's binary.
	sbom, err := SBOM(name, bins[platforms[0]], m)
	if err != nil {
		return nil, nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := NewImage(name, p, bins[p], base, sbom, m)
		if err != nil {
			return nil, nil, err
		}
		goos, arch, _ := strings.Cut(p, "/")
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: goos, Architecture: arch},
		}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	out, ok := mutate.Annotations(idx, Labels(name, m)).(v1.ImageIndex)
	if !ok {
		return nil, nil, fmt.Errorf("annotating %s: not an index", name)
	}
	return out, sbom, nil
}

// WriteArchive writes idx as an OCI image layout tarred into file (what
// `podman load` and skopeo's oci-archive: read), tagged ref in index.json.
// The tar is sorted with fixed times, so the file is reproducible too.
func WriteArchive(file string, idx v1.ImageIndex, ref string, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return err
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Mode: 0o644, Data: b})
		return nil
	})
	if err != nil {
		return err
	}
	b, err := LayerTar(files, mtime)
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
