# Local-stack settings of the audit worker (sourced by scripts/stack.sh
# after .run/env, inside the service's subshell; .run/auditworker.env still
# overrides). Every variable is documented on cmd/auditworker's Config.
# shellcheck disable=SC1091
. "$THREATVIEW_ROOT/scripts/svc/audittrail.sh"
export AUDIT_SIGNING_KEYS="$AUDIT_TRAIL_SEED"
