-- +goose Up
-- People who sign in to Threat View. A password is stored only as an
-- argon2id hash in PHC string form ($argon2id$v=19$m=...,t=...,p=...$salt$hash);
-- people who sign in through the company's identity provider (source 'oidc')
-- have no password. Roles are a comma-separated subset of admin, analyst,
-- auditor.
CREATE TABLE users (
    username      VARCHAR(64)  NOT NULL PRIMARY KEY,
    password_hash VARCHAR(255) NOT NULL DEFAULT '',
    roles         VARCHAR(64)  NOT NULL DEFAULT '',
    source        VARCHAR(16)  NOT NULL DEFAULT 'local',
    disabled      BOOLEAN      NOT NULL DEFAULT FALSE,
    created_at    DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    last_login_at DATETIME(6)  NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Refresh tokens: only their SHA-256 is stored. Each use rotates the token
-- (used_at is set and a new one of the same family issued); presenting a used
-- token again revokes the whole family, since one of the two holders is a
-- thief.
CREATE TABLE refresh_tokens (
    token_hash BINARY(32)  NOT NULL PRIMARY KEY,
    family_id  CHAR(36)    NOT NULL,
    username   VARCHAR(64) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    used_at    DATETIME(6) NULL,
    revoked_at DATETIME(6) NULL,
    KEY by_family (family_id),
    KEY by_user (username),
    KEY by_expiry (expires_at),
    CONSTRAINT refresh_user FOREIGN KEY (username) REFERENCES users (username) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Failed sign-ins per key ('user:<name>' or 'ip:<address>') within a fixed
-- window; shared by every replica so throttling holds behind a load balancer.
CREATE TABLE login_failures (
    k            VARBINARY(128) NOT NULL PRIMARY KEY,
    window_start DATETIME(6)    NOT NULL,
    failures     INT UNSIGNED   NOT NULL
) ENGINE=InnoDB;

-- Pending OIDC sign-ins: the state (hashed), the PKCE verifier and the
-- nonce, kept until the identity provider redirects back (or they expire).
CREATE TABLE oidc_states (
    state_hash BINARY(32)   NOT NULL PRIMARY KEY,
    verifier   VARCHAR(128) NOT NULL,
    nonce      VARCHAR(128) NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    KEY by_expiry (expires_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE oidc_states;
DROP TABLE login_failures;
DROP TABLE refresh_tokens;
DROP TABLE users;
