-- +goose Up
-- One row per verified archive of a monthly partition, written by the
-- archiver only after re-reading the archive and checking it against the
-- database; cleanup drops a partition only when its row is here.
CREATE TABLE events.archives (
    table_name      text        NOT NULL,
    month           timestamptz NOT NULL,
    range_to        timestamptz NOT NULL,
    partition_name  text        NOT NULL,
    row_count       bigint      NOT NULL,
    byte_count      bigint      NOT NULL,
    files           jsonb       NOT NULL,
    content_sha256  text        NOT NULL,
    manifest_sha256 text        NOT NULL,
    location        text        NOT NULL,
    schema_version  bigint      NOT NULL,
    verified_at     timestamptz NOT NULL,
    PRIMARY KEY (table_name, month)
);

-- +goose Down
DROP TABLE events.archives;
