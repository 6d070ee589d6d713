#!/usr/bin/env bash
# Threat View benchmark (make bench): Go benchmarks of every module, then a
# short load run against the local stack (about 7 minutes on 2 cores), then
# docs/performance.md.
#
# Steps: Go benchmarks -> sample event -> storage baseline -> run (warm-up +
# plan at RATE, resources sampled) -> verify -> storage -> sweep (SWEEPS
# times, each from a freshly restarted stack with SWEEP_FRESH=1; each sweep's
# accepted ids verified after it) -> cpu (CPU
# per accepted request for the machine and each process, requests per broker
# message, pprof CPU profiles at 1,500 req/s rendered as
# docs/flame-NAME.svg) -> users -> overhead (a second collector with
# auditing off, started and stopped here) -> ceilings (drain beside live
# traffic, COPY ceiling, backlog capacity, cold start) -> analyst pages
# (BenchmarkAnalystPages at ANALYST_BENCH_EVENTS) -> report (with a before/after
# CPU table when CPU_BEFORE names an earlier cpu.json).
#
# Needs the stack up (make up) and .run/env. The CPU profiles need the
# services started with HTTP_PPROF=true; without it the cpu step warns and
# draws no flame graph. Tunables (environment):
#   RATE=105 WARMUP=20s DURATION=60s          the reference-style run
#   SWEEP_RATES=105,500,1000,2000,3000,4000,5000 SWEEP_STEP=10s
#   SWEEPS=1                                  run the sweep N times (sweep-1 ... sweep-N;
#                                             sweep.json is the first)
#   SWEEP_WARMUP=30s SWEEP_WARMUP_RATE=1500    uncounted warm-up before the sweeps
#   SWEEP_FRESH=1                             before each sweep: scripts/stack.sh down, up
#                                             (services rebuilt from the tree), the warm-up;
#                                             sweeps go to sweep-1 ... even when SWEEPS=1;
#                                             the restarted stack gets this script's
#                                             environment (HTTP_PPROF=true, ACTIVEMQ_JAVA_OPTS,
#                                             ... as when it was started); logs in
#                                             BENCH_OUT/stack-restart-N.log
#   CPU_RATES=500,1500,2000 CPU_STEP=20s      plus the sweep's highest held rate
#   CPU_REPEAT=3                              rounds over the rates; the page shows each rate's median run
#   CPU_PROFILE_RATE=1500 CPU_PROFILE_SECONDS=15
#   CPU_LABEL="this tree, <short hash>"       names this build in cpu.json
#   CPU_BEFORE=docs/bench/cpu-before.json     (when it exists) an earlier build's cpu.json,
#                                             copied to BENCH_OUT/cpu-before.json: the page
#                                             compares the two ("Before and after")
#   USERS_LEVELS=5,100,500,1000 USERS_STEP=4s
#   OVERHEAD_RATE=500 OVERHEAD_USERS=50 OVERHEAD_STEP=8s NOAUDIT_PORT=8090
#   DRAIN_TIMEOUT=600                         seconds the sweeps and the cpu, users and overhead
#                                             steps wait for the consumers to catch up first
#   DRAIN_EVENTS=250000                       events queued before the drain of the ceilings step
#   CAPACITY_STORE="1 gb"                     the store limit of the ceilings step's capacity broker
#   SHARD_BENCH_EVENTS=60000                  events of the ceilings step's write-path benchmark (1 vs 2 shards)
#   CEILINGS_DRAIN=1                          the ceilings step also runs the backlog fault test
#                                             (about 1.5 GB queued first)
#   BENCHTIME=100ms SKIP_GOBENCH=1 SKIP_SWEEP=1 SKIP_CPU=1 SKIP_USERS=1 SKIP_OVERHEAD=1
#   SKIP_CEILINGS=1                           no ceilings step (drain, COPY ceiling, capacity, cold start)
#   ANALYST_BENCH_EVENTS=1000000              events of the analyst pages' database
#   SKIP_ANALYST=1                            no analyst pages step
#   BENCH_OUT=.run/bench  PAGE=docs/performance.md
# The full reference plan (2 min + 10 min) is `loadtest run` with its defaults.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
if [ -z "${THREATVIEW_DEMO_TOKEN:-}" ] && [ -f .run/env ]; then
  set -a; . .run/env; set +a
