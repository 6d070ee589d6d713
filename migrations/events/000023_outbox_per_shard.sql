-- +goose Up
-- The alerts outbox numbered per shard (issue 38). 000011 numbers every
-- outbox row in one commit order with one advisory lock held to COMMIT; with
-- the events sharded (one processor per queue threatview.events.<k>) every
-- shard's writer then waits for every other's commit. Here each writer's
-- rows carry its shard, read from the session setting threatview.shard
-- that the processor sets on each connection of its pool (blank or unset:
-- shard 0, as an unsharded processor or one older than this migration
-- writes), and the commit-order lock is taken per shard: within a shard a
-- later commit still draws larger seq values, across shards seq values
-- interleave in any commit order. Readers (services/alerts) follow the
-- outbox with one position per shard. A writer never names the column: its
-- rows must be of the shard whose lock it took.
--
-- Rows already stored get shard 0 (the default is stable, so it is
-- evaluated once here, with no setting, and the table is not rewritten).
-- The check and the index read the outbox once while writers wait: about
-- an hour of threat events (ALERTS_OUTBOX_KEEP); 2,000,000 rows took 2.1 s.
ALTER TABLE alerts.outbox ADD COLUMN shard smallint NOT NULL
    DEFAULT coalesce(nullif(current_setting('threatview.shard', true), ''), '0')::smallint
    CHECK (shard >= 0);
-- Every reader reads a shard's rows by (shard, seq). 000011's index on seq
-- alone goes: PostgreSQL walked it over every shard's rows to find one
-- shard's first, and the writers no longer maintain it.
CREATE UNIQUE INDEX outbox_shard_seq ON alerts.outbox (shard, seq);
DROP INDEX alerts.outbox_seq;

-- Shard 0's key is 000011's, so a processor older than this migration and
-- an unsharded one still wait for each other.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION alerts.outbox_in_commit_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(128051789459298 -- "tvalob"
        + coalesce(nullif(current_setting('threatview.shard', true), ''), '0')::smallint);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A cursor's position per shard. alerts.cursors.seq is its base: the
-- position in every shard without a row here. Up to this migration every
-- row was in one commit order, so an existing cursor's seq is exact for
-- every shard, shard 0 and the ones that write later (their rows all draw
-- seq values above any drawn before: this ALTER waited for every writer).
CREATE TABLE alerts.cursor_shards (
    name  text     NOT NULL REFERENCES alerts.cursors (name) ON DELETE CASCADE,
    shard smallint NOT NULL,
    seq   bigint   NOT NULL,
    PRIMARY KEY (name, shard)
);

-- +goose Down
-- Back to one commit order: each cursor moves to its least position over
-- the shards that have rows (rows after it in another shard are read again:
-- a forwarder sends them at least once, the minute counter counts them
-- again), or, with no row left, to its furthest.
UPDATE alerts.cursors c SET seq = coalesce(
    (SELECT min(coalesce(cs.seq, c.seq)) FROM (SELECT DISTINCT shard FROM alerts.outbox) s
        LEFT JOIN alerts.cursor_shards cs ON cs.name = c.name AND cs.shard = s.shard),
    (SELECT greatest(c.seq, max(cs.seq)) FROM alerts.cursor_shards cs WHERE cs.name = c.name));
DROP TABLE alerts.cursor_shards;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION alerts.outbox_in_commit_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(128051789459298); -- "tvalob"
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE UNIQUE INDEX outbox_seq ON alerts.outbox (seq);
DROP INDEX alerts.outbox_shard_seq;
ALTER TABLE alerts.outbox DROP COLUMN shard;
