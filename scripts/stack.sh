#!/usr/bin/env bash
# Threat View local stack: private PostgreSQL, MariaDB and ActiveMQ instances plus the
# Go services, all under $ROOT/.run (git-ignored). Runs as root on Debian 12.
#
#   scripts/stack.sh install | infra-up | migrate | services-up | up | down | status | clean
#   scripts/stack.sh start|stop|restart|kill9 NAME   (postgres, mariadb, activemq, or a service)
#   scripts/stack.sh gotest [go test args]           (go test in every go.work module)
#   scripts/stack.sh fuzz                            (each Fuzz target for $FUZZTIME)
#   scripts/stack.sh fuzz-one MODULE_DIR PKG TARGET  (one Fuzz target for $FUZZTIME)
#   scripts/stack.sh fuzz-deadline-race <OUTPUT      (is a failed fuzz run only Go's deadline race?)
#
# Everything is idempotent: a second `infra-up` / `services-up` only checks and returns.
# Processes are only ever stopped through the pid files under .run/pid, never by name.
#
# Data-dir access for the postgres/mysql users: the databases run as their own system
# users, which must be able to traverse the path to their data dir. The repo may live
# somewhere those users cannot reach (a private home directory, say); we do not loosen permissions on
# directories we do not own. Instead, if `postgres` (or `mysql`) cannot traverse .run, or
# the Unix-socket path would exceed the kernel's ~107-byte limit, the data dir is created
# under /var/lib/threatview-dev/<hash of repo path>/NAME and .run/NAME is a symlink to it.
# `clean` removes both. Logs are opened by root (stdout/stderr redirection), so they stay
# in .run/log whatever the data-dir location.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
RUN="$ROOT/.run"
LOGDIR="$RUN/log"
PIDDIR="$RUN/pid"
BINDIR="$RUN/bin"
ENVFILE="$RUN/env"
SECRETS="$RUN/secrets"
FALLBACK_BASE="/var/lib/threatview-dev"

# Overridable only to run a second, throw-away stack next to the main one (script tests).
PG_PORT="${THREATVIEW_PG_PORT:-15432}"
MARIADB_PORT="${THREATVIEW_MARIADB_PORT:-13306}"
STOMP_PORT="${THREATVIEW_STOMP_PORT:-61663}"
OPENWIRE_PORT="${THREATVIEW_OPENWIRE_PORT:-61626}"
# The broker's JVM options (G1, the JVM's default here, measured against
# SerialGC: SerialGC's full collections stalled sends for over a second).
# Tiered compilation stays on: C1 only (-XX:TieredStopAtLevel=1) warms a
# fresh broker in about 5 s instead of 35 s but cost about 0.05 cores more
# under load, and held 2,000 req/s in no more fresh sweeps
# (docs/bench/README.md).
ACTIVEMQ_JAVA_OPTS="${ACTIVEMQ_JAVA_OPTS:--Xms256m -Xmx1g}"
LOOPBACK=127.0.0.1

# Service table: name|package dir|listen addr
# (start order: the audit logger first, since tokens and the collector audit through it)
SERVICES=(
  "auditlogger|./services/auditlogger/cmd/auditlogger|127.0.0.1:8081"
  "auditworker|./services/auditlogger/cmd/auditworker|127.0.0.1:8084"
  "identity|./services/identity/cmd/identity|127.0.0.1:8085"
  "tokens|./services/tokens/cmd/tokens|127.0.0.1:8083"
  "processor|./services/processor/cmd/processor|127.0.0.1:8082"
  "collector|./services/collector/cmd/collector|127.0.0.1:8080"
  "visualrenderer|./services/visualrenderer/cmd/visualrenderer|127.0.0.1:8086"
  "admininterface|./services/admininterface/cmd/admininterface|127.0.0.1:8087"
  "privacy|./services/retention/cmd/privacy|127.0.0.1:8088"
  "alerts|./services/alerts/cmd/alerts|127.0.0.1:8089"
)
INFRA=(postgres mariadb activemq)

export DEBIAN_FRONTEND=noninteractive
umask 022

# ---------------------------------------------------------------------------- helpers
log() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root"; }

tail_log() { # NAME
  local f="$LOGDIR/$1.log"
  if [ -e "$f" ]; then
    printf -- '----- last lines of %s -----\n' "${f#"$ROOT"/}" >&2
    tail -n 40 "$f" >&2 || true
    printf -- '-----\n' >&2
  fi
}

port_open() { # HOST PORT
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

read_pid() { # NAME -> pid or empty
  local f="$PIDDIR/$1.pid" p=""
  [ -f "$f" ] && read -r p <"$f" || true
  [[ "$p" =~ ^[0-9]+$ ]] && printf '%s' "$p" || true
}

# The process is alive and is not a zombie.
pid_alive() { # PID
  local p="$1" st
  [ -n "$p" ] && [ -d "/proc/$p" ] || return 1
  st="$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)"
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# Executable name (basename of /proc/PID/exe, without " (deleted)").
pid_exe() { local e; e="$(readlink "/proc/$1/exe" 2>/dev/null || true)"; e="${e% (deleted)}"; basename "${e:-?}"; }

expected_exe() { # NAME
  case "$1" in
    postgres) echo postgres ;;
    mariadb) basename "$(mariadbd_bin)" ;;
    activemq) echo java ;;
    *) echo "$1" ;;
  esac
}

# pid file exists, process alive, and it is the program we started (guards against pid reuse).
comp_running() { # NAME
  local p; p="$(read_pid "$1")"
  [ -n "$p" ] && pid_alive "$p" && [ "$(pid_exe "$p")" = "$(expected_exe "$1")" ]
}

children_of() { # PID -> direct children pids
  local d pp
  for d in /proc/[0-9]*; do
    pp="$(awk '{print $4}' "$d/stat" 2>/dev/null || true)"
    [ "$pp" = "$1" ] && echo "${d#/proc/}"
  done
  return 0
}

descendants_of() { local c; for c in $(children_of "$1"); do echo "$c"; descendants_of "$c"; done; }

wait_gone() { # PID SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do pid_alive "$1" || return 0; sleep 0.1; done
  return 1
}

# Gone from /proc entirely (a zombie is reaped by whoever inherited it; that may lag).
wait_reaped() { # PID SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ -d "/proc/$1" ] || return 0; sleep 0.1; done
  return 1
}

term_pid() { # PID NAME [SECONDS]
  local p="$1" name="$2" secs="${3:-20}"
  kill -TERM "$p" 2>/dev/null || true
  if ! wait_gone "$p" "$secs"; then
    log "$name (pid $p) did not stop within ${secs}s; sending SIGKILL"
    kill -KILL "$p" 2>/dev/null || true
    wait_gone "$p" 5 || die "$name (pid $p) survived SIGKILL"
  fi
}

