-- +goose Up
-- The audit trail: one row per audited action, partitioned by month with a
-- catch-all partition; monthly partitions are split off it ahead of time by
-- migrations.EnsureAuditPartitions. Rows are only ever inserted by the
-- services (the worker's user needs INSERT and SELECT only).
CREATE TABLE audit_events (
    id             BINARY(16)        NOT NULL,
    time           DATETIME(6)       NOT NULL,
    actor_token_id VARCHAR(64)       NOT NULL DEFAULT '',
    actor_app_id   VARCHAR(128)      NOT NULL DEFAULT '',
    action         VARCHAR(64)       NOT NULL,
    resource       VARCHAR(255)      NOT NULL DEFAULT '',
    outcome        SMALLINT UNSIGNED NOT NULL,
    client_ip      VARBINARY(16)     NULL,
    user_agent     VARCHAR(512)      NOT NULL DEFAULT '',
    request_id     VARCHAR(64)       NOT NULL DEFAULT '',
    event_count    INT UNSIGNED      NOT NULL DEFAULT 0,
    body_sha256    BINARY(32)        NULL,
    body           MEDIUMBLOB        NULL,
    PRIMARY KEY (time, id),
    KEY by_app (actor_app_id, time),
    KEY by_action (action, time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
PARTITION BY RANGE COLUMNS(time) (
    PARTITION pmax VALUES LESS THAN (MAXVALUE)
);

-- +goose Down
DROP TABLE audit_events;
