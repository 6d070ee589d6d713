//go:build images

// The built images, checked from their archives (make images-test, after make
// images): every command directory has an image; every platform's image has
// the non-root user, the labels, CA certificates and time zone data and no
// shell; its binary is static and for its architecture; and on this machine's
// architecture the binary runs from the image's own files (chroot into the
// unpacked layers as UID 65532): --version for every command, a real
// migration for migrate, the tokens service started until /healthz answers,
// and the chart's helm test (smoketest) run against the local stack.
//
// Debian 12's podman (4.3.1, rootful, vfs storage) loads these archives
// (`podman load -i NAME.oci.tar` gives localhost/threatview/NAME:VERSION) but
// cannot run any container on the machines here: crun fails with
// "setrlimit RLIMIT_NOFILE: Operation not permitted" and, with --cgroups=disabled,
// "cgroups in hybrid mode not supported". So the run checks use chroot instead.
package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

const repoRoot = "../.."

func imagesDir() string {
	if d := os.Getenv("THREATVIEW_IMAGES_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, ".run", "images")
}

func requireServices() bool { return os.Getenv("THREATVIEW_REQUIRE_SERVICES") == "1" }

// builtImages reads images.txt: name -> index digest.
func builtImages(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(imagesDir(), "images.txt"))
	if err != nil {
		t.Fatalf("%v (run make images first)", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, digest, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("images.txt line %q", sc.Text())
		}
		out[name] = digest
	}
	return out
}

func TestEveryCommandHasAnImage(t *testing.T) {
	cmds, err := Commands(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	built := builtImages(t)
	for _, c := range cmds {
		if _, ok := built[c.Name]; !ok {
			t.Errorf("%s (%s) has no image in %s", c.Name, c.Dir, imagesDir())
		}
	}
}

func TestImagesRunFromTheirOwnFiles(t *testing.T) {
	version, err := chartAppVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("THREATVIEW_IMAGE_VERSION"); v != "" {
		version = v
	}
	built := builtImages(t)
	names := make([]string, 0, len(built))
	for n := range built {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			idx := openArchive(t, name, built[name])
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var archs []string
			for _, desc := range im.Manifests {
				arch := desc.Platform.Architecture
				archs = append(archs, arch)
				img, err := idx.Image(desc.Digest)
				if err != nil {
					t.Fatal(err)
				}
				root := t.TempDir()
				if err := Unpack(img, root); err != nil {
					t.Fatal(err)
				}
				checkFiles(t, img, root, name, arch, version)
				if arch == runtime.GOARCH {
					runChecks(t, root, name, version)
				}
			}
			if !slices.Equal(archs, []string{"amd64", "arm64"}) {
				t.Errorf("platforms %v, want amd64 and arm64", archs)
			}
		})
	}
}

// openArchive untars NAME.oci.tar and returns the image index it holds,
// checking its digest is the one images.txt names.
func openArchive(t *testing.T, name, digest string) v1.ImageIndex {
	t.Helper()
	dir := t.TempDir()
	if err := Untar(filepath.Join(imagesDir(), name+".oci.tar"), dir); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
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
	if len(om.Manifests) != 1 || om.Manifests[0].Digest.String() != digest {
		t.Fatalf("index.json %+v, want one index %s", om.Manifests, digest)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func checkFiles(t *testing.T, img v1.Image, root, name, arch, version string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Architecture != arch || cf.OS != "linux" {
		t.Errorf("%s/%s: user %q, platform %s/%s", name, arch, cf.Config.User, cf.OS, cf.Architecture)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("%s/%s: version label %q, want %q", name, arch, got, version)
	}
	for _, k := range []string{"source", "revision", "licenses", "created"} {
		if cf.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("%s/%s: no org.opencontainers.image.%s label", name, arch, k)
		}
	}
	certs, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil || bytes.Count(certs, []byte("BEGIN CERTIFICATE")) < 50 {
		t.Errorf("%s/%s: CA bundle missing or small (%d bytes, %v)", name, arch, len(certs), err)
	}
	for _, z := range []string{"Etc/UTC", "Europe/Paris", "America/New_York"} {
		if _, err := os.Stat(filepath.Join(root, "usr/share/zoneinfo", z)); err != nil {
			t.Errorf("%s/%s: time zone %s missing: %v", name, arch, z, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "usr/share/doc/threatview", name+".spdx.json")); err != nil {
		t.Errorf("%s/%s: no SBOM in the image: %v", name, arch, err)
	}
	// No shell, nor anything else executable but the binary.
	err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 && rel != "usr/local/bin/"+name {
			t.Errorf("%s/%s: executable file %s", name, arch, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "usr/local/bin", name)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s/%s: %v", name, arch, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		t.Errorf("%s/%s: binary for %v, want %v", name, arch, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s/%s: binary is dynamically linked", name, arch)
		}
	}
}

// imageCommand runs the image's binary with only the image's files: chrooted
// into root as UID 65532 when this process may (root), else from root's path
// with the CA bundle and time zone database pointed into root.
func imageCommand(ctx context.Context, root, name string, env []string, args ...string) *exec.Cmd {
	bin := "/usr/local/bin/" + name
	base := []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=/home/nonroot"}
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, bin, args...)
		cmd.Path = bin
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: UID, Gid: GID}}
	} else {
		cmd = exec.CommandContext(ctx, filepath.Join(root, bin), args...)
		cmd.Dir = root
		base = []string{"SSL_CERT_FILE=" + filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"),
			"ZONEINFO=" + filepath.Join(root, "usr/share/zoneinfo")}
	}
	cmd.Env = append(base, env...)
	return cmd
}