# Run a command as a system user with cwd / (the user may not be able to read our cwd).
as_user() { # USER CMD...
  local u="$1"; shift
  (cd / && setpriv --reuid="$u" --regid="$u" --init-groups -- "$@")
}

user_can_reach() { # USER DIR
  as_user "$1" test -x "$2" 2>/dev/null
}

repo_hash() { printf '%s' "$ROOT" | sha256sum | cut -c1-12; }

# Create (once) the home dir for a database that runs as USER; echo its real path.
# See the header comment for the fallback rule.
comp_home() { # NAME USER SOCKNAME
  local name="$1" user="$2" sockname="$3" link="$RUN/$1" alt
  if [ -L "$link" ] || [ -d "$link" ]; then
    readlink -f "$link"; return
  fi
  alt="$FALLBACK_BASE/$(repo_hash)/$name"
  if user_can_reach "$user" "$RUN" && [ "${#link}" -lt $((100 - ${#sockname})) ]; then
    mkdir -p "$link"
    chown "$user:$user" "$link"; chmod 700 "$link"
    readlink -f "$link"
  else
    log "$user cannot reach $RUN (or socket path too long); using $alt (linked from .run/$name)"
    mkdir -p "$alt"; chmod 755 "$FALLBACK_BASE" "$FALLBACK_BASE/$(repo_hash)"
    chown "$user:$user" "$alt"; chmod 700 "$alt"
    printf '%s\n' "$ROOT" >"$FALLBACK_BASE/$(repo_hash)/REPO"
    ln -sfn "$alt" "$link"
    printf '%s' "$alt"
  fi
}

ensure_dirs() {
  mkdir -p "$RUN" "$LOGDIR" "$PIDDIR" "$BINDIR" "$RUN/geoip"
  chmod 755 "$RUN"
}

# ---------------------------------------------------------------------------- install
# gcc + libc6-dev: `go test -race` (make test) needs cgo.
# chromium + fonts-liberation: the dashboards' browser tests (chromedp drives
# /usr/bin/chromium headless; the fonts match the charts' Liberation Sans).
# rsyslog + rsyslog-openssl: the alerts service's syslog forwarding is tested
# against a private rsyslogd with TLS (services/alerts/internal/rsyslogtest).
# exim4-daemon-light: its email with STARTTLS against a private Exim
# (services/alerts/internal/eximtest).
# libxstream-java: the broker writes its statistics plugin's answers as XML with XStream
# (STOMP transformation jms-map-xml, read by the collector's broker_* metrics); Debian's
# activemq package does not ship it.
PKGS=(postgresql postgresql-contrib mariadb-server mariadb-client activemq libxstream-java curl gcc libc6-dev chromium fonts-liberation rsyslog rsyslog-openssl exim4-daemon-light)

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

cmd_install() {
  need_root
  local missing=() p
  for p in "${PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "packages present: ${PKGS[*]}"
    return 0
  fi
  log "installing: ${missing[*]}"
  # Keep the packages' own services from starting on their default ports: a policy-rc.d
  # that denies every start, only if none exists, removed afterwards.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made_policy=1
  fi
  local rc=0
  { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } || rc=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  [ "$rc" -eq 0 ] || die "apt-get failed (rc=$rc)"
}

# ---------------------------------------------------------------------------- secrets / env
rand_hex() { od -An -tx1 -N"${1:-24}" /dev/urandom | tr -d ' \n'; }

load_secrets() {
  ADMIN_KEY="" INTERNAL_KEY="" DEMO_TOKEN="" IDENTITY_SIGNING_KEY="" ADMIN_PASSWORD=""
  # shellcheck disable=SC1090
  [ -f "$SECRETS" ] && . "$SECRETS"
  return 0
}

save_secrets() {
  (umask 077; : >"$SECRETS.tmp")
  cat >"$SECRETS.tmp" <<EOF
ADMIN_KEY='$ADMIN_KEY'
INTERNAL_KEY='$INTERNAL_KEY'
DEMO_TOKEN='$DEMO_TOKEN'
IDENTITY_SIGNING_KEY='$IDENTITY_SIGNING_KEY'
ADMIN_PASSWORD='$ADMIN_PASSWORD'
EOF
  mv -f "$SECRETS.tmp" "$SECRETS"
}

ensure_secrets() {
  load_secrets
  local changed=0
  [ -n "$ADMIN_KEY" ] || { ADMIN_KEY="$(rand_hex 24)"; changed=1; }
  [ -n "$INTERNAL_KEY" ] || { INTERNAL_KEY="$(rand_hex 24)"; changed=1; }
  # The identity service's Ed25519 seed and the first admin person's password.
  [ -n "$IDENTITY_SIGNING_KEY" ] || { IDENTITY_SIGNING_KEY="$(rand_hex 32)"; changed=1; }
  [ -n "$ADMIN_PASSWORD" ] || { ADMIN_PASSWORD="$(rand_hex 16)"; changed=1; }
  [ "$changed" = 0 ] || save_secrets
}

pg_bin() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
  [ -n "$d" ] && [ -x "$d/postgres" ] || die "no PostgreSQL found under /usr/lib/postgresql/*/bin (run: $0 install)"
  printf '%s' "$d"
}

mariadbd_bin() {
  local b
  for b in /usr/sbin/mariadbd /usr/sbin/mysqld; do [ -x "$b" ] && { echo "$b"; return; }; done
  die "mariadbd not found (run: $0 install)"
}

write_env() {
  ensure_secrets
  local pgb; pgb="$(pg_bin)"
  cat >"$ENVFILE.tmp" <<EOF
# Generated by scripts/stack.sh; do not edit (rewritten on every infra-up/services-up).
export THREATVIEW_ROOT='$ROOT'
export THREATVIEW_COLLECTOR_URL='http://127.0.0.1:8080'
export THREATVIEW_TOKENS_URL='http://127.0.0.1:8083'
export THREATVIEW_AUDIT_URL='http://127.0.0.1:8081'
export THREATVIEW_ADMIN_KEY='$ADMIN_KEY'
export THREATVIEW_INTERNAL_KEY='$INTERNAL_KEY'
export ADMIN_KEY='$ADMIN_KEY'
export INTERNAL_KEY='$INTERNAL_KEY'
export THREATVIEW_DEMO_APP='demo-app'
export THREATVIEW_DEMO_TOKEN='$DEMO_TOKEN'
export EVENTS_DATABASE_URL='postgres://threatview:threatview@127.0.0.1:$PG_PORT/threatview?sslmode=disable'
export AUDIT_DATABASE_DSN='threatview:threatview@tcp(127.0.0.1:$MARIADB_PORT)/audit?parseTime=true'
export TOKENS_DATABASE_DSN='threatview:threatview@tcp(127.0.0.1:$MARIADB_PORT)/tokens?parseTime=true'
export IDENTITY_DATABASE_DSN='threatview:threatview@tcp(127.0.0.1:$MARIADB_PORT)/identity?parseTime=true'
export STOMP_ADDR='127.0.0.1:$STOMP_PORT'
export GEOIP_DB_PATH='$RUN/geoip/test.mmdb'
export PG_BIN='$pgb'
EOF
  # Services that exist in this checkout add their URL.
  if [ -d "$ROOT/services/identity" ]; then
    printf "export THREATVIEW_IDENTITY_URL='http://127.0.0.1:8085'\nexport THREATVIEW_ADMIN_USER='admin'\nexport THREATVIEW_ADMIN_PASSWORD='%s'\n" "$ADMIN_PASSWORD" >>"$ENVFILE.tmp"
  fi
  if [ -d "$ROOT/services/visualrenderer" ]; then echo "export THREATVIEW_RENDERER_URL='http://127.0.0.1:8086'" >>"$ENVFILE.tmp"; fi
  if [ -d "$ROOT/services/admininterface" ]; then echo "export THREATVIEW_ADMIN_UI_URL='http://127.0.0.1:8087'" >>"$ENVFILE.tmp"; fi
  if [ -d "$ROOT/services/alerts" ]; then echo "export THREATVIEW_ALERTS_URL='http://127.0.0.1:8089'" >>"$ENVFILE.tmp"; fi
  if [ -d "$ROOT/services/retention/cmd/privacy" ]; then echo "export THREATVIEW_PRIVACY_URL='http://127.0.0.1:8088'" >>"$ENVFILE.tmp"; fi
  # Each service's own database user (pg_service_roles, mdb_audit_users);
  # svc_env_exec gives each service its own.
  local r
  for r in processor alerts privacy; do
    printf "export THREATVIEW_%s_DATABASE_URL='postgres://threatview_%s:threatview_%s@127.0.0.1:%s/threatview?sslmode=disable'\n" \
      "${r^^}" "$r" "$r" "$PG_PORT" >>"$ENVFILE.tmp"
  done
  for r in auditlogger auditworker privacy auditverify; do
    printf "export THREATVIEW_%s_AUDIT_DATABASE_DSN='threatview_%s:threatview_%s@tcp(127.0.0.1:%s)/audit?parseTime=true'\n" \
      "${r^^}" "$r" "$r" "$MARIADB_PORT" >>"$ENVFILE.tmp"
  done
  chmod 644 "$ENVFILE.tmp"
  mv -f "$ENVFILE.tmp" "$ENVFILE"
}

# ---------------------------------------------------------------------------- postgres
pg_home() { comp_home pg postgres "sock/.s.PGSQL.$PG_PORT"; }

pg_psql() { # as the postgres superuser over the private socket
  local home; home="$(pg_home)"
  PGOPTIONS='-c client_min_messages=warning' \
    as_user postgres "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$home/sock" -p "$PG_PORT" -U postgres "$@"
}

# threatview_ro: the visual renderer's role, SELECT on the facts schema
# only (rollups and the device-model dimension), now and for every table
# the migrations create later. The schema is made here if the migrations
# have not run yet (they create it IF NOT EXISTS, owned by threatview).
pg_readonly_role() { # idempotent; also run when postgres is already up
  pg_psql -d threatview <<'SQL' >/dev/null
SELECT 'CREATE ROLE threatview_ro LOGIN'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') \gexec
ALTER ROLE threatview_ro WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'threatview_ro';
CREATE SCHEMA IF NOT EXISTS facts AUTHORIZATION threatview;
GRANT CONNECT ON DATABASE threatview TO threatview_ro;
GRANT USAGE ON SCHEMA facts TO threatview_ro;
GRANT SELECT ON ALL TABLES IN SCHEMA facts TO threatview_ro;
ALTER DEFAULT PRIVILEGES FOR ROLE threatview IN SCHEMA facts GRANT SELECT ON TABLES TO threatview_ro;
SQL
}

# Least privilege (charts/threatview/README.md, "Least privilege"): the
# processor, alerts and privacy services log in as roles of their own, whose
# grants come from migration events 000091 (run after this; test databases
# migrated later get them too). Password = role name: a local stack only.
pg_service_roles() { # idempotent; also run when postgres is already up
  pg_psql -d threatview <<'SQL' >/dev/null
SELECT format('CREATE ROLE %I LOGIN', r) FROM unnest(ARRAY['threatview_processor', 'threatview_alerts', 'threatview_privacy']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
ALTER ROLE threatview_processor WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'threatview_processor';
ALTER ROLE threatview_alerts WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'threatview_alerts';
ALTER ROLE threatview_privacy WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'threatview_privacy';
GRANT CONNECT ON DATABASE threatview TO threatview_processor, threatview_alerts, threatview_privacy;
SQL
}

start_postgres() {
  local bin home data sock p i
  bin="$(pg_bin)"; home="$(pg_home)"; data="$home/data"; sock="$home/sock"
  if comp_running postgres && port_open "$LOOPBACK" "$PG_PORT"; then
    log "postgres already running (pid $(read_pid postgres))"; pg_readonly_role; pg_service_roles; return 0
  fi
  if ! comp_running postgres; then
    if [ ! -s "$data/PG_VERSION" ]; then
      log "postgres: initdb in ${data}"
      rm -rf "$data"
      install -d -o postgres -g postgres -m 700 "$data"
      as_user postgres "$bin/initdb" -D "$data" -U postgres -E UTF8 --locale=C \
        --auth-local=peer --auth-host=scram-sha-256 >>"$LOGDIR/postgres.log" 2>&1 ||
        { tail_log postgres; die "initdb failed"; }
      echo "include_if_exists = 'threatview.conf'" >>"$data/postgresql.conf"
    fi
    install -d -o postgres -g postgres -m 700 "$sock"
    if [ -f "$data/postmaster.pid" ]; then
      read -r p <"$data/postmaster.pid" || true
      if [[ "$p" =~ ^[0-9]+$ ]] && pid_alive "$p" && [ "$(pid_exe "$p")" = postgres ]; then
        # Running on our data dir but our pid file was lost: adopt it.
        log "postgres: adopting running postmaster (pid $p)"
        echo "$p" >"$PIDDIR/postgres.pid"
      elif [[ "$p" =~ ^[0-9]+$ ]] && ! wait_reaped "$p" 10; then
        # Dead but not yet reaped (zombie): postgres would take it for a live postmaster.
        log "postgres: removing stale postmaster.pid of dead pid $p"
        rm -f "$data/postmaster.pid"
      fi
    fi
  fi
  if ! comp_running postgres; then
    # Rewritten every start so config changes here take effect.
    cat >"$data/threatview.conf" <<EOF
# Managed by scripts/stack.sh
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sock'
max_connections = 200
# The current month's keys of events.events and facts.facts stay cached
# (docs/scaling.md, "PostgreSQL memory"): 2 GB of this 24 GiB box.
shared_buffers = 2GB
shared_preload_libraries = 'pg_stat_statements'
password_encryption = 'scram-sha-256'
# Durability is a promise: never turn these off.
fsync = on
synchronous_commit = on
full_page_writes = on
# Fewer, spread-out checkpoints: their fsyncs share the disk with the
# broker's journal, and a burst of them stalls persistent sends.
max_wal_size = 4GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
log_checkpoints = on
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_duration_statement = 1000
EOF
    chown postgres:postgres "$data/threatview.conf"
    log "postgres: starting on $LOOPBACK:$PG_PORT"
    # setpriv execs (no fork), so $! is the postmaster; the log fd is opened by root.
    (cd / && close_fds && exec nohup setpriv --reuid=postgres --regid=postgres --init-groups -- \
      "$bin/postgres" -D "$data" </dev/null >>"$LOGDIR/postgres.log" 2>&1) &
    echo $! >"$PIDDIR/postgres.pid"
  fi
  p="$(read_pid postgres)"
  for ((i = 0; i < 600; i++)); do
    pid_alive "$p" || { tail_log postgres; die "postgres exited during startup"; }
    if "$bin/pg_isready" -q -h "$LOOPBACK" -p "$PG_PORT" 2>/dev/null; then break; fi
    sleep 0.1
  done
  "$bin/pg_isready" -q -h "$LOOPBACK" -p "$PG_PORT" || { tail_log postgres; die "postgres not ready after 60s"; }
  # Idempotent bootstrap.
  pg_psql -d postgres <<'EOF' >/dev/null
SELECT 'CREATE ROLE threatview LOGIN CREATEDB'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview') \gexec
ALTER ROLE threatview WITH LOGIN CREATEDB PASSWORD 'threatview';
SELECT 'CREATE DATABASE threatview OWNER threatview'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'threatview') \gexec
EOF
  pg_psql -d threatview -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null
  pg_readonly_role
  pg_service_roles
  log "postgres ready (pid $p)"
}

stop_postgres() {
  local p home; p="$(read_pid postgres)"
  if [ -z "$p" ]; then log "postgres: not running (no pid file)"; return 0; fi
  if comp_running postgres; then
    home="$(readlink -f "$RUN/pg")"
    log "postgres: pg_ctl stop -m fast (pid $p)"
    as_user postgres "$(pg_bin)/pg_ctl" stop -D "$home/data" -m fast -w -t 60 >/dev/null 2>&1 ||
      term_pid "$p" postgres 30
    wait_gone "$p" 10 || term_pid "$p" postgres 10
  fi
  rm -f "$PIDDIR/postgres.pid"
}

# ---------------------------------------------------------------------------- mariadb
mariadb_home() { comp_home mariadb mysql "mysqld.sock"; }

mdb_root() { # SQL via the private socket as root (unix_socket auth)
  local home; home="$(mariadb_home)"
  mariadb --no-defaults -uroot --socket="$home/mysqld.sock" "$@"
}

start_mariadb() {
  local home data p i bin
  bin="$(mariadbd_bin)"; home="$(mariadb_home)"; data="$home/data"
  if comp_running mariadb && port_open "$LOOPBACK" "$MARIADB_PORT"; then
    log "mariadb already running (pid $(read_pid mariadb))"; return 0
  fi
  if ! comp_running mariadb; then
    if [ ! -d "$data/mysql" ]; then
      log "mariadb: mariadb-install-db in ${data}"
      rm -rf "$data"
      install -d -o mysql -g mysql -m 700 "$data"
      (cd / && mariadb-install-db --no-defaults --datadir="$data" --user=mysql \
        --auth-root-authentication-method=socket --skip-test-db) >>"$LOGDIR/mariadb.log" 2>&1 ||
        { tail_log mariadb; die "mariadb-install-db failed"; }
    fi
    log "mariadb: starting on $LOOPBACK:$MARIADB_PORT"
    # No --log-error: the error log goes to stderr, which root redirects into .run/log,
    # so it works even when the mysql user cannot write there (see header).
    (cd / && close_fds && exec nohup "$bin" --no-defaults \
      --datadir="$data" --socket="$home/mysqld.sock" --pid-file="$home/mariadbd.pid" \
      --port="$MARIADB_PORT" --bind-address="$LOOPBACK" --user=mysql \
      --innodb-buffer-pool-size=256M --max-allowed-packet=64M --skip-name-resolve \
      --max-connections=300 --character-set-server=utf8mb4 \
      --innodb-flush-log-at-trx-commit=1 --sync-binlog=1 \
      </dev/null >>"$LOGDIR/mariadb.log" 2>&1) &
    echo $! >"$PIDDIR/mariadb.pid"
  fi
  p="$(read_pid mariadb)"
  for ((i = 0; i < 600; i++)); do
    pid_alive "$p" || { tail_log mariadb; die "mariadb exited during startup"; }
    if [ -S "$home/mysqld.sock" ] && port_open "$LOOPBACK" "$MARIADB_PORT" &&
      mdb_root -e 'SELECT 1' >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  mdb_root -e 'SELECT 1' >/dev/null 2>&1 || { tail_log mariadb; die "mariadb not ready after 60s"; }
  mdb_root <<'EOF'
CREATE USER IF NOT EXISTS 'threatview'@'%' IDENTIFIED BY 'threatview';
CREATE USER IF NOT EXISTS 'threatview'@'127.0.0.1' IDENTIFIED BY 'threatview';
CREATE USER IF NOT EXISTS 'threatview'@'localhost' IDENTIFIED BY 'threatview';
ALTER USER 'threatview'@'%' IDENTIFIED BY 'threatview';
ALTER USER 'threatview'@'127.0.0.1' IDENTIFIED BY 'threatview';
ALTER USER 'threatview'@'localhost' IDENTIFIED BY 'threatview';
GRANT ALL PRIVILEGES ON *.* TO 'threatview'@'%' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'threatview'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'threatview'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS audit CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS tokens CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE DATABASE IF NOT EXISTS identity CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
EOF
  log "mariadb ready (pid $p)"
}

stop_mariadb() { stop_by_pidfile mariadb 60; }

# ---------------------------------------------------------------------------- activemq
AMQ_HOME=/usr/share/activemq

start_activemq() {
  local base="$RUN/activemq" p i tmpl="$ROOT/deploy/activemq/activemq.xml"
  if comp_running activemq && port_open "$LOOPBACK" "$STOMP_PORT"; then
    log "activemq already running (pid $(read_pid activemq))"; return 0
  fi
  [ -f "$AMQ_HOME/bin/activemq.jar" ] || die "ActiveMQ not installed at $AMQ_HOME (run: $0 install)"
  command -v java >/dev/null || die "java not found (run: $0 install)"
  if ! comp_running activemq; then
    mkdir -p "$base/conf" "$base/data" "$base/tmp" "$base/lib"
    # $base/lib is on the broker's classpath (activemq.base): XStream for jms-map-xml.
    [ -f /usr/share/java/xstream.jar ] && ln -sfn /usr/share/java/xstream.jar "$base/lib/xstream.jar"
    sed -e "s/@STOMP_PORT@/$STOMP_PORT/g" -e "s/@OPENWIRE_PORT@/$OPENWIRE_PORT/g" \
      "$tmpl" >"$base/conf/activemq.xml"
    # Debian's ActiveMQ 5.17 logs through log4j 1.2 (slf4j-log4j12), so a log4j.properties
    # (not log4j2) is what it reads. Console only: stdout goes to .run/log/activemq.log.
    cat >"$base/conf/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, console
log4j.logger.org.apache.activemq.spring=WARN
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} | %-5p | %m | %c | %t%n
EOF
    log "activemq: starting (STOMP $LOOPBACK:$STOMP_PORT, OpenWire $LOOPBACK:$OPENWIRE_PORT)"
    # shellcheck disable=SC2086
    (cd "$base" && close_fds && exec nohup java $ACTIVEMQ_JAVA_OPTS \
      -Djava.io.tmpdir="$base/tmp" \
      -Dlog4j.configuration="file:$base/conf/log4j.properties" \
      -Dactivemq.home="$AMQ_HOME" -Dactivemq.base="$base" \
      -Dactivemq.conf="$base/conf" -Dactivemq.data="$base/data" \
      -jar "$AMQ_HOME/bin/activemq.jar" start "xbean:file:$base/conf/activemq.xml" \
      </dev/null >>"$LOGDIR/activemq.log" 2>&1) &
    echo $! >"$PIDDIR/activemq.pid"
  fi
  p="$(read_pid activemq)"
  for ((i = 0; i < 120; i++)); do
    pid_alive "$p" || { tail_log activemq; die "activemq exited during startup"; }
    if stomp_ping; then break; fi
    sleep 0.5
  done
  stomp_ping || { tail_log activemq; die "activemq STOMP not answering after 60s"; }
  log "activemq ready (pid $p)"
}

stomp_ping() { # CONNECT and expect CONNECTED
  local out
  out="$(printf 'CONNECT\naccept-version:1.2\nhost:/\n\n\0' | timeout 3 bash -c \
    "exec 3<>/dev/tcp/$LOOPBACK/$STOMP_PORT || exit 1; cat >&3; head -c 9 <&3" 2>/dev/null || true)"
  [ "$out" = CONNECTED ]
}

stop_activemq() { stop_by_pidfile activemq 60; }

# A daemon keeps none of its starter's descriptors beyond 0-2: one started by
# `flock /tmp/threatview-disruptive.lock scripts/stack.sh ...` would otherwise hold
# the lock for as long as it runs, and every later flock would wait forever.
close_fds() {
  local f n
  for f in /proc/$BASHPID/fd/*; do
    n="${f##*/}"
    if [[ "$n" =~ ^[0-9]+$ ]] && ((n > 2 && n != 255)); then eval "exec $n>&-" 2>/dev/null || true; fi
  done
}

# ---------------------------------------------------------------------------- generic stop
stop_by_pidfile() { # NAME SECONDS
  local name="$1" p; p="$(read_pid "$name")"
  if [ -z "$p" ]; then log "$name: not running (no pid file)"; return 0; fi
  if comp_running "$name"; then
    log "$name: stopping (pid $p)"
    term_pid "$p" "$name" "${2:-20}"
  else
    log "$name: stale pid file (pid $p not ours/alive)"
  fi
  rm -f "$PIDDIR/$name.pid" "$PIDDIR/$name.sum"
}

kill9_comp() { # NAME: simulate a crash (the process and its descendants)
  local name="$1" p d
  p="$(read_pid "$name")"
  comp_running "$name" || { log "$name: not running"; rm -f "$PIDDIR/$name.pid"; return 0; }
  d="$(descendants_of "$p" | tr '\n' ' ')"
  log "$name: SIGKILL pid $p ${d:+(and children $d)}"
  kill -KILL "$p" $d 2>/dev/null || true
  wait_gone "$p" 5 || die "$name (pid $p) survived SIGKILL"
  wait_reaped "$p" 5 || true
  rm -f "$PIDDIR/$name.pid" "$PIDDIR/$name.sum"
}

# ---------------------------------------------------------------------------- services
svc_field() { # NAME FIELD(1..3)
  local row n pkg addr; for row in "${SERVICES[@]}"; do
    IFS='|' read -r n pkg addr <<<"$row"
    if [ "$n" = "$1" ]; then case "$2" in 1) echo "$n" ;; 2) echo "$pkg" ;; 3) echo "$addr" ;; esac; return 0; fi
  done
  return 1
}

