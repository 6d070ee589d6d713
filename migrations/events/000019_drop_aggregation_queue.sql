-- +goose Up
-- The aggregator's work queue and staging table go (issue 38): since 000014
-- the processor folds the rollups in its own write transaction, no release
-- from that one on writes or reads either table, and 000014 kept them, empty,
-- only for readers (the privacy runner's wait for the aggregator, loadtest's
-- verify, tests) that no longer look.
--
-- Upgrade. Dropping loses nothing: 000014 folded and emptied both and
-- refuses every insert into the queue, and the old aggregator emptied the
-- staging table in the transaction that filled it. A processor older than
-- 000014 still running during a rolling upgrade now fails its batch with
-- "relation does not exist" (SQLSTATE 42P01) instead of 000014's refusal
-- (P0001); both are transient for it, so it rolls back, stores nothing and
-- retries until the new one takes over. The previous release's processor
-- touches neither table. A privacy service older than this migration fails
-- its wait for the queue the same way (transient: the erasure is tried
-- again with backoff) until it is replaced. Grants on the two tables go
-- with them; no other object uses them but the queue's refusal trigger.
--
-- Rows found here could only have been written around 000014's trigger and
-- would be counted nowhere: the migration stops rather than drop them.
LOCK TABLE facts.facts_to_process, facts.aggregate_staging IN ACCESS EXCLUSIVE MODE;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM facts.facts_to_process) OR EXISTS (SELECT 1 FROM facts.aggregate_staging) THEN
        RAISE EXCEPTION 'facts.facts_to_process or facts.aggregate_staging holds rows no rollup counts: fold them (migration 000014''s statements) and empty both, then migrate again';
    END IF;
END
$$;
-- +goose StatementEnd

DROP TABLE facts.facts_to_process, facts.aggregate_staging;
DROP FUNCTION facts.refuse_queue_insert();

-- +goose Down
-- The two tables as 000014 left them: empty, the queue refusing inserts,
-- with the grants 000013 and 000091 give every table of facts.
CREATE TABLE facts.facts_to_process (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at     timestamptz NOT NULL,
    country         char(2)     NOT NULL,
    device_model_id integer     NOT NULL,
    os              text        NOT NULL,
    enqueued_at     timestamptz NOT NULL DEFAULT now(),
    app_id          text        NOT NULL,
    threats         text[]      NOT NULL
);

CREATE UNLOGGED TABLE facts.aggregate_staging (
    occurred_at     timestamptz NOT NULL,
    country         char(2)     NOT NULL,
    device_model_id integer     NOT NULL,
    os              text        NOT NULL,
    app_id          text        NOT NULL,
    threats         text[]      NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION facts.refuse_queue_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'facts.facts_to_process is no longer written (migration 000014): this processor is older than the schema';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER refuse_queue_insert BEFORE INSERT ON facts.facts_to_process
    FOR EACH STATEMENT EXECUTE FUNCTION facts.refuse_queue_insert();

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor') THEN
        GRANT SELECT, INSERT, UPDATE ON facts.facts_to_process, facts.aggregate_staging TO threatview_processor;
        GRANT USAGE ON SEQUENCE facts.facts_to_process_seq_seq TO threatview_processor;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        GRANT SELECT, UPDATE, DELETE ON facts.facts_to_process, facts.aggregate_staging TO threatview_privacy;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.facts_to_process, facts.aggregate_staging TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd
