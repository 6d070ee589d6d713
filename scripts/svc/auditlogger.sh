# Local-stack settings of the auditlogger service (sourced by scripts/stack.sh after
# .run/env, inside the service's subshell; .run/auditlogger.env still overrides).
#
# People's access tokens from the identity service are verified against its
# public keys (platform/authz); without identity only the admin key works.
if [ -d "$THREATVIEW_ROOT/services/identity" ]; then
  export IDENTITY_JWKS_URL="http://127.0.0.1:8085/.well-known/jwks.json"
fi
# The tamper-evidence endpoints check checkpoints against the public key
# only (scripts/svc/audittrail.sh); the signing seed stays with the worker.
# shellcheck disable=SC1091
. "$THREATVIEW_ROOT/scripts/svc/audittrail.sh"
unset AUDIT_TRAIL_SEED AUDIT_TRAIL_SEED_HEX