is_service() { svc_field "$1" 1 >/dev/null; }
svc_exists() { [ -d "$ROOT/$(svc_field "$1" 2)" ]; }

present_services() {
  local row n pkg addr
  for row in "${SERVICES[@]}"; do
    IFS='|' read -r n pkg addr <<<"$row"
    [ -d "$ROOT/$pkg" ] && echo "$n"
  done
  return 0
}

build_services() { # NAMES...
  [ "$#" -gt 0 ] || return 0
  local pkgs=() n
  for n in "$@"; do pkgs+=("$(svc_field "$n" 2)"); done
  log "go build -o .run/bin/ ${pkgs[*]}"
  (cd "$ROOT" && go build -o "$BINDIR/" "${pkgs[@]}") || die "go build failed"
}

build_geoip() {
  local db="$RUN/geoip/test.mmdb"
  [ -d "$ROOT/services/collector/cmd/geoipgen" ] || return 0
  [ -s "$db" ] && return 0
  log "building geoipgen and writing .run/geoip/test.mmdb"
  (cd "$ROOT" && go build -o "$BINDIR/" ./services/collector/cmd/geoipgen) || die "go build geoipgen failed"
  "$BINDIR/geoipgen" -out "$db" || die "geoipgen failed"
}

svc_env_exec() { # NAME: exec the service binary with its environment (called in a subshell)
  local name="$1" addr; addr="$(svc_field "$name" 3)"
  # shellcheck disable=SC1090
  . "$ENVFILE"
  export HTTP_ADDR="$addr" LOG_LEVEL="${LOG_LEVEL:-info}"
  # One P per service, as the chart's 1-CPU limits give in a cluster. On a
  # 2-core machine shared with the databases and the broker, a second P mostly
  # spins looking for work and wakes threads: the collector, processor and
  # audit worker used 20-25% less CPU with 1, at the same p95 (docs/bench).
  export GOMAXPROCS="${STACK_GOMAXPROCS:-1}"
  # Each service's own database users (least privilege; the shared ones of
  # DESIGN.md stay in .run/env for tests and tools). An .run/env written
  # before these existed keeps the shared ones.
  case "$name" in
    processor) export EVENTS_DATABASE_URL="${THREATVIEW_PROCESSOR_DATABASE_URL:-$EVENTS_DATABASE_URL}" ;;
    alerts) export EVENTS_DATABASE_URL="${THREATVIEW_ALERTS_DATABASE_URL:-$EVENTS_DATABASE_URL}" ;; # alerts.sh: ALERTS_DATABASE_URL
    privacy)
      export EVENTS_DATABASE_URL="${THREATVIEW_PRIVACY_DATABASE_URL:-$EVENTS_DATABASE_URL}"
      export AUDIT_DATABASE_DSN="${THREATVIEW_PRIVACY_AUDIT_DATABASE_DSN:-$AUDIT_DATABASE_DSN}" ;;
    auditlogger) export AUDIT_DATABASE_DSN="${THREATVIEW_AUDITLOGGER_AUDIT_DATABASE_DSN:-$AUDIT_DATABASE_DSN}" ;;
    auditworker) export AUDIT_DATABASE_DSN="${THREATVIEW_AUDITWORKER_AUDIT_DATABASE_DSN:-$AUDIT_DATABASE_DSN}" ;;
  esac
  if [ "$name" = collector ] || [ "$name" = tokens ] || [ "$name" = visualrenderer ]; then
    if svc_exists auditlogger; then export AUDITLOGGER_SERVICE_URL="http://127.0.0.1:8081"
    else export AUDITLOGGER_SERVICE_URL=""; fi
  fi
  if [ "$name" = collector ]; then
    export TOKENS_SERVICE_URL="http://127.0.0.1:8083"
    export GEOIP_DB_PATH="$RUN/geoip/test.mmdb"
    # The load test sends client addresses in X-Forwarded-For from loopback.
    export COLLECTOR_TRUSTED_PROXIES="127.0.0.1/32"
  fi
  # User ids are pseudonymised under a key derived from the stack's secret:
  # the collector makes the pseudonyms, the renderer searches and the
  # privacy service erases by a raw id.
  if [ "$name" = collector ] || [ "$name" = visualrenderer ] || [ "$name" = privacy ]; then
    local user_keys; user_keys="k1:$(printf 'user-ids:%s' "$INTERNAL_KEY" | sha256sum | cut -c1-64)"
    case "$name" in
      collector) export COLLECTOR_USER_ID_KEYS="$user_keys" ;;
      visualrenderer) export RENDERER_USER_ID_KEYS="$user_keys" ;;
      privacy) export PRIVACY_USER_ID_KEYS="$user_keys" ;;
    esac
  fi
  # A service's own settings for the local stack, kept beside this script.
  if [ -f "$ROOT/scripts/svc/$name.sh" ]; then
    # shellcheck disable=SC1090
    . "$ROOT/scripts/svc/$name.sh"
  fi
  # Per-service overrides (e.g. the load test turns auditing off with
  # AUDITLOGGER_SERVICE_URL= in .run/collector.env), applied last.
  if [ -f "$RUN/$name.env" ]; then
    # shellcheck disable=SC1090
    set -a; . "$RUN/$name.env"; set +a
  fi
  cd "$ROOT"
  close_fds
  exec nohup "$BINDIR/$name" </dev/null >>"$LOGDIR/$name.log" 2>&1
}

