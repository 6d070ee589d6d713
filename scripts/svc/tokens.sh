# Local-stack settings of the tokens service (sourced by scripts/stack.sh after
# .run/env, inside the service's subshell; .run/tokens.env still overrides).
#
# People's access tokens from the identity service are verified against its
# public keys (platform/authz); without identity only the admin key works.
if [ -d "$THREATVIEW_ROOT/services/identity" ]; then
  export IDENTITY_JWKS_URL="http://127.0.0.1:8085/.well-known/jwks.json"
fi
