-- +goose Up
-- People who sign in through the company's identity provider are known by
-- the provider's subject (the "sub" claim, stable for a person) together
-- with the issuer, not by the username the provider shows (which a provider
-- may let people change, or give to someone else later). oidc_key is
-- SHA-256(issuer, NUL, subject); NULL for local people, and for OIDC people
-- stored before this migration until their next sign-in binds them.
ALTER TABLE users ADD COLUMN oidc_key BINARY(32) NULL, ADD UNIQUE KEY by_oidc_key (oidc_key);

-- +goose Down
ALTER TABLE users DROP KEY by_oidc_key, DROP COLUMN oidc_key;
