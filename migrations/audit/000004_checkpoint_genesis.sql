-- +goose Up
-- The genesis (the rows stored before the trail began: how many, until
-- when, and a digest over them) is signed in every checkpoint from the
-- first one after the worker's first chained insert, so that the unsigned
-- audit_tree.genesis_rows/genesis_at no longer decide which rows without a
-- sequence number are legitimate (see services/auditlogger/trail). Nullable
-- columns: an instant ALTER; older checkpoints keep NULL (they sign none).
ALTER TABLE audit_checkpoints
    ADD COLUMN genesis_rows   BIGINT      NULL,
    ADD COLUMN genesis_at     DATETIME(6) NULL,
    ADD COLUMN genesis_digest BINARY(32)  NULL;

-- +goose Down
ALTER TABLE audit_checkpoints DROP COLUMN genesis_digest, DROP COLUMN genesis_at, DROP COLUMN genesis_rows;
