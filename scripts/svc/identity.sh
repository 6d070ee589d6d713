# Local-stack settings of the identity service (sourced by scripts/stack.sh
# after .run/env, inside the service's subshell; .run/identity.env still
# overrides). Every variable is documented on the service's Config
# (Config in services/identity/cmd/identity/config.go) and in its README.
#
# The signing key (an Ed25519 seed) and the first admin's password are
# secrets stack.sh generates once into .run/secrets; ADMIN_KEY and
# INTERNAL_KEY come from .run/env.
# shellcheck disable=SC1091
. "$THREATVIEW_ROOT/.run/secrets"
export IDENTITY_SIGNING_KEYS="$IDENTITY_SIGNING_KEY"
# The first admin person, created at start unless they exist (idempotent).
export IDENTITY_BOOTSTRAP_ADMIN_USER="$THREATVIEW_ADMIN_USER"
export IDENTITY_BOOTSTRAP_ADMIN_PASSWORD="$THREATVIEW_ADMIN_PASSWORD"
export AUDITLOGGER_SERVICE_URL="http://127.0.0.1:8081"
# The admin interface signs people in on behalf of their browsers and names
# each browser's address in X-Forwarded-For, proved by the forwarder key
# (IDENTITY_FORWARDER_KEY, by default derived from INTERNAL_KEY on both
# sides); throttling counts failures per that address. Loopback is trusted
# as a proxy too, so tests can name addresses of their own.
export IDENTITY_TRUSTED_PROXIES="127.0.0.1/32"
# Every browser of the local stack (and every UI test) signs in from
# 127.0.0.1; a higher per-address limit keeps a run of wrong-password tests
# from locking the others out for the window. Per-username stays at 5.
export IDENTITY_LOGIN_MAX_FAILURES_PER_IP=100
