# Local-stack settings of the alerts service (sourced by scripts/stack.sh
# after .run/env, inside the service's subshell; .run/alerts.env still
# overrides). Every variable is documented on the service's Config
# (services/alerts/cmd/alerts/config.go) and in its README.
#
# The alerts schema lives in the events DB beside the outbox the processor
# writes; ADMIN_KEY and INTERNAL_KEY come from .run/env.
export ALERTS_DATABASE_URL="$EVENTS_DATABASE_URL"
export AUDITLOGGER_SERVICE_URL="http://127.0.0.1:8081"
if [ -d "$THREATVIEW_ROOT/services/identity" ]; then
  export IDENTITY_SERVICE_URL="http://127.0.0.1:8085"
fi
# Tests make rules fire within seconds; the default is 15 s (at most 30 s).
export ALERTS_EVALUATE_EVERY=2s
export ALERTS_NOTIFY_BACKOFF=1s
export ALERTS_NOTIFY_BACKOFF_MAX=10s
# Destinations on loopback are refused unless allowed (issue 37): the tests'
# webhooks, rsyslogd and HTTP receivers listen on 127.0.0.1.
export ALERTS_EGRESS_ALLOW="127.0.0.1/32"