wait_healthz() { # NAME
  local name="$1" addr p i; addr="$(svc_field "$name" 3)"; p="$(read_pid "$name")"
  for ((i = 0; i < 300; i++)); do
    pid_alive "$p" || { tail_log "$name"; die "$name exited during startup"; }
    if curl -fsS -o /dev/null -m 2 "http://$addr/healthz" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  tail_log "$name"; die "$name: GET http://$addr/healthz not 200 after 30s"
}

start_service() { # NAME (binary must exist)
  local name="$1" sum
  [ -x "$BINDIR/$name" ] || build_services "$name"
  sum="$(sha256sum "$BINDIR/$name" | cut -d' ' -f1)"
  if comp_running "$name"; then
    if [ "$(cat "$PIDDIR/$name.sum" 2>/dev/null || true)" = "$sum" ]; then
      wait_healthz "$name"
      log "$name already running (pid $(read_pid "$name"))"; return 0
    fi
    log "$name: binary changed; restarting"
    stop_by_pidfile "$name" 20
  fi
  [ "$name" = collector ] && build_geoip
  log "$name: starting on $(svc_field "$name" 3)"
  (svc_env_exec "$name") &
  echo $! >"$PIDDIR/$name.pid"
  echo "$sum" >"$PIDDIR/$name.sum"
  wait_healthz "$name"
  log "$name ready (pid $(read_pid "$name"))"
}

