-- +goose Up
-- Alerts and SIEM forwarding (services/alerts).
--
-- alerts.outbox holds one row per stored threat event (an event with at
-- least one threat), written by the processor in the transaction that
-- stores the event (processor/postgres insertSQL): a rolled-back batch
-- leaves no row, a committed one always has its rows. Readers (the
-- forwarders, the minute counter) follow it in (xid, seq) order and read
-- only rows of transactions older than every running one
-- (pg_snapshot_xmin), so a row that commits late is never skipped.
CREATE SCHEMA IF NOT EXISTS alerts;

CREATE TABLE alerts.outbox (
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    xid          xid8        NOT NULL DEFAULT pg_current_xact_id(),
    event_id     uuid        NOT NULL,
    app_id       text        NOT NULL,
    received_at  timestamptz NOT NULL,
    occurred_at  timestamptz NOT NULL,
    type         text        NOT NULL,
    app_version  text        NOT NULL DEFAULT '',
    device_model text        NOT NULL DEFAULT '',
    os           text        NOT NULL DEFAULT '',
    os_version   text        NOT NULL DEFAULT '',
    country      text        NOT NULL DEFAULT '',
    threats      text[]      NOT NULL,
    PRIMARY KEY (xid, seq)
);
CREATE INDEX outbox_received_at ON alerts.outbox (received_at);

-- Exact per-minute sightings (one per threat type of an event), folded
-- from the outbox by the alerts leader in the transaction that moves its
-- cursor, so every outbox row is counted once.
CREATE TABLE alerts.threat_minutes (
    app_id  text        NOT NULL,
    threat  text        NOT NULL,
    minute  timestamptz NOT NULL,
    count   bigint      NOT NULL,
    PRIMARY KEY (minute, app_id, threat)
);

-- Cursors over the outbox: 'counter' for threat_minutes, 'fwd:<id>' per
-- forwarder.
CREATE TABLE alerts.cursors (
    name       text        PRIMARY KEY,
    xid        xid8        NOT NULL DEFAULT '0'::xid8,
    seq        bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE alerts.rules (
    id             uuid        PRIMARY KEY,
    name           text        NOT NULL,
    app_id         text        NOT NULL DEFAULT '',
    threat         text        NOT NULL DEFAULT '',
    kind           text        NOT NULL DEFAULT 'count' CHECK (kind IN ('count', 'baseline')),
    window_seconds integer     NOT NULL CHECK (window_seconds BETWEEN 60 AND 86400),
    threshold      bigint      NOT NULL CHECK (threshold >= 1),
    factor         double precision NOT NULL DEFAULT 0,
    channel        jsonb       NOT NULL,
    silenced_until timestamptz,
    created_by     text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz
);

-- The current state of each rule; changed only with a transition row.
CREATE TABLE alerts.rule_state (
    rule_id    uuid        PRIMARY KEY REFERENCES alerts.rules (id),
    state      text        NOT NULL CHECK (state IN ('ok', 'firing')),
    since      timestamptz NOT NULL,
    value      bigint      NOT NULL DEFAULT 0
);

CREATE TABLE alerts.transitions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rule_id    uuid        NOT NULL REFERENCES alerts.rules (id),
    state      text        NOT NULL CHECK (state IN ('firing', 'resolved')),
    value      bigint      NOT NULL,
    threshold  bigint      NOT NULL,
    at         timestamptz NOT NULL,
    silenced   boolean     NOT NULL DEFAULT false
);
CREATE INDEX transitions_rule ON alerts.transitions (rule_id, id);

-- One notification per transition (the unique key), written in the
-- transition's transaction, before anything is sent: a restart or a new
-- leader resends what is pending, never a second copy of one transition.
CREATE TABLE alerts.notifications (
    transition_id bigint      PRIMARY KEY REFERENCES alerts.transitions (id),
    rule_id       uuid        NOT NULL REFERENCES alerts.rules (id),
    status        text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
    attempts      integer     NOT NULL DEFAULT 0,
    next_at       timestamptz NOT NULL DEFAULT now(),
    last_error    text        NOT NULL DEFAULT '',
    body          jsonb       NOT NULL,
    sent_at       timestamptz
);
CREATE INDEX notifications_pending ON alerts.notifications (next_at) WHERE status = 'pending';

CREATE TABLE alerts.forwarders (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL,
    type       text        NOT NULL CHECK (type IN ('syslog', 'http', 's3')),
    url        text        NOT NULL,
    format     text        NOT NULL CHECK (format IN ('cef', 'ocsf')),
    app_ids    text[]      NOT NULL DEFAULT '{}',
    threats    text[]      NOT NULL DEFAULT '{}',
    ca_pem     text        NOT NULL DEFAULT '',
    created_by text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz,
    delivered  bigint      NOT NULL DEFAULT 0,
    failed     bigint      NOT NULL DEFAULT 0,
    last_error text        NOT NULL DEFAULT '',
    delivered_until timestamptz
);

-- +goose Down
DROP SCHEMA alerts CASCADE;
