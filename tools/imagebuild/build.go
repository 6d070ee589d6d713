package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is one imagebuild run.
type Config struct {
	Root      string   // repository root
	Out       string   // output directory
	Version   string   // stamped version and tag; "" means the chart's appVersion
	Revision  string   // source revision label; "" means git HEAD
	Source    string   // source URL label; "" means git's origin URL
	License   string   // licence label; "" means NOASSERTION
	CACerts   string   // CA bundle for the base layer
	ZoneInfo  string   // zoneinfo directory for the base layer
	Push      string   // registry/prefix to push to; "" means no push
	Platforms []string // os/arch
	Only      []string // image names to build; empty means all
	Log       io.Writer
	Getenv    func(string) string
}

// Command is one command directory that becomes an image.
type Command struct {
	Name string // image and binary name: the directory's base name
	Dir  string // directory of the main package, relative to the root
}

// excluded names command directories that are development tools, not shipped.
var excluded = map[string]string{
	"geoipgen": "writes the test GeoIP database for tests and the local stack",
}

// Commands lists the command directories under root: services/*/cmd/*,
// migrations/cmd/* and deploy/*/cmd/* (the chart's helm test), each holding a
// main package, sorted by name.
func Commands(root string) ([]Command, error) {
	var dirs []string
	for _, pattern := range []string{"services/*/cmd/*", "migrations/cmd/*", "deploy/*/cmd/*"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, m...)
	}
	var cmds []Command
	seen := map[string]string{}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		name := filepath.Base(d)
		if _, skip := excluded[name]; skip {
			continue
		}
		ok, err := hasMain(d)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // a command directory being written: no main package yet
		}
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("two command directories named %s: %s and %s", name, prev, rel)
		}
		seen[name] = rel
		cmds = append(cmds, Command{Name: name, Dir: filepath.ToSlash(rel)})
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	return cmds, nil
}

var mainPackage = regexp.MustCompile(`(?m)^package main\s*$`)

func hasMain(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		if mainPackage.Match(b) {
			return true, nil
		}
	}
	return false, nil
}

// Build builds (and optionally pushes) every image.
func Build(ctx context.Context, cfg Config) error {
	var err error
	if cfg.Root, err = filepath.Abs(cfg.Root); err != nil {
		return err
	}
	if !filepath.IsAbs(cfg.Out) {
		cfg.Out = filepath.Join(cfg.Root, cfg.Out)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Version == "" {
		if cfg.Version, err = chartAppVersion(cfg.Root); err != nil {
			return err
		}
	}
	if cfg.Revision == "" {
		cfg.Revision = gitOutput(ctx, cfg.Root, "rev-parse", "HEAD")
	}
	if cfg.Source == "" {
		cfg.Source = gitOutput(ctx, cfg.Root, "config", "--get", "remote.origin.url")
		if cfg.Source == "" || strings.Contains(cfg.Source, "@") || strings.HasPrefix(cfg.Source, "/") {
			cfg.Source = "NOASSERTION"
		}
	}
	if cfg.License == "" {
		cfg.License = "NOASSERTION"
	}
	epoch, err := sourceDateEpoch(ctx, cfg)
	if err != nil {
		return err
	}
	cmds, err := Commands(cfg.Root)
	if err != nil {
		return err
	}
	if len(cfg.Only) > 0 {
		var keep []Command
		for _, c := range cmds {
			if slices.Contains(cfg.Only, c.Name) {
				keep = append(keep, c)
			}
		}
		for _, n := range cfg.Only {
			if !slices.ContainsFunc(keep, func(c Command) bool { return c.Name == n }) {
				return fmt.Errorf("-only %s: no command directory of that name", n)
			}
		}
		cmds = keep
	}
	if len(cmds) == 0 {
		return errors.New("no command directories found")
	}
	base, err := BaseFiles(cfg.CACerts, cfg.ZoneInfo)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	binDir, err := os.MkdirTemp(cfg.Out, ".bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)

	meta := Meta{Version: cfg.Version, Revision: cfg.Revision, Source: cfg.Source, License: cfg.License, Created: epoch}
	var summary strings.Builder
	for _, c := range cmds {
		start := time.Now()
		bins := map[string]string{}
		for _, p := range cfg.Platforms {
			bin := filepath.Join(binDir, c.Name+"-"+strings.ReplaceAll(p, "/", "-"))
			if err := GoBuild(ctx, cfg.Root, c, p, cfg.Version, bin, cfg.Getenv); err != nil {
				return err
			}
			bins[p] = bin
		}
		idx, sbom, err := NewIndex(c.Name, bins, base, meta)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if err := WriteArchive(filepath.Join(cfg.Out, c.Name+".oci.tar"), idx, "threatview/"+c.Name+":"+cfg.Version, epoch); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if err := os.WriteFile(filepath.Join(cfg.Out, c.Name+".spdx.json"), sbom, 0o644); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(&summary, "%s %s\n", c.Name, d)
		fmt.Fprintf(cfg.Log, "%-16s %s  %s (%s)\n", c.Name, d, strings.Join(cfg.Platforms, ","), time.Since(start).Round(100*time.Millisecond))
		if cfg.Push != "" {
			ref, err := Push(ctx, cfg.Push, c.Name, cfg.Version, idx, sbom)
			if err != nil {
				return fmt.Errorf("push %s: %w", c.Name, err)
			}
			fmt.Fprintf(cfg.Log, "%-16s pushed %s\n", c.Name, ref)
		}
	}
	return os.WriteFile(filepath.Join(cfg.Out, "images.txt"), []byte(summary.String()), 0o644)
}

// GoBuild builds one static binary for platform ("linux/arm64") into out. The
// version is stamped into main.version (what each service logs) and into the
// shared cli package (what --version prints).
func GoBuild(ctx context.Context, root string, c Command, platform, version, out string, getenv func(string) string) error {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok {
		return fmt.Errorf("platform %q: want OS/ARCH", platform)
	}
	ldflags := strings.Join([]string{
		"-s", "-w", "-buildid=",
		"-X", "main.version=" + version,
		"-X", "threatview/platform/cli.Version=" + version,
	}, " ")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./"+c.Dir)
	cmd.Dir = root
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOFLAGS", "GOAMD64", "GOARM64":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./%s for %s: %w\n%s", c.Dir, platform, err, stderr.String())
	}
	return nil
}

var appVersion = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)

func chartAppVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "threatview", "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("no -version and no chart to take appVersion from: %w", err)
	}
	m := appVersion.FindSubmatch(b)
	if m == nil {
		return "", errors.New("charts/threatview/Chart.yaml has no appVersion")
	}
	return string(m[1]), nil
}

func gitOutput(ctx context.Context, root string, args ...string) string {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sourceDateEpoch is SOURCE_DATE_EPOCH, else the commit time of HEAD, else 0.
func sourceDateEpoch(ctx context.Context, cfg Config) (time.Time, error) {
	s := cfg.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		s = gitOutput(ctx, cfg.Root, "log", "-1", "--format=%ct")
	}
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