func runChecks(t *testing.T, root, name, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if name == "migrate" {
		runMigrate(t, ctx, root)
		return
	}
	var stdout, stderr bytes.Buffer
	cmd := imageCommand(ctx, root, name, nil, "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s --version: %v\n%s%s", name, err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); !strings.HasSuffix(got, " "+version) {
		t.Errorf("%s --version printed %q, want \"... %s\"", name, got, version)
	}
	switch name {
	case "tokens":
		runService(t, ctx, root, name)
	case "smoketest":
		runSmoketest(t, root)
	}
}

// runSmoketest runs the chart's helm test from its image against the local
// stack: one event for the demo app, posted to the collector, must be counted
// by the visual renderer.
func runSmoketest(t *testing.T, root string) {
	env := stackEnv(t, "THREATVIEW_COLLECTOR_URL", "THREATVIEW_RENDERER_URL", "THREATVIEW_DEMO_APP", "THREATVIEW_DEMO_TOKEN", "ADMIN_KEY")
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "THREATVIEW_COLLECTOR_URL":
			env[i] = "SMOKE_COLLECTOR_URL=" + v
		case "THREATVIEW_RENDERER_URL":
			env[i] = "SMOKE_RENDERER_URL=" + v
		case "THREATVIEW_DEMO_APP":
			env[i] = "SMOKE_APP_ID=" + v
		case "THREATVIEW_DEMO_TOKEN":
			env[i] = "SMOKE_APP_TOKEN=" + v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := imageCommand(ctx, root, "smoketest", append(env, "SMOKE_TIMEOUT=90s"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("smoketest from the image against the local stack: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "counted after") {
		t.Errorf("smoketest output:\n%s", out.String())
	}
	t.Logf("smoketest: %s", strings.TrimSpace(out.String()))
}

// stackEnv is the local stack's settings (make test sources .run/env).
func stackEnv(t *testing.T, keys ...string) []string {
	t.Helper()
	var env []string
	for _, k := range keys {
		v := os.Getenv(k)
		if v == "" {
			if requireServices() {
				t.Fatalf("%s is not set (source .run/env)", k)
			}
			t.Skipf("%s is not set: the local stack's settings are needed", k)
		}
		env = append(env, k+"="+v)
	}
	return env
}

// runMigrate applies the tokens database's migrations (already applied by the
// stack: this changes nothing) from the image, over TCP with the Go driver.
func runMigrate(t *testing.T, ctx context.Context, root string) {
	env := stackEnv(t, "TOKENS_DATABASE_DSN")
	var out bytes.Buffer
	cmd := imageCommand(ctx, root, "migrate", env, "-db", "tokens", "-ahead", "0")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("migrate -db tokens from the image: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "tokens") {
		t.Errorf("migrate output does not mention the tokens database:\n%s", out.String())
	}
}

// runService starts the service from the image on a free loopback port with
// the stack's settings and waits for GET /healthz to answer 200, then stops it
// with SIGTERM and expects a clean exit.
func runService(t *testing.T, ctx context.Context, root, name string) {
	env := stackEnv(t, "TOKENS_DATABASE_DSN", "ADMIN_KEY", "INTERNAL_KEY", "STOMP_ADDR")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env = append(env, "HTTP_ADDR="+addr, "AUDITLOGGER_SERVICE_URL=", "LOG_LEVEL=warn")
	var out bytes.Buffer
	cmd := imageCommand(ctx, root, name, env)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%s from the image exited during startup: %v\n%s", name, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s from the image: /healthz not 200 after 30s\n%s", name, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s from the image exited with %v after SIGTERM\n%s", name, err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("%s from the image did not stop within 30s of SIGTERM", name)
	}
}

// TestRebuildGivesTheSameDigest builds one image again, from the same source
// with the same revision and time as the archive's labels, into another
// directory: the index digest must be the one make images wrote.
func TestRebuildGivesTheSameDigest(t *testing.T) {
	const name = "tokens"
	built := builtImages(t)
	want, ok := built[name]
	if !ok {
		t.Fatalf("no %s image in images.txt", name)
	}
	idx := openArchive(t, name, want)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	labels := im.Annotations
	created, err := time.Parse(time.RFC3339, labels["org.opencontainers.image.created"])
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	err = Build(context.Background(), Config{
		Root: repoRoot, Out: out, Version: labels["org.opencontainers.image.version"],
		Revision: labels["org.opencontainers.image.revision"], Source: labels["org.opencontainers.image.source"],
		License: labels["org.opencontainers.image.licenses"], CACerts: "/etc/ssl/certs/ca-certificates.crt",
		ZoneInfo: "/usr/share/zoneinfo", Platforms: []string{"linux/amd64", "linux/arm64"}, Only: []string{name},
		Getenv: func(k string) string {
			if k == "SOURCE_DATE_EPOCH" {
				return strconv.FormatInt(created.Unix(), 10)
			}
			return os.Getenv(k)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != name+" "+want {
		t.Fatalf("rebuilt: %q, make images wrote %s %s", got, name, want)
	}
	a1, _ := os.ReadFile(filepath.Join(imagesDir(), name+".oci.tar"))
	a2, _ := os.ReadFile(filepath.Join(out, name+".oci.tar"))
	if !bytes.Equal(a1, a2) {
		t.Error("the rebuilt archive's bytes differ")
	}
}