ensure_demo_token() {
  load_secrets
  [ -z "$DEMO_TOKEN" ] || return 0
  comp_running tokens || return 0
  local resp tok
  resp="$(curl -fsS -m 10 -X POST -H "Authorization: Bearer $ADMIN_KEY" \
    -H 'Content-Type: application/json' -d '{"app_id":"demo-app","name":"demo"}' \
    http://127.0.0.1:8083/v1/tokens)" || die "could not create the demo token at the tokens service"
  tok="$(printf '%s' "$resp" | sed -n 's/.*"token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')"
  [ -n "$tok" ] || die "tokens service answered without a token: $resp"
  DEMO_TOKEN="$tok"; save_secrets; write_env
  log "demo token created for demo-app"
}

cmd_services_up() {
  need_root; ensure_dirs; write_env
  local names=() n
  mapfile -t names < <(present_services)
  if [ "${#names[@]}" -eq 0 ]; then log "no services present yet"; return 0; fi
  build_services "${names[@]}"
  for n in "${names[@]}"; do
    start_service "$n"
    [ "$n" = tokens ] && ensure_demo_token
  done
  return 0
}

# ---------------------------------------------------------------------------- commands
cmd_infra_up() {
  need_root; ensure_dirs; write_env
  start_postgres
  start_mariadb
  start_activemq
}

