#!/usr/bin/env bash
# A local S3-compatible server for the archiver's S3 tests: Versity S3 Gateway
# (versitygw, Apache-2.0) serving a POSIX directory, built from the Go module
# proxy and listening on loopback only. State lives under .run/ (git-ignored).
#
#   scripts/s3.sh build    go install the pinned versitygw into .run/bin (skipped when present)
#   scripts/s3.sh start    build if needed, run it on 127.0.0.1:18333, wait until it answers
#   scripts/s3.sh stop     stop the process named in .run/pid/s3.pid (never by name)
#   scripts/s3.sh status   one line: pid, state, address
#   scripts/s3.sh env      print the test variables (also written to .run/s3.env)
#
# Everything is idempotent. Data: .run/s3/ (one directory per bucket), log: .run/log/s3.log.
# The credentials are fixed, local-only test values: the server listens on 127.0.0.1 only.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
RUN="$ROOT/.run"
BINDIR="$RUN/bin"
LOGDIR="$RUN/log"
PIDDIR="$RUN/pid"
DATADIR="$RUN/s3"
ENVFILE="$RUN/s3.env"

MODULE=github.com/versity/versitygw
VERSION=v1.8.0
BIN="$BINDIR/versitygw"
STAMP="$BINDIR/versitygw.version"

ADDR="${THREATVIEW_S3_ADDR:-127.0.0.1:18333}"
ACCESS_KEY=threatview-test
SECRET_KEY=threatview-test-secret
REGION=us-east-1
PIDFILE="$PIDDIR/s3.pid"
LOGFILE="$LOGDIR/s3.log"
START_WAIT=30 # seconds

log() { printf '[s3] %s\n' "$*" >&2; }
die() { printf '[s3] ERROR: %s\n' "$*" >&2; exit 1; }

ensure_dirs() { mkdir -p "$BINDIR" "$LOGDIR" "$PIDDIR" "$DATADIR"; }

read_pid() {
  local p=""
  [ -f "$PIDFILE" ] && read -r p <"$PIDFILE" || true
  [[ "$p" =~ ^[0-9]+$ ]] && printf '%s' "$p" || true
}

# The pid file names a live process running our binary (guards against pid reuse).
running() {
  local p st exe
  p="$(read_pid)"
  [ -n "$p" ] && [ -d "/proc/$p" ] || return 1
  st="$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)"
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] || return 1
  exe="$(readlink "/proc/$p/exe" 2>/dev/null || true)"
  exe="${exe% (deleted)}"
  [ "$(basename "${exe:-?}")" = versitygw ]
}

# Any HTTP answer means the server is up (an anonymous GET gets 403).
answers() {
  local code
  code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$ADDR/" 2>/dev/null || true)"
  [ -n "$code" ] && [ "$code" != 000 ]
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/${ADDR%:*}/${ADDR##*:}" 2>/dev/null; }

write_env() {
  ensure_dirs
  cat >"$ENVFILE.tmp" <<EOF
ARCHIVE_TEST_S3_ENDPOINT=http://$ADDR
AWS_ACCESS_KEY_ID=$ACCESS_KEY
AWS_SECRET_ACCESS_KEY=$SECRET_KEY
AWS_REGION=$REGION
EOF
  mv "$ENVFILE.tmp" "$ENVFILE"
}

cmd_build() {
  ensure_dirs
  if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null || true)" = "$VERSION" ]; then
    log "versitygw $VERSION present in .run/bin"
    return 0
  fi
  command -v go >/dev/null || die "go is not installed"
  local tmp start
  tmp="$(mktemp -d "$BINDIR/.versitygw.XXXXXX")"
  start=$SECONDS
  log "go install $MODULE/cmd/versitygw@$VERSION (about 1.5 min on 2 cores, once)"
  # Outside the workspace: the gateway is built with its own go.mod and go.sum.
  if ! (cd "$tmp" && GOWORK=off GOBIN="$tmp" go install "$MODULE/cmd/versitygw@$VERSION"); then
    rm -rf "$tmp"
    die "building versitygw failed"
  fi
  mv -f "$tmp/versitygw" "$BIN"
  rm -rf "$tmp"
  printf '%s\n' "$VERSION" >"$STAMP"
  log "built .run/bin/versitygw in $((SECONDS - start))s"
}

cmd_start() {
  ensure_dirs
  write_env
  if running; then
    answers || die "versitygw (pid $(read_pid)) runs but http://$ADDR does not answer; see .run/log/s3.log"
    log "already running (pid $(read_pid)) on $ADDR"
    return 0
  fi
  port_open && die "$ADDR is in use by another process"
  cmd_build
  log "starting versitygw on $ADDR (data .run/s3)"
  (
    cd "$RUN"
    export ROOT_ACCESS_KEY_ID="$ACCESS_KEY" ROOT_SECRET_ACCESS_KEY="$SECRET_KEY"
    exec nohup "$BIN" --port "$ADDR" --region "$REGION" --quiet posix "$DATADIR" \
      </dev/null >>"$LOGFILE" 2>&1
  ) &
  echo $! >"$PIDFILE"
  local i
  for ((i = 0; i < START_WAIT * 10; i++)); do
    if ! running; then
      tail -n 20 "$LOGFILE" >&2 || true
      die "versitygw exited during startup"
    fi
    if answers; then
      log "ready (pid $(read_pid)) at http://$ADDR"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$LOGFILE" >&2 || true
  die "versitygw does not answer on $ADDR after ${START_WAIT}s"
}

cmd_stop() {
  if ! running; then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  local p i
  p="$(read_pid)"
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do running || break; sleep 0.1; done
  if running; then
    log "versitygw (pid $p) did not stop within 10s; sending SIGKILL"
    kill -KILL "$p" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do running || break; sleep 0.1; done
    running && die "versitygw (pid $p) survived SIGKILL"
  fi
  rm -f "$PIDFILE"
  log "stopped (pid $p)"
}

cmd_status() {
  if running; then
    if answers; then printf 's3\tpid %s\trunning\t%s\n' "$(read_pid)" "$ADDR"
    else printf 's3\tpid %s\tnot answering\t%s\n' "$(read_pid)" "$ADDR"; fi
  else
    printf 's3\t-\tstopped\t%s\n' "$ADDR"
  fi
}

cmd_env() {
  write_env
  cat "$ENVFILE"
}

case "${1:-}" in
  build) cmd_build ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) die "usage: scripts/s3.sh build|start|stop|status|env" ;;
esac
