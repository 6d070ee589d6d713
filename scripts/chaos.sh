#!/usr/bin/env bash
# The long fault suite behind `make chaos`: under steady load it kills or
# restarts each part of the local stack in turn (e2e/fault, build tag
# `fault`, CHAOS_LONG=1), prints the table fault | requests sent | 202s |
# stored | duplicates | audit rows | recovery seconds, and writes it with the
# date and the machine's facts into docs/reliability.md (between the
# chaos-report markers). The stack is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd -P)"
STACK=scripts/stack.sh
DOC=docs/reliability.md

bash "$STACK" up >/dev/null
set -a
# shellcheck disable=SC1091
. .run/env
set +a
export THREATVIEW_REQUIRE_SERVICES=1 CHAOS_LONG=1

report="$(mktemp)"
trap 'rm -f "$report" "$report.md"' EXIT
export CHAOS_REPORT="$report"

rc=0
(cd e2e && go test -tags fault -count=1 -p 1 -run Fault -timeout 60m -v ./fault/) || rc=$?
bash "$STACK" up >/dev/null

if [ ! -s "$report" ]; then
  echo "chaos: the suite wrote no report (exit $rc)" >&2
  exit 1
fi
echo
cat "$report"

cpu="$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)"
mem="$(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo 2>/dev/null || true)"
{
  echo "<!-- chaos-report:start (written by scripts/chaos.sh) -->"
  echo "Run of \`make chaos\` on $(date -u '+%Y-%m-%d %H:%M UTC'): $(nproc) CPUs (${cpu:-unknown}), ${mem:-unknown} RAM,"
  echo "$(uname -sr), $(go version | awk '{print $3}'), suite exit status $rc."
  echo
  cat "$report"
  echo "<!-- chaos-report:end -->"
} >"$report.md"

if [ -f "$DOC" ] && grep -q 'chaos-report:start' "$DOC"; then
  awk -v f="$report.md" '
    /chaos-report:start/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /chaos-report:end/ { skip = 0; next }
    !skip { print }' "$DOC" >"$DOC.tmp"
  mv -f "$DOC.tmp" "$DOC"
else
  mkdir -p docs
  { [ -f "$DOC" ] && cat "$DOC" && echo; cat "$report.md"; } >"$DOC.tmp"
  mv -f "$DOC.tmp" "$DOC"
fi
echo "chaos: table written to ${DOC#"$ROOT"/}"
exit "$rc"
