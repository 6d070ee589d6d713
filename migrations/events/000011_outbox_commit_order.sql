-- +goose Up
-- Outbox rows numbered in commit order. Every insert into alerts.outbox
-- first takes a transaction-level advisory lock (held to its commit or
-- rollback), so the transaction that inserts later commits later and its
-- rows get larger seq values: a reader that has seen seq n has seen every
-- committed row below n, and follows the outbox by seq alone. (000010's
-- reading by (xid, seq) below pg_snapshot_xmin waited on every writing
-- transaction of the whole server, a long one in another database too.)
-- The processor is the outbox's one writer, so the lock is uncontended but
-- for the moment two processors overlap at a leader change.
-- +goose StatementBegin
CREATE FUNCTION alerts.outbox_in_commit_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(128051789459298); -- "tvalob"
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_in_commit_order BEFORE INSERT ON alerts.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION alerts.outbox_in_commit_order();
CREATE UNIQUE INDEX outbox_seq ON alerts.outbox (seq);

-- +goose Down
DROP INDEX alerts.outbox_seq;
DROP TRIGGER outbox_in_commit_order ON alerts.outbox;
DROP FUNCTION alerts.outbox_in_commit_order();
