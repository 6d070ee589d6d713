#!/usr/bin/env bash
# A real Kubernetes control plane for the chart's install test, built from the
# Go module proxy and cached under .run/k8s/bin (git-ignored), like the S3 server:
#   etcd v3.5.21, kube-apiserver, kube-controller-manager and kubectl v1.33.13, helm v3.22.0.
#
#   scripts/k8s.sh build    build whatever is missing (about 11 min cold on 2 cores, once)
#   scripts/k8s.sh status   one line per binary: present or missing, version
#   scripts/k8s.sh bindir   print the directory holding the binaries
#
# The install test itself (charts/install_test.go, build tag `k8s`) starts and stops
# etcd, the API server and the controller-manager on loopback ports; this script
# only builds. Each binary has a stamp file naming the version it was built from,
# so bumping a version below rebuilds just that binary.
#
# Why a small module per tool: `go install pkg@version` refuses modules whose
# go.mod has replace lines (etcd's and Kubernetes'), so each is built inside a
# throwaway module under .run/k8s/src that requires it (for Kubernetes, with every
# k8s.io/* staging module replaced by its published v0.x version).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
K8SDIR="$ROOT/.run/k8s"
BINDIR="$K8SDIR/bin"
SRCDIR="$K8SDIR/src"

ETCD_VERSION=v3.5.21
KUBE_VERSION=v1.33.13
HELM_VERSION=v3.22.0

# The machine is shared: build at low priority.
NICE=(nice -n 10)
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[k8s] %s\n' "$*" >&2; }
die() { printf '[k8s] ERROR: %s\n' "$*" >&2; exit 1; }

have() { # name version
  [ -x "$BINDIR/$1" ] && [ "$(cat "$BINDIR/$1.version" 2>/dev/null || true)" = "$2" ]
}
stamp() { printf '%s\n' "$2" >"$BINDIR/$1.version"; }

build_etcd() {
  have etcd "$ETCD_VERSION" && { log "etcd $ETCD_VERSION present"; return 0; }
  local d="$SRCDIR/etcd" start=$SECONDS
  rm -rf "$d" && mkdir -p "$d"
  cat >"$d/go.mod" <<EOF
module threatview.local/etcdbuild

go 1.23
EOF
  cat >"$d/main.go" <<'EOF'
// Command etcd is the etcd server, built from its module for local tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  log "building etcd $ETCD_VERSION (about 3 min cold)"
  (cd "$d" && "${NICE[@]}" go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" &&
    "${NICE[@]}" go mod tidy &&
    "${NICE[@]}" go build -trimpath -o "$BINDIR/etcd.tmp" .) || die "building etcd failed"
  mv -f "$BINDIR/etcd.tmp" "$BINDIR/etcd"
  stamp etcd "$ETCD_VERSION"
  log "built etcd in $((SECONDS - start))s"
}

build_kube() {
  if have kube-apiserver "$KUBE_VERSION" && have kube-controller-manager "$KUBE_VERSION" &&
    have kubectl "$KUBE_VERSION"; then
    log "kube-apiserver, kube-controller-manager, kubectl $KUBE_VERSION present"
    return 0
  fi
  local d="$SRCDIR/kube" start=$SECONDS gomod staging minor
  rm -rf "$d" && mkdir -p "$d"
  # The staging modules are the `=> ./staging/...` replace lines of that version's go.mod.
  gomod="$(cd "$d" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  [ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$KUBE_VERSION"
  staging="$(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$gomod" | sort -u)"
  [ -n "$staging" ] || die "no staging replace lines in $gomod"
  minor="${KUBE_VERSION#v1.}"
  {
    printf 'module threatview.local/kubebuild\n\ngo 1.24\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KUBE_VERSION"
    local m
    for m in $staging; do printf '\t%s => %s v0.%s\n' "$m" "$m" "$minor"; done
    printf ')\n'
  } >"$d/go.mod"
  local cmds=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kubectl)
  local ver="$KUBE_VERSION" major=1 mnr="${minor%%.*}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$ver"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$mnr"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$ver"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=$major -X k8s.io/client-go/pkg/version.gitMinor=$mnr"
  log "building kube-apiserver, kube-controller-manager, kubectl $KUBE_VERSION (about 8-11 min cold)"
  local c
  (cd "$d" && "${NICE[@]}" go get "${cmds[@]/%/@$KUBE_VERSION}") || die "resolving k8s.io/kubernetes failed"
  for c in "${cmds[@]}"; do
    local name="${c##*/}"
    (cd "$d" && "${NICE[@]}" go build -trimpath -ldflags "$ldflags" -o "$BINDIR/$name.tmp" "$c") ||
      die "building $name failed"
    mv -f "$BINDIR/$name.tmp" "$BINDIR/$name"
    stamp "$name" "$KUBE_VERSION"
  done
  log "built the Kubernetes binaries in $((SECONDS - start))s"
}

build_helm() {
  have helm "$HELM_VERSION" && { log "helm $HELM_VERSION present"; return 0; }
  local start=$SECONDS tmp
  tmp="$(mktemp -d "$BINDIR/.helm.XXXXXX")"
  log "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (about 80 s cold)"
  (cd "$tmp" && GOBIN="$tmp" "${NICE[@]}" go install -trimpath \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") || { rm -rf "$tmp"; die "building helm failed"; }
  mv -f "$tmp/helm" "$BINDIR/helm"
  rm -rf "$tmp"
  stamp helm "$HELM_VERSION"
  log "built helm in $((SECONDS - start))s"
}

cmd_build() {
  command -v go >/dev/null || die "go is not installed"
  mkdir -p "$BINDIR" "$SRCDIR"
  build_etcd
  build_helm
  build_kube
}

cmd_status() {
  local b v
  for b in etcd:$ETCD_VERSION kube-apiserver:$KUBE_VERSION kube-controller-manager:$KUBE_VERSION \
    kubectl:$KUBE_VERSION helm:$HELM_VERSION; do
    v="${b#*:}"; b="${b%%:*}"
    if have "$b" "$v"; then printf '%s\t%s\tpresent\n' "$b" "$v"; else printf '%s\t%s\tmissing\n' "$b" "$v"; fi
  done
}

case "${1:-}" in
  build) cmd_build ;;
  status) cmd_status ;;
  bindir) printf '%s\n' "$BINDIR" ;;
  *) die "usage: scripts/k8s.sh build|status|bindir" ;;
esac