fi

RATE="${RATE:-105}"
WARMUP="${WARMUP:-20s}"
DURATION="${DURATION:-60s}"
SWEEP_RATES="${SWEEP_RATES:-105,500,1000,2000,3000,4000,5000}"
SWEEP_STEP="${SWEEP_STEP:-10s}"
SWEEPS="${SWEEPS:-1}"
SWEEP_WARMUP="${SWEEP_WARMUP:-30s}"
SWEEP_WARMUP_RATE="${SWEEP_WARMUP_RATE:-1500}"
SWEEP_FRESH="${SWEEP_FRESH:-}"
CPU_RATES="${CPU_RATES:-500,1500,2000}"
CPU_STEP="${CPU_STEP:-20s}"
CPU_REPEAT="${CPU_REPEAT:-3}"
CPU_PROFILE_RATE="${CPU_PROFILE_RATE:-1500}"
CPU_PROFILE_SECONDS="${CPU_PROFILE_SECONDS:-15}"
if [ -z "${CPU_LABEL:-}" ]; then
  CPU_LABEL="this tree"
  if h="$(git rev-parse --short HEAD 2>/dev/null)" && [ -n "$h" ]; then CPU_LABEL="this tree, $h"; fi
fi
if [ -z "${CPU_BEFORE:-}" ] && [ -f docs/bench/cpu-before.json ]; then CPU_BEFORE=docs/bench/cpu-before.json; fi
CPU_BEFORE="${CPU_BEFORE:-}"
USERS_LEVELS="${USERS_LEVELS:-5,100,500,1000}"
USERS_STEP="${USERS_STEP:-4s}"
OVERHEAD_RATE="${OVERHEAD_RATE:-500}"
OVERHEAD_USERS="${OVERHEAD_USERS:-50}"
OVERHEAD_STEP="${OVERHEAD_STEP:-8s}"
NOAUDIT_PORT="${NOAUDIT_PORT:-8090}"
BENCHTIME="${BENCHTIME:-100ms}"
ANALYST_BENCH_EVENTS="${ANALYST_BENCH_EVENTS:-1000000}"
DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-600}"
OUT="${BENCH_OUT:-$ROOT/.run/bench}"
PAGE="${PAGE:-docs/performance.md}"
COLLECTOR_URL="${THREATVIEW_COLLECTOR_URL:-http://127.0.0.1:8080}"

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }

[ -n "${THREATVIEW_DEMO_TOKEN:-}" ] || die "THREATVIEW_DEMO_TOKEN is not set: run 'make up' (it writes .run/env)"
[ -n "${EVENTS_DATABASE_URL:-}" ] || die "EVENTS_DATABASE_URL is not set: run 'make up'"
curl -fsS -m 2 -o /dev/null "$COLLECTOR_URL/healthz" || die "collector not answering at $COLLECTOR_URL: run 'make up'"
status="$(bash scripts/stack.sh status)"
svc_url() { awk -v n="$1" '$1 == n && $3 == "running" {print $4}' <<<"$status"; }
for svc in processor auditworker; do
  grep -qE "^$svc +[0-9]+ +running" <<<"$status" || log "warning: $svc is not running; verify will fail"
done

rm -rf "$OUT"
mkdir -p "$OUT" .run/bin
LT="$ROOT/.run/bin/loadtest"
log "building loadtest"
go build -o "$LT" ./loadtest/cmd/loadtest

rc=0
step() { # NAME CMD...: run a step, remember a failure, keep going
  local name="$1"; shift
  log "$name"
  if ! "$@"; then log "$name failed"; rc=1; fi
}

