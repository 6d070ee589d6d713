// Command imagebuild builds Threat View's container images without a container
// daemon: one multi-platform OCI image per command directory
// (services/*/cmd/*, migrations/cmd/*, deploy/*/cmd/*), each a static Go binary on an empty
// base holding only CA certificates, time zone data and a non-root user.
//
//	go run ./tools/imagebuild -root . -out .run/images [-version 0.1.0] [-push registry/prefix]
//
// For every image it writes NAME.oci.tar (an OCI image layout, tarred: podman
// and skopeo read it as oci-archive:), NAME.spdx.json (an SPDX 2.3 SBOM from the
// binary's Go build information) and a line "NAME DIGEST" in images.txt. The
// build is reproducible: file times are SOURCE_DATE_EPOCH (default: the commit
// time of HEAD), tar entries are sorted, Go builds with -trimpath and no build
// ID, so the same source gives the same digests. -push writes every image index
// to PREFIX/NAME:VERSION with the same library (credentials from the Docker
// config, as the docker CLI stores them).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fl := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	root := fl.String("root", ".", "repository root (holds go.work)")
	out := fl.String("out", ".run/images", "directory the OCI archives, SBOMs and images.txt are written to")
	version := fl.String("version", "", "version stamped into the binaries and used as the tag (default: the chart's appVersion)")
	revision := fl.String("revision", "", "source revision for the org.opencontainers.image.revision label (default: git HEAD)")
	source := fl.String("source", "", "org.opencontainers.image.source label (default: git remote origin's URL, else \"NOASSERTION\")")
	license := fl.String("license", "", "org.opencontainers.image.licenses label, an SPDX expression (default: \"NOASSERTION\", the project has no licence file)")
	platforms := fl.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list")
	only := fl.String("only", "", "comma-separated image names to build (default: every command directory)")
	push := fl.String("push", "", "registry/prefix to push every image to as PREFIX/NAME:VERSION")
	certs := fl.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the base layer")
	zoneinfo := fl.String("zoneinfo", "/usr/share/zoneinfo", "time zone database copied into the base layer")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	cfg := Config{
		Root:      *root,
		Out:       *out,
		Version:   *version,
		Revision:  *revision,
		Source:    *source,
		License:   *license,
		CACerts:   *certs,
		ZoneInfo:  *zoneinfo,
		Push:      *push,
		Log:       stdout,
		Getenv:    getenv,
		Platforms: splitList(*platforms),
		Only:      splitList(*only),
	}
	if len(cfg.Platforms) == 0 {
		return errors.New("-platforms is empty")
	}
	return Build(ctx, cfg)
}
