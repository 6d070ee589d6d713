-- +goose Up
-- One row per verified archive of a monthly audit_events partition, written
-- by the archiver only after re-reading the archive and checking it against
-- the database; cleanup drops a partition only when its row is here.
CREATE TABLE archives (
    table_name      VARCHAR(128) NOT NULL,
    month           DATETIME     NOT NULL,
    range_to        DATETIME     NOT NULL,
    partition_name  VARCHAR(64)  NOT NULL,
    row_count       BIGINT       NOT NULL,
    byte_count      BIGINT       NOT NULL,
    files           LONGTEXT     NOT NULL,
    content_sha256  CHAR(64)     NOT NULL,
    manifest_sha256 CHAR(64)     NOT NULL,
    location        VARCHAR(1024) NOT NULL,
    schema_version  BIGINT       NOT NULL,
    verified_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (table_name, month)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE archives;
