# Local-stack settings of the admin interface (sourced by scripts/stack.sh
# after .run/env, inside the service's subshell; .run/admininterface.env
# still overrides). Every variable is documented on the service's Config.
export IDENTITY_SERVICE_URL="http://127.0.0.1:8085"
export TOKENS_SERVICE_URL="http://127.0.0.1:8083"
export AUDITLOGGER_SERVICE_URL="http://127.0.0.1:8081"
export VISUALRENDERER_SERVICE_URL="http://127.0.0.1:8086"
export ALERTS_SERVICE_URL="http://127.0.0.1:8089"
export PRIVACY_SERVICE_URL="http://127.0.0.1:8088"
export ADMINUI_COLLECTOR_PUBLIC_URL="http://127.0.0.1:8080"
# Derived from the stack's internal key, so it survives restarts without
# another secret file; a deployment gives every replica the same random key.
ADMINUI_SESSION_KEY="$(printf 'admin-ui-session:%s' "$INTERNAL_KEY" | sha256sum | cut -c1-64)"
export ADMINUI_SESSION_KEY
# Browsers treat http://127.0.0.1 as a secure context and keep Secure
# cookies there, so the local stack keeps them Secure too; set
# ADMINUI_SECURE_COOKIES=false in .run/admininterface.env only to reach the
# UI over plain HTTP from another host name.
export ADMINUI_SECURE_COOKIES=true
export ADMINUI_STATUS_TARGETS="collector=http://127.0.0.1:8080,auditlogger=http://127.0.0.1:8081,processor=http://127.0.0.1:8082,tokens=http://127.0.0.1:8083,auditworker=http://127.0.0.1:8084,identity=http://127.0.0.1:8085,visualrenderer=http://127.0.0.1:8086,admininterface=http://127.0.0.1:8087"
export ADMINUI_SAMPLE_INTERVAL=15s
# The retention page runs the cleanup's dry run through its own command
# (services never import each other); built here once, rebuilt when the
# retention sources change. EVENTS_DATABASE_URL and AUDIT_DATABASE_DSN come
# from .run/env.
if [ ! -x "$BINDIR/cleanup" ] || [ -n "$(find "$ROOT/services/retention" -name '*.go' -newer "$BINDIR/cleanup" 2>/dev/null | head -n1)" ]; then
  (cd "$ROOT" && go build -o "$BINDIR/" ./services/retention/cmd/cleanup) || echo "admininterface: could not build the cleanup command" >&2
fi
export ADMINUI_CLEANUP_COMMAND="$BINDIR/cleanup"
