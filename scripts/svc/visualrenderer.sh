# Local-stack settings of the visual renderer (sourced by scripts/stack.sh
# after .run/env, inside the service's subshell; .run/visualrenderer.env
# still overrides). Every variable is documented on the service's Config.
#
# The renderer reads the rollups as threatview_ro, a role stack.sh creates
# with SELECT on the facts schema only; ADMIN_KEY (for automation) comes from
# .run/env.
export RENDERER_DATABASE_URL="postgres://threatview_ro:threatview_ro@127.0.0.1:${PG_PORT:-15432}/threatview?sslmode=disable"
export RENDERER_DB_MAX_CONNS=8
if [ -d "$THREATVIEW_ROOT/services/identity" ]; then
  # People sign in to the dashboards at identity; the forwarder key (the
  # one scripts/svc/identity.sh derives) lets the renderer name each
  # browser's address, so failed sign-ins are throttled per browser.
  export IDENTITY_SERVICE_URL="http://127.0.0.1:8085"
  RENDERER_IDENTITY_FORWARDER_KEY="$(printf 'identity-forwarder:%s' "$INTERNAL_KEY" | sha256sum | cut -c1-64)"
  export RENDERER_IDENTITY_FORWARDER_KEY
fi
# Browsers keep Secure cookies on http://127.0.0.1 (a secure context), so
# the local stack keeps them Secure.
export RENDERER_SECURE_COOKIES=true
# Every page's header links back to the Administration Interface, the
# people's one home (blank: no link).
export RENDERER_ADMIN_URL="${THREATVIEW_ADMIN_UI_URL:-}"
