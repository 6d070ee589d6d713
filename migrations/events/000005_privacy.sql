-- +goose Up
-- Privacy: erasure requests (a job whose state survives restarts) and
-- suppressions (devices whose later events the processor drops).

-- One row per erasure request. At most one queued or running request per
-- data subject (app_id, device_id): a second one is refused.
CREATE TABLE events.erasures (
    id           uuid        PRIMARY KEY,
    app_id       text        NOT NULL,
    device_id    text        NOT NULL CHECK (device_id <> ''),
    suppress     boolean     NOT NULL,
    status       text        NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
    requested_by text        NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    attempts     integer     NOT NULL DEFAULT 0,
    report       jsonb       NOT NULL DEFAULT '{}',
    error        text        NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX erasures_one_open ON events.erasures (app_id, device_id) WHERE status IN ('queued', 'running');
CREATE INDEX erasures_by_time ON events.erasures (requested_at DESC);

-- A suppressed subject's events are dropped by the processor (counted in
-- processor_events_suppressed_total) until lifted_at is set.
CREATE TABLE events.suppressions (
    app_id     text        NOT NULL,
    device_id  text        NOT NULL CHECK (device_id <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    erasure_id uuid,
    lifted_at  timestamptz,
    lifted_by  text,
    PRIMARY KEY (app_id, device_id)
);

-- Finding one subject's rows: an index by (app_id, device_id) on every
-- events partition (a partitioned index: new partitions get it too) and on
-- the late events. Built once here; on a large table it holds writers for
-- the build (see docs/privacy.md).
CREATE INDEX events_by_subject ON events.events (app_id, device_id);
CREATE INDEX late_events_by_subject ON events.late_events (app_id, device_id);

-- +goose Down
DROP INDEX events.late_events_by_subject;
DROP INDEX events.events_by_subject;
DROP TABLE events.suppressions;
DROP TABLE events.erasures;
