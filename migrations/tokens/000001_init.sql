-- +goose Up
-- App tokens. Only the SHA-256 of a token is stored; the plain token is shown
-- once when created.
CREATE TABLE tokens (
    id           CHAR(36)     NOT NULL PRIMARY KEY,
    app_id       VARCHAR(128) NOT NULL,
    name         VARCHAR(200) NOT NULL DEFAULT '',
    token_hash   BINARY(32)   NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    revoked_at   DATETIME(6)  NULL,
    last_used_at DATETIME(6)  NULL,
    UNIQUE KEY by_hash (token_hash),
    KEY by_app (app_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE tokens;