# ------------------------------------------------------------------ Go benchmarks
gobench() {
  local m pkgs
  : >"$OUT/gobench.txt"
  while read -r m; do
    [ -n "$m" ] || continue
    # Only packages that have benchmarks: compiling every test binary of
    # the workspace would take most of the time budget on 2 cores.
    mapfile -t pkgs < <(cd "$m" && grep -rl --include='*_test.go' -E '^func Benchmark' . 2>/dev/null |
      xargs -r -n1 dirname | sort -u)
    [ "${#pkgs[@]}" -gt 0 ] || continue
    log "go test -bench in ${m#"$ROOT"/} (${#pkgs[@]} packages)"
    (cd "$m" && go test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" "${pkgs[@]}" 2>&1) |
      grep -E '^(pkg:|Benchmark|FAIL|ok|---)' >>"$OUT/gobench.txt" || true
  done < <(go list -m -f '{{.Dir}}')
}
if [ -z "${SKIP_GOBENCH:-}" ]; then step "Go benchmarks (benchtime $BENCHTIME)" gobench; fi

# ------------------------------------------------------------------ setup notes
{
  printf -- '- OS: %s, kernel %s.\n' "$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}")" "$(uname -r)"
  if [ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/postgres" ]; then
    printf -- '- %s (fsync and synchronous_commit on), ' "$("$PG_BIN/postgres" --version)"
  fi
  printf '%s, ' "$( (mariadbd --version || /usr/sbin/mariadbd --version) 2>/dev/null | sed 's/ *(.*//' | head -n1)"
  printf 'ActiveMQ %s (persistent messages, STOMP); ' "$(ls /usr/share/activemq/lib/activemq-broker-*.jar 2>/dev/null | sed -E 's/.*broker-(.*)\.jar/\1/' | head -n1)"
  printf 'all on 127.0.0.1 as started by `make up`.\n'
  printf -- '- Services: collector, processor, audit logger, audit worker and tokens, one process each, built from this tree with %s.\n' "$(go env GOVERSION)"
} >"$OUT/setup.md"
"$LT" sample -pretty -seed 1 >"$OUT/sample-event.json" || true

# ------------------------------------------------------------------ the run
step "storage baseline" "$LT" storage -save "$OUT/storage-base.json"
step "run: warm-up $WARMUP + plan $DURATION at $RATE req/s" \
  "$LT" run -out "$OUT" -rate "$RATE" -warmup "$WARMUP" -duration "$DURATION" -pids "$ROOT/.run/pid"
if [ -f "$OUT/run.json" ]; then
  step "verify" "$LT" verify -in "$OUT" -wait 2m
  step "storage" "$LT" storage -out "$OUT" -rate "$RATE" -baseline "$OUT/storage-base.json"
fi

# The sweeps' top rates are beyond what the stack holds: the broker keeps
# what the consumers have not stored yet, and they catch up afterwards (the
# processor's aggregation last). A step measured while they do would be
# charged their catch-up CPU (and a fresh stack's warm-up would compete
# with it), so the sweeps and the steps after them first wait, at most
# DRAIN_TIMEOUT seconds, until two polls 2 s apart find the stored-event,
# aggregated-fact and audit-row counters unchanged while the aggregator
# kept completing runs (an aggregation that takes longer than a poll also
# leaves its counter unchanged).
drain_state() { # the work counters, then the aggregator's completed runs
  local name url
  for name in processor auditworker; do
    url="$(svc_url "$name")"
    [ -n "$url" ] && curl -fsS -m 5 "$url/metrics" 2>/dev/null
  done | grep -E '^(processor_events_stored_total|processor_facts_aggregated_total|auditworker_records_inserted_total|processor_aggregate_runs_total\{result="ok"\}) ' |
    sort -t' ' -k1,1 | awk '/aggregate_runs/ {runs = $2; next} {print} END {print "runs " runs}' || true
}
wait_drained() { # LABEL
  local prev="" cur work prevwork="" runs prevruns="" quiet=0 waited=0
  while [ "$waited" -lt "$DRAIN_TIMEOUT" ]; do
    cur="$(drain_state)"
    work="$(grep -v '^runs ' <<<"$cur" || true)"
    runs="$(sed -n 's/^runs //p' <<<"$cur")"
    if [ -n "$work" ] && [ "$work" = "$prevwork" ] && { [ -z "$runs" ] || [ "$runs" != "$prevruns" ]; }; then
      quiet=$((quiet + 1))
      if [ "$quiet" -ge 2 ]; then
        if [ "$waited" -gt 6 ]; then log "$1: the consumers caught up in ${waited}s"; fi
        return 0
      fi
    else
      quiet=0
    fi
    prevwork="$work" prevruns="$runs"
    sleep 2
    waited=$((waited + 2))
  done
  log "$1: the consumers were still busy after ${DRAIN_TIMEOUT}s; going on"
}

# The broker is a JVM: its hot paths are compiled during the first minutes
# of real load, and a cold one stalls for hundreds of milliseconds now and
# then. Warm it (and the caches) at a high rate first; not counted.
sweep_warmup() { # DIR
  "$LT" run -quiet -out "$1" -rate "$SWEEP_WARMUP_RATE" -warmup 0s -duration "$SWEEP_WARMUP" -pids ""
}
# SWEEP_FRESH=1: the whole stack stopped and started again (its data and
# .run/env kept; services rebuilt from the tree), then the collector awaited.
restart_stack() { # LOG
  bash scripts/stack.sh down >>"$1" 2>&1 || return 1
  bash scripts/stack.sh up >>"$1" 2>&1 || return 1
  local i
  for i in $(seq 1 60); do
    curl -fsS -m 2 -o /dev/null "$COLLECTOR_URL/healthz" 2>/dev/null && return 0
    sleep 1
  done
  log "collector not answering at $COLLECTOR_URL after the restart"
  return 1
}
sweep_n() { # N: sweep N into $OUT/sweep-N, after a restart and warm-up when SWEEP_FRESH is set
  local i="$1" fresh=()
  wait_drained "sweep $i"
  if [ -n "$SWEEP_FRESH" ]; then
    log "sweep $i: restarting the stack (log in ${OUT#"$ROOT"/}/stack-restart-$i.log)"
    restart_stack "$OUT/stack-restart-$i.log" || { log "sweep $i: restart failed, see the log"; return 1; }
    log "sweep $i: warm-up $SWEEP_WARMUP at $SWEEP_WARMUP_RATE req/s (not counted)"
    sweep_warmup "$OUT/sweep-$i-warmup" || return 1
    fresh=(-fresh)
  fi
  "$LT" sweep -out "$OUT/sweep-$i" -rates "$SWEEP_RATES" -step "$SWEEP_STEP" -step-warmup 2s -pause 3s "${fresh[@]}" || return 1
  verify_sweep "$OUT/sweep-$i" "sweep $i"
}
# A sweep's top rates are past what the stack holds, where a lost event
# would show first: every id a sweep got back with a 202 is looked up, once
# the consumers caught up and before the next sweep's restart and warm-up.
# The rollups are compared with count(*) once, after the run: that reads
# every stored event (minutes on a database of millions).
verify_sweep() { # DIR LABEL
  wait_drained "$2: verify"
  "$LT" verify -of sweep -in "$1" -wait 2m -rollups=false >/dev/null
}
if [ -z "${SKIP_SWEEP:-}" ]; then
  if [ -z "$SWEEP_FRESH" ]; then
    step "sweep warm-up: $SWEEP_WARMUP at $SWEEP_WARMUP_RATE req/s (not counted)" sweep_warmup "$OUT/sweep-warmup"
  fi
  if [ "$SWEEPS" -le 1 ] && [ -z "$SWEEP_FRESH" ]; then
    wait_drained "sweep"
    step "sweep $SWEEP_RATES ($SWEEP_STEP each)" "$LT" sweep -out "$OUT" -rates "$SWEEP_RATES" -step "$SWEEP_STEP" -step-warmup 2s -pause 3s
    step "sweep: verify its accepted ids" verify_sweep "$OUT" "sweep"
  else
    # Each sweep in its own directory; the first is also the page's main one.
    for i in $(seq 1 "$SWEEPS"); do
      step "sweep $i of $SWEEPS${SWEEP_FRESH:+ (fresh stack)}: $SWEEP_RATES ($SWEEP_STEP each)" sweep_n "$i"
      [ -n "$SWEEP_FRESH" ] || sleep 3
    done
    for f in sweep.json sweep.csv sweep.svg sweep.md; do
      if [ -f "$OUT/sweep-1/$f" ]; then cp "$OUT/sweep-1/$f" "$OUT/$f"; fi
    done
  fi
fi

# ------------------------------------------------------------------ CPU per request
# Whole-machine and per-process CPU per accepted request at CPU_RATES and
# at the sweep's highest held rate, requests per broker message, and CPU
# profiles of the collector, audit logger, processor and audit worker at
# CPU_PROFILE_RATE, drawn as flame graphs beside the page.
# The audit logger only carries refused requests' records (an accepted
# request's record travels in the collector's broker transaction), so the
# consumers are profiled beside it; addresses from `stack.sh status`.
PROFILED="collector auditlogger processor auditworker"
cpu() {
  local held=() profs=() name url f
  wait_drained "cpu"
  [ -f "$OUT/sweep.json" ] && held=(-sweep "$OUT/sweep.json")
  for name in $PROFILED; do
    url="$(svc_url "$name")"
    if [ -n "$url" ]; then profs+=("$name=$url"); fi
  done
  [ "${#profs[@]}" -gt 0 ] || profs=(none)
  "$LT" cpu -quiet -out "$OUT" -label "$CPU_LABEL" -rates "$CPU_RATES" "${held[@]}" -step "$CPU_STEP" -repeat "$CPU_REPEAT" -step-warmup 5s -pause 3s \
    -pids "$ROOT/.run/pid" -profile "$(IFS=,; echo "${profs[*]}")" \
    -profile-rate "$CPU_PROFILE_RATE" -profile-seconds "$CPU_PROFILE_SECONDS" || return 1
  for name in $PROFILED; do
    f="$OUT/$name-$CPU_PROFILE_RATE.pprof"
    if [ -f "$f" ]; then
      "$LT" flame -in "$f" -o "$(dirname "$PAGE")/flame-$name.svg" \
        -title "$name: CPU at $CPU_PROFILE_RATE req/s ($CPU_PROFILE_SECONDS s profile, make bench)" || return 1
    else
      log "no $name profile (is HTTP_PPROF=true set for it?)"
    fi
  done
}
if [ -z "${SKIP_CPU:-}" ]; then step "cpu $CPU_RATES ($CPU_STEP each), profiles at $CPU_PROFILE_RATE req/s" cpu; fi
if [ -z "${SKIP_USERS:-}" ]; then
  wait_drained "users"
  step "users $USERS_LEVELS ($USERS_STEP each)" "$LT" users -out "$OUT" -users "$USERS_LEVELS" -duration "$USERS_STEP" -pause 2s
fi

# ------------------------------------------------------------------ audit overhead
# A second collector, same binary and settings but AUDITLOGGER_SERVICE_URL
# blank, on its own port; started here and stopped by its pid on exit.
# The reference's bulk load (1,000,000 records from 100 concurrent senders)
# takes a few minutes more: BULK=1 make bench (BULK_COUNT for fewer).
if [ -n "${BULK:-}" ]; then
  step "bulk: ${BULK_COUNT:-1000000} records, 100 senders" "$LT" bulk -out "$OUT" -count "${BULK_COUNT:-1000000}" -users 100
fi

NOAUDIT_PID=""
stop_noaudit() {
  if [ -n "$NOAUDIT_PID" ] && kill -0 "$NOAUDIT_PID" 2>/dev/null; then
    kill -TERM "$NOAUDIT_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$NOAUDIT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NOAUDIT_PID" 2>/dev/null || true
  fi
  NOAUDIT_PID=""
}
trap stop_noaudit EXIT

overhead() {
  wait_drained "overhead"
  [ -x .run/bin/collector ] || { log "no .run/bin/collector (make up builds it)"; return 1; }
  if curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$NOAUDIT_PORT/healthz" 2>/dev/null; then
    log "port $NOAUDIT_PORT is taken; set NOAUDIT_PORT"; return 1
  fi
  (
    export HTTP_ADDR="127.0.0.1:$NOAUDIT_PORT" AUDITLOGGER_SERVICE_URL="" LOG_LEVEL=warn
    export TOKENS_SERVICE_URL="${THREATVIEW_TOKENS_URL:-http://127.0.0.1:8083}"
    export COLLECTOR_TRUSTED_PROXIES="${COLLECTOR_TRUSTED_PROXIES:-127.0.0.1/32}"
    exec .run/bin/collector
  ) </dev/null >>"$OUT/collector-noaudit.log" 2>&1 &
  NOAUDIT_PID=$!
  local i
  for i in $(seq 1 100); do
    curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$NOAUDIT_PORT/healthz" 2>/dev/null && break
    kill -0 "$NOAUDIT_PID" 2>/dev/null || { tail -n 20 "$OUT/collector-noaudit.log" >&2; return 1; }
    sleep 0.1
  done
  local r=0
  "$LT" overhead -out "$OUT" -off-url "http://127.0.0.1:$NOAUDIT_PORT" \
    -rate "$OVERHEAD_RATE" -users "$OVERHEAD_USERS" -duration "$OVERHEAD_STEP" -warmup 3s || r=$?
  stop_noaudit
  return "$r"
}
if [ -z "${SKIP_OVERHEAD:-}" ]; then step "overhead: audit on vs off" overhead; fi

# ------------------------------------------------------------------ ceilings
# What PostgreSQL takes in at most (BenchmarkCopyCeiling: COPY of
# processor-shaped rows in 2,000-row transactions) beside how fast the
# processor drains a backlog while live traffic runs (TestDrainBesideLiveTraffic:
# DRAIN_EVENTS queued with the processor stopped, then drained beside 500
# req/s), how large a backlog the broker holds (TestBacklogCapacity: a broker
# of its own with CAPACITY_STORE of store, filled until it refuses), and how
# fast valid apps get 202s after a cold restart of the collector (the
# cold-start fault test), and the write path with one and two shards
# (BenchmarkStore_Drain, SHARD_BENCH_EVENTS). The page quotes the figures these print.
# CEILINGS_DRAIN=1 also runs the 1.5 GB backlog fault test.
ceilings() {
  local ok=0
  (cd e2e && THREATVIEW_DRAIN_EVENTS="${DRAIN_EVENTS:-250000}" go test -tags fault -count=1 -timeout 30m -v \
    -run 'TestDrainBesideLiveTraffic$' ./fault/) >"$OUT/drain.log" 2>&1 || ok=1
  (cd loadtest && THREATVIEW_COPY_CEILING_URL="${EVENTS_DATABASE_URL:-}" go test -count=1 -run '^$' -bench CopyCeiling -benchtime 1x ./storage/) >"$OUT/copy-ceiling.log" 2>&1 || ok=1
  # The write path alone, 1 vs 2 shards (two writers on disjoint apps, as
  # two processors on two queues), v7 and v4 ids: BenchmarkStore_Drain.
  (cd services/processor && THREATVIEW_DRAIN_BENCH_EVENTS="${SHARD_BENCH_EVENTS:-60000}" go test -count=1 -run '^$' -bench 'Store_Drain' -benchtime 1x ./postgres/) >"$OUT/shards.log" 2>&1 || ok=1
  (cd e2e && THREATVIEW_CAPACITY_STORE="${CAPACITY_STORE:-1 gb}" go test -tags fault -count=1 -timeout 20m -v \
    -run 'TestBacklogCapacity$' ./fault/) >"$OUT/capacity.log" 2>&1 || ok=1
  (cd e2e && go test -tags fault -count=1 -timeout 10m -v -run 'TestFault_ColdStartValidTokens$' ./fault/) >"$OUT/coldstart.log" 2>&1 || ok=1
  if [ -n "${CEILINGS_DRAIN:-}" ]; then
    (cd e2e && go test -tags fault -count=1 -timeout 30m -v -run 'TestFaultBacklogBufferedOnDisk$' ./fault/) >"$OUT/backlog.log" 2>&1 || ok=1
  fi
  { grep -hE '^BenchmarkCopyCeiling' "$OUT/copy-ceiling.log" || true
    grep -hE '^BenchmarkStore_Drain' "$OUT/shards.log" || true
    grep -hE '(processor stopped|drain|drain CPU per event|live traffic during the drain|exactly once|rollups exact|load average after the drain|backlog capacity|store full|backlog drained from the broker|cold start): ?' \
      "$OUT/drain.log" "$OUT/capacity.log" "$OUT/backlog.log" "$OUT/coldstart.log" 2>/dev/null |
      sed -E 's/^ *[a-z_]+_test\.go:[0-9]+: //' || true
    grep -hE -- '^--- (PASS|FAIL)' "$OUT/drain.log" "$OUT/capacity.log" "$OUT/backlog.log" "$OUT/coldstart.log" 2>/dev/null || true
  } >"$OUT/ceilings.txt"
  return "$ok"
}
if [ -z "${SKIP_CEILINGS:-}" ]; then
  wait_drained "ceilings"
  step "ceilings: drain beside live traffic, COPY ceiling, backlog capacity, cold start${CEILINGS_DRAIN:+, 1.5 GB backlog}" ceilings
fi

# ------------------------------------------------------------------ analyst pages
# The analyst's pages' server time at scale (issue 40): BenchmarkAnalystPages
# seeds ANALYST_BENCH_EVENTS events into a database of its own and starts
# this tree's renderer and admin interface on it (the Go benchmarks step ran
# it at its small default). Its rows join the Go benchmarks' table; its log,
# with the load average, is analyst-pages.log.
analyst_pages() {
  (cd services/admininterface && INV_BENCH_EVENTS="$ANALYST_BENCH_EVENTS" go test -count=1 -run '^$' \
    -bench 'BenchmarkAnalystPages' -benchtime 1x -timeout 60m ./cmd/admininterface/) >"$OUT/analyst-pages.log" 2>&1 || return 1
  grep -E '^(pkg:|Benchmark)' "$OUT/analyst-pages.log" >>"$OUT/gobench.txt"
}
if [ -z "${SKIP_ANALYST:-}" ]; then
  wait_drained "analyst pages"
  step "analyst pages at $ANALYST_BENCH_EVENTS events" analyst_pages
fi

# ------------------------------------------------------------------ the page
# An earlier build's cpu.json (CPU_BEFORE) beside this one's: the page's
# "Before and after" table. Keep one with `cp BENCH_OUT/cpu.json
# docs/bench/cpu-before.json` before changing the code.
if [ -n "$CPU_BEFORE" ]; then
  if [ -f "$CPU_BEFORE" ]; then
    cp "$CPU_BEFORE" "$OUT/cpu-before.json"
    log "comparing CPU with $CPU_BEFORE"
  else
    log "warning: CPU_BEFORE=$CPU_BEFORE does not exist; no before/after table"
  fi
fi
# The guard: 105 req/s over 20 ms p95 in any sweep, or a highest held rate
# below the previous recorded run's by more than the noise, fails make bench
# loudly (after the page is written, so the page shows why).
trend_rc=0
if [ -z "${SKIP_SWEEP:-}" ]; then
  "$LT" trend -in "$OUT" -history docs/bench/history.json -label "$CPU_LABEL" >/dev/null || trend_rc=$?
fi
step "report -> $PAGE" "$LT" report -in "$OUT" -o "$PAGE"
if [ "$trend_rc" -ne 0 ]; then
  log "FAILED: the performance guard (see the trend at the end of $PAGE): 105 req/s over 20 ms p95, or the highest held rate fell past the noise"
  rc=1
fi
log "results (Markdown, CSV, JSON, SVG) in ${OUT#"$ROOT"/}"
exit "$rc"