cmd_migrate() {
  need_root; ensure_dirs
  if [ ! -d "$ROOT/migrations/cmd/migrate" ]; then log "no migrations/cmd/migrate yet; skipping"; return 0; fi
  [ -f "$ENVFILE" ] || write_env
  # A database added after this stack's MariaDB first started (start_mariadb
  # does not repeat its bootstrap on a running server).
  mdb_root -e 'CREATE DATABASE IF NOT EXISTS identity CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci' ||
    die "create database identity failed"
  (cd "$ROOT" && go build -o "$BINDIR/migrate" ./migrations/cmd/migrate) || die "go build migrate failed"
  log "migrate -db all"
  (set -a; . "$ENVFILE"; set +a; cd "$ROOT" && "$BINDIR/migrate" -db all) || die "migrate failed"
  pg_service_grants
  mdb_audit_users
}

# The grants of migration events 000091 again, as the owner: they reach only
# roles that existed when it ran, and a stack migrated before
# pg_service_roles made its roles has them only from here. Idempotent.
pg_service_grants() {
  { echo 'SET ROLE threatview;'; sed '/^-- +goose Down/,$d' "$ROOT/migrations/events/000091_service_roles.sql"; } |
    pg_psql -d threatview >/dev/null || die "grants of migration 000091 failed"
}

