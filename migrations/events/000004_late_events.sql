-- +goose Up
-- Late data never re-creates a dropped month. An event received for a month
-- whose partition was archived (a row in events.archives) and then dropped
-- is held here, with the reason, instead of re-creating the partition (which
-- cleanup would then refuse to drop, and whose only other copy is the
-- verified archive). `archiver --late` writes the held rows as a
-- supplementary archive beside the month's verified one and removes them
-- from here; `archiver restore` loads both.
--
-- The event columns are those of events.events (a migration that adds a
-- column there must add it here too); held_at and reason are the holding
-- table's own.
CREATE TABLE events.late_events (
    LIKE events.events INCLUDING DEFAULTS,
    held_at timestamptz NOT NULL DEFAULT now(),
    reason  text        NOT NULL,
    PRIMARY KEY (id, app_id, received_at)
);

-- One row per supplementary archive of held events, written once the archive
-- is verified.
CREATE TABLE events.late_archives (
    table_name      text        NOT NULL,
    month           timestamptz NOT NULL,
    prefix          text        NOT NULL,
    row_count       bigint      NOT NULL,
    content_sha256  text        NOT NULL,
    manifest_sha256 text        NOT NULL,
    location        text        NOT NULL,
    verified_at     timestamptz NOT NULL,
    PRIMARY KEY (table_name, month, prefix)
);

-- ensure_monthly_partitions no longer creates a month that has an archive
-- record and no partition: that month was archived and dropped. Restoring it
-- is explicit (restore_monthly_partition).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events.ensure_monthly_partitions(parent regclass, from_ts timestamptz, ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    m       date := date_trunc('month', from_ts AT TIME ZONE 'UTC')::date;
    lo      date;
    hi      date;
    schema  text;
    rel     text;
    part    text;
    created integer := 0;
BEGIN
    SELECT n.nspname, c.relname INTO schema, rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = parent;
    FOR i IN 0..ahead LOOP
        lo := (m + make_interval(months => i))::date;
        hi := (lo + interval '1 month')::date;
        part := format('%s_y%sm%s', rel, to_char(lo, 'YYYY'), to_char(lo, 'MM'));
        IF to_regclass(format('%I.%I', schema, part)) IS NULL
           AND NOT EXISTS (SELECT 1 FROM events.archives a
                            WHERE a.table_name = schema || '.' || rel
                              AND a.month = (lo::timestamp AT TIME ZONE 'UTC')) THEN
            EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                           schema, part, parent,
                           (lo::timestamp AT TIME ZONE 'UTC'), (hi::timestamp AT TIME ZONE 'UTC'));
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END;
$$;
-- +goose StatementEnd

-- restore_monthly_partition creates parent's partition for the month of
-- month_ts whatever the archive records say: only `archiver restore` calls
-- it. Returns 1 when it created the partition.
-- +goose StatementBegin
CREATE FUNCTION events.restore_monthly_partition(parent regclass, month_ts timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    lo     date := date_trunc('month', month_ts AT TIME ZONE 'UTC')::date;
    hi     date := (lo + interval '1 month')::date;
    schema text;
    rel    text;
    part   text;
BEGIN
    SELECT n.nspname, c.relname INTO schema, rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = parent;
    part := format('%s_y%sm%s', rel, to_char(lo, 'YYYY'), to_char(lo, 'MM'));
    IF to_regclass(format('%I.%I', schema, part)) IS NOT NULL THEN
        RETURN 0;
    END IF;
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                   schema, part, parent,
                   (lo::timestamp AT TIME ZONE 'UTC'), (hi::timestamp AT TIME ZONE 'UTC'));
    RETURN 1;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION events.restore_monthly_partition(regclass, timestamptz);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events.ensure_monthly_partitions(parent regclass, from_ts timestamptz, ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    m       date := date_trunc('month', from_ts AT TIME ZONE 'UTC')::date;
    lo      date;
    hi      date;
    schema  text;
    rel     text;
    part    text;
    created integer := 0;
BEGIN
    SELECT n.nspname, c.relname INTO schema, rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = parent;
    FOR i IN 0..ahead LOOP
        lo := (m + make_interval(months => i))::date;
        hi := (lo + interval '1 month')::date;
        part := format('%s_y%sm%s', rel, to_char(lo, 'YYYY'), to_char(lo, 'MM'));
        IF to_regclass(format('%I.%I', schema, part)) IS NULL THEN
            EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                           schema, part, parent,
                           (lo::timestamp AT TIME ZONE 'UTC'), (hi::timestamp AT TIME ZONE 'UTC'));
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END;
$$;
-- +goose StatementEnd
DROP TABLE events.late_archives;
DROP TABLE events.late_events;

