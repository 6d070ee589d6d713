-- +goose Up
-- The tamper-evident trail (see services/auditlogger/trail). Each row the
-- worker stores gets its position in an RFC 6962 Merkle tree (seq, from 0)
-- and its leaf hash, in the same transaction that advances audit_tree, so a
-- crash leaves neither a gap nor a duplicate. Rows stored before this
-- migration keep seq NULL: they are the genesis, counted (genesis_rows) by
-- the worker's first chained insert and outside the tree. Adding the two
-- nullable columns is an instant ALTER on MariaDB 10.3+; the index is built
-- online.
ALTER TABLE audit_events
    ADD COLUMN seq       BIGINT UNSIGNED NULL,
    ADD COLUMN leaf_hash BINARY(32)      NULL,
    ADD KEY by_seq (seq);

-- The worker's tree: its size and compact range (at most 64 hashes of 32
-- bytes), updated with every insert under a row lock.
CREATE TABLE audit_tree (
    id           TINYINT UNSIGNED NOT NULL,
    size         BIGINT UNSIGNED  NOT NULL,
    range_hashes VARBINARY(2048)  NOT NULL,
    root         BINARY(32)       NOT NULL,
    genesis_rows BIGINT           NULL,
    genesis_at   DATETIME(6)      NULL,
    updated_at   DATETIME(6)      NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB;
INSERT INTO audit_tree (id, size, range_hashes, root, updated_at)
VALUES (1, 0, '', UNHEX('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'), NOW(6));

-- Complete subtrees at levels 8, 16, 24 ... (one row per 256 leaves), so an
-- inclusion proof reads at most 255 hashes per level of 8 instead of every
-- leaf; kept when a month of rows is archived and dropped.
CREATE TABLE audit_tree_nodes (
    level TINYINT UNSIGNED NOT NULL,
    idx   BIGINT UNSIGNED  NOT NULL,
    hash  BINARY(32)       NOT NULL,
    PRIMARY KEY (level, idx)
) ENGINE=InnoDB;

-- Signed checkpoints (also written to the object store outside the
-- database; the signing key is never stored here).
CREATE TABLE audit_checkpoints (
    n         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    size      BIGINT UNSIGNED NOT NULL,
    root      BINARY(32)      NOT NULL,
    time      DATETIME(6)     NOT NULL,
    key_id    VARCHAR(64)     NOT NULL,
    signature VARBINARY(64)   NOT NULL,
    PRIMARY KEY (n),
    KEY by_size (size)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE audit_checkpoints;
DROP TABLE audit_tree_nodes;
DROP TABLE audit_tree;
ALTER TABLE audit_events DROP KEY by_seq, DROP COLUMN leaf_hash, DROP COLUMN seq;
