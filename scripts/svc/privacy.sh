# Local-stack settings of the privacy service (services/retention/cmd/privacy;
# sourced by scripts/stack.sh after .run/env, inside the service's subshell;
# .run/privacy.env still overrides). EVENTS_DATABASE_URL, AUDIT_DATABASE_DSN,
# ADMIN_KEY and INTERNAL_KEY come from .run/env.
export AUDITLOGGER_SERVICE_URL="http://127.0.0.1:8081"
if [ -d "$THREATVIEW_ROOT/services/identity" ]; then
  export IDENTITY_JWKS_URL="http://127.0.0.1:8085/.well-known/jwks.json"
fi
# An erasure rewrites the archived months that hold the device: the archive
# the local archiver writes (e2e/privacy runs the archiver and cleanup on it).
mkdir -p "$THREATVIEW_ROOT/.run/archive"
export ARCHIVE_TARGET="dir://$THREATVIEW_ROOT/.run/archive"
