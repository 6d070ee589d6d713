#!/usr/bin/env bash
# Container images without a container daemon (tools/imagebuild, built on
# github.com/google/go-containerregistry): one OCI image per command directory
# (services/*/cmd/*, migrations/cmd/*, deploy/*/cmd/*) for linux/amd64 and linux/arm64.
#
#   scripts/images.sh build   write .run/images/NAME.oci.tar, NAME.spdx.json, images.txt
#                             (PUSH=registry/prefix also pushes PREFIX/NAME:VERSION;
#                             VERSION=x.y.z overrides the chart's appVersion; IMAGE_SOURCE=URL and
#                             IMAGE_LICENSE=SPDX-id set the source and licence labels, which are
#                             otherwise git's origin URL and NOASSERTION)
#   scripts/images.sh test    build, then check every image (tools/imagebuild, tag `images`):
#                             files, user, labels, static binary per architecture, the binary
#                             run from the image's own files, a rebuild giving the same digest.
#                             Needs the local stack's settings (.run/env) for migrate and tokens.
#
# The base layer's CA bundle and time zone database come from Debian's
# ca-certificates and tzdata, installed here when missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
OUT="$ROOT/.run/images"

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

ensure_base_files() {
  [ -s /etc/ssl/certs/ca-certificates.crt ] && [ -f /usr/share/zoneinfo/Etc/UTC ] && return 0
  [ "$(id -u)" -eq 0 ] || die "ca-certificates and tzdata are needed: apt-get install ca-certificates tzdata (as root)"
  log "installing ca-certificates and tzdata"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata >/dev/null ||
    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata >/dev/null; } ||
    die "apt-get install ca-certificates tzdata failed"
}

cmd_build() {
  command -v go >/dev/null || die "go is not installed"
  ensure_base_files
  local args=(-root "$ROOT" -out "$OUT")
  [ -n "${VERSION:-}" ] && args+=(-version "$VERSION")
  [ -n "${PUSH:-}" ] && args+=(-push "$PUSH")
  [ -n "${IMAGE_SOURCE:-}" ] && args+=(-source "$IMAGE_SOURCE")
  [ -n "${IMAGE_LICENSE:-}" ] && args+=(-license "$IMAGE_LICENSE")
  local start=$SECONDS
  log "building every image for linux/amd64 and linux/arm64 into .run/images"
  (cd "$ROOT" && nice -n 5 go run ./tools/imagebuild "${args[@]}")
  log "done in $((SECONDS - start))s"
}

cmd_test() {
  cmd_build
  log "checking the images (go test -tags images ./tools/imagebuild)"
  (cd "$ROOT/tools/imagebuild" && THREATVIEW_IMAGES_DIR="$OUT" go test -tags images -count=1 -timeout 15m .)
}

case "${1:-}" in
  build) cmd_build ;;
  test) cmd_test ;;
  *) die "usage: scripts/images.sh build|test" ;;
esac