# Least privilege on the audit database (charts/threatview/README.md, "Least
# privilege"): one user per client with only its grants; password = user name
# (a local stack only). Idempotent; after the migrations, whose tables the
# table grants name.
mdb_audit_users() {
  local u h
  for u in auditlogger auditworker privacy auditverify; do
    for h in '%' 127.0.0.1 localhost; do
      mdb_root -e "CREATE USER IF NOT EXISTS 'threatview_$u'@'$h' IDENTIFIED BY 'threatview_$u';
        ALTER USER 'threatview_$u'@'$h' IDENTIFIED BY 'threatview_$u';" || die "create MariaDB user threatview_$u failed"
    done
  done
  for h in '%' 127.0.0.1 localhost; do
    mdb_root <<SQL || die "MariaDB grants failed"
GRANT SELECT ON audit.* TO 'threatview_auditlogger'@'$h';
GRANT SELECT, INSERT, UPDATE ON audit.* TO 'threatview_auditworker'@'$h';
GRANT ALTER, CREATE ON audit.audit_events TO 'threatview_auditworker'@'$h';
GRANT SELECT, UPDATE (body) ON audit.audit_events TO 'threatview_privacy'@'$h';
GRANT SELECT, INSERT, UPDATE, DELETE ON audit.archives TO 'threatview_privacy'@'$h';
GRANT SELECT ON audit.goose_db_version TO 'threatview_privacy'@'$h';
GRANT SELECT ON audit.* TO 'threatview_auditverify'@'$h';
SQL
  done
}

cmd_up() {
  cmd_install
  cmd_infra_up
  cmd_migrate
  cmd_services_up
  cmd_status
  load_secrets
  cat <<EOF

Threat View local stack is up (state in .run/, logs in .run/log/):
  postgres   127.0.0.1:$PG_PORT   db threatview (user/pass threatview)
  mariadb    127.0.0.1:$MARIADB_PORT   dbs audit, tokens, identity (user/pass threatview)
  activemq   STOMP 127.0.0.1:$STOMP_PORT (OpenWire 127.0.0.1:$OPENWIRE_PORT)
  collector :8080  auditlogger :8081  processor :8082  tokens :8083  auditworker :8084
  identity :8085  visualrenderer :8086  admininterface :8087  privacy :8088  alerts :8089

Admin interface: http://127.0.0.1:8087 (sign in as the first admin person below)
Dashboards:      http://127.0.0.1:8086 (or through the admin interface)
First admin person: admin on identity :8085 (password in .run/env as THREATVIEW_ADMIN_PASSWORD)
Demo app: demo-app, token ${DEMO_TOKEN:-(not created: is the tokens service up?)}
(also in .run/env as THREATVIEW_DEMO_APP and THREATVIEW_DEMO_TOKEN)

Post an event:
  . .run/env && curl -sS -X POST "\$THREATVIEW_COLLECTOR_URL/v1/events" -H "Authorization: Bearer \$THREATVIEW_DEMO_TOKEN" -H 'Content-Type: application/json' -d '{"type":"app.startup","app":{"id":"demo-app","version":"1.0.0"},"device":{"model":"Pixel 8","manufacturer":"Google","os":"android","os_version":"14"},"threats":[]}'
EOF
}

all_names() { printf '%s\n' "${INFRA[@]}"; local row n pkg addr; for row in "${SERVICES[@]}"; do IFS='|' read -r n pkg addr <<<"$row"; echo "$n"; done; }

cmd_down() {
  local row n pkg addr i svcs=()
  for row in "${SERVICES[@]}"; do IFS='|' read -r n pkg addr <<<"$row"; svcs+=("$n"); done
  # Services first (reverse order: collector before its dependencies), then infrastructure.
  for ((i = ${#svcs[@]} - 1; i >= 0; i--)); do stop_comp "${svcs[$i]}"; done
  # The test S3 server (scripts/s3.sh), when it was started.
  [ -f "$ROOT/scripts/s3.sh" ] && bash "$ROOT/scripts/s3.sh" stop >/dev/null 2>&1 || true
  stop_comp activemq
  stop_comp mariadb
  stop_comp postgres
}

comp_addr() {
  case "$1" in
    postgres) echo "127.0.0.1:$PG_PORT" ;;
    mariadb) echo "127.0.0.1:$MARIADB_PORT" ;;
    activemq) echo "stomp://127.0.0.1:$STOMP_PORT" ;;
    *) echo "http://$(svc_field "$1" 3)" ;;
  esac
}

cmd_status() {
  local n p st
  while read -r n; do
    if is_service "$n" && ! svc_exists "$n" && [ -z "$(read_pid "$n")" ]; then
      printf '%-12s %-8s %-10s %s\n' "$n" - absent "$(comp_addr "$n")"; continue
    fi
    p="$(read_pid "$n")"
    if comp_running "$n"; then st=running; else st=stopped; fi
    printf '%-12s %-8s %-10s %s\n' "$n" "${p:--}" "$st" "$(comp_addr "$n")"
  done < <(all_names)
}

