# The audit trail's checkpoint key for the local stack (sourced by
# auditworker.sh and auditlogger.sh): an Ed25519 seed derived from the
# stack's internal key, so it survives restarts without another secret
# file, and its public key. A deployment takes the seed from a Secret
# (charts/threatview: auditTrail.signingKeys).
# hex to bytes with bash's printf (no xxd needed).
audit_trail_unhex() { printf "$(printf '%s' "$1" | sed 's/../\\x&/g')"; }
AUDIT_TRAIL_SEED_HEX="$(printf 'audit-trail-signing:%s' "$INTERNAL_KEY" | sha256sum | cut -c1-64)"
AUDIT_TRAIL_SEED="$(audit_trail_unhex "$AUDIT_TRAIL_SEED_HEX" | base64 -w0)"
# The public key: openssl reads the seed as a PKCS#8 Ed25519 key (fixed DER prefix).
AUDIT_PUBLIC_KEYS="$(audit_trail_unhex "302e020100300506032b657004220420$AUDIT_TRAIL_SEED_HEX" |
  openssl pkey -inform DER -pubout -outform DER | tail -c 32 | base64 -w0)"
export AUDIT_PUBLIC_KEYS
# Checkpoints and leaf bundles outside the database: a directory here, an
# S3 bucket with Object Lock in production.
export AUDIT_TRAIL_DIR="$THREATVIEW_ROOT/.run/audittrail"