start_comp() {
  need_root; ensure_dirs; write_env
  case "$1" in
    postgres) start_postgres ;;
    mariadb) start_mariadb ;;
    activemq) start_activemq ;;
    *)
      is_service "$1" || die "unknown component: $1"
      svc_exists "$1" || die "$1: $(svc_field "$1" 2) does not exist"
      start_service "$1"
      [ "$1" = tokens ] && ensure_demo_token
      ;;
  esac
  return 0
}

stop_comp() {
  case "$1" in
    postgres) stop_postgres ;;
    mariadb) stop_mariadb ;;
    activemq) stop_activemq ;;
    *) is_service "$1" || die "unknown component: $1"; stop_by_pidfile "$1" 20 ;;
  esac
}

cmd_clean() {
  cmd_down
  local alt="$FALLBACK_BASE/$(repo_hash)"
  [ -d "$alt" ] && rm -rf "$alt"
  rmdir "$FALLBACK_BASE" 2>/dev/null || true
  rm -rf "$RUN"
  log "removed .run"
}

go_modules() { # module dirs of the workspace (or every go.mod if there is no go.work)
  if [ -f "$ROOT/go.work" ]; then
    if ! (cd "$ROOT" && go list -m -f '{{.Dir}}'); then
      log "warning: go list -m failed in workspace mode; falling back to every go.mod"
      find "$ROOT" -name go.mod -not -path '*/.run/*' -not -path '*/vendor/*' -printf '%h\n' | sort
    fi
  else
    find "$ROOT" -name go.mod -not -path '*/.run/*' -not -path '*/vendor/*' -printf '%h\n' | sort
  fi
}

cmd_gotest() { # extra args go to go test
  local m rc=0 mods=()
  mapfile -t mods < <(go_modules)
  [ "${#mods[@]}" -gt 0 ] || die "no Go modules found"
  for m in "${mods[@]}"; do
    log "go test ${*:-} ./... in ${m#"$ROOT"/}"
    (cd "$m" && go test "$@" ./...) || rc=1
  done
  return "$rc"
}

# fuzz_deadline_race <go-test-output: succeeds when a failed fuzz run's only
# failure is the Go fuzz coordinator's own "context deadline exceeded" at the
# end of a -fuzztime duration, with no failing input written. That is a race
# in Go 1.26's internal/fuzz, not a finding: when the -fuzztime timer fires,
# the coordinator can read the expired deadline from its parent context before
# the cancellation reaches the workers' child context, and then reports it as
# the run's error (go.dev/issue/75804, fixed in Go 1.27). A real finding
# always writes a failing input or prints the target's own failure.
fuzz_deadline_race() {
  awk '
    /^--- FAIL: Fuzz/ { fails++; inblock = 1; next }
    inblock && /^FAIL$/ { inblock = 0; next }
    inblock { if ($0 == "    context deadline exceeded") deadline++; else other++ }
    /Failing input written to|^panic:|^fatal error:/ { finding++ }
    END { exit !(fails == 1 && deadline == 1 && other == 0 && finding == 0) }'
}

# fuzz_target MODULE PKG TARGET BUDGET: one fuzz run. A run that ends in the
# coordinator's deadline race (fuzz_deadline_race) is run once more; its output
# is shown indented, so no "FAIL" line of it reaches a test log. A second race,
# or any other failure, fails.
fuzz_target() {
  local m="$1" pkg="$2" f="$3" t="$4" out try
  out="$(mktemp)"
  for try in 1 2; do
    log "fuzz $pkg $f for $t"
    if (cd "$m" && go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg") >"$out" 2>&1; then
      cat "$out"; rm -f "$out"; return 0
    fi
    if [ "$try" -eq 1 ] && fuzz_deadline_race <"$out"; then
      sed 's/^/    | /' "$out"
      log "fuzz $pkg $f: no failing input, only Go's fuzz coordinator reporting its own -fuzztime deadline (go.dev/issue/75804); running it once more"
      continue
    fi
    cat "$out"; rm -f "$out"; return 1
  done
}

cmd_fuzz() {
  # Fuzz targets are found by their declarations, not by `go test -list`,
  # which builds every test binary of every module once more (without -race,
  # so none of phase 1's builds are reused): minutes on a fresh machine.
  local m dir file f rc=0 mods=() t="${FUZZTIME:-30s}"
  mapfile -t mods < <(go_modules)
  for m in "${mods[@]}"; do
    while read -r file; do
      [ -n "$file" ] || continue
      dir="$(dirname "$file")"
      while read -r f; do
        [ -n "$f" ] || continue
        fuzz_target "$m" "./${dir#./}" "$f" "$t" || rc=1
      done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$m/$file")
    done < <(cd "$m" && grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | sort)
  done
  return "$rc"
}

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
  local cmd="${1:-}"; shift || true
  case "$cmd" in
    install) cmd_install ;;
    infra-up) cmd_infra_up ;;
    migrate) cmd_migrate ;;
    services-up) cmd_services_up ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    clean) cmd_clean ;;
    env) need_root; ensure_dirs; write_env; cat "$ENVFILE" ;;
    start) [ -n "${1:-}" ] || die "usage: $0 start NAME"; start_comp "$1" ;;
    stop) [ -n "${1:-}" ] || die "usage: $0 stop NAME"; stop_comp "$1" ;;
    restart) # a service is rebuilt from the tree first, so a restart runs the current code
      [ -n "${1:-}" ] || die "usage: $0 restart NAME"
      if is_service "$1" && svc_exists "$1"; then build_services "$1"; fi
      stop_comp "$1"; start_comp "$1" ;;
    kill9) [ -n "${1:-}" ] || die "usage: $0 kill9 NAME"; grep -qx "$1" <<<"$(all_names)" || die "unknown component: $1"; kill9_comp "$1" ;;
    gotest) cmd_gotest "$@" ;;
    fuzz) cmd_fuzz ;;
    fuzz-one) [ "$#" -eq 3 ] || die "usage: $0 fuzz-one MODULE_DIR PACKAGE TARGET"; fuzz_target "$1" "$2" "$3" "${FUZZTIME:-30s}" ;;
    fuzz-deadline-race) fuzz_deadline_race ;; # reads go test output on stdin (script tests)
    -h | --help | help | "") usage ;;
    *) usage; die "unknown command: $cmd" ;;
  esac
}

main "$@"
