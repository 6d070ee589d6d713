-- +goose Up
-- The write path folds the rollups in its own transaction (processor/postgres
-- rollups.go): one upsert per rollup table and batch, computed from the rows
-- the insert reports as new, so the rollups equal count(*) over events.events
-- at every commit. The per-event work queue, the staging table and the
-- separate aggregator are no longer used; writers of one app are serialised by a
-- transaction-level advisory lock, which an erasure's suppression takes too.
--
-- Upgrade. This migration locks the queue, folds every row still in it into
-- the rollups (the old aggregator's statements, once) and empties it, so an
-- upgrade loses and doubles nothing. facts.facts_to_process is kept, empty,
-- with a trigger that refuses inserts: an old processor still running after
-- the migration fails its batch (SQLSTATE P0001, transient for it) and retries
-- until the new one takes over, so nothing is written that no one would fold;
-- the readers that wait for the queue to drain (retention's privacy runner,
-- loadtest's verify, e2e) find it empty. The staging table is kept empty
-- for the same readers. A later migration drops both once no reader is left.

LOCK TABLE facts.facts_to_process, facts.aggregate_staging IN ACCESS EXCLUSIVE MODE;

-- +goose StatementBegin
DO $$
DECLARE
    g record;
    k record;
BEGIN
    FOR k IN SELECT * FROM (VALUES
        ('country', 'country', 'country', 'facts.facts_to_process'),
        ('device_model', 'device_model_id', 'device_model_id', 'facts.facts_to_process'),
        ('os', 'os', 'os', 'facts.facts_to_process'),
        ('threat', 'threat', 'x.threat', 'facts.facts_to_process s, unnest(s.threats) AS x(threat)')) AS v(name, col, expr, src)
    LOOP
        FOR g IN SELECT * FROM (VALUES
            ('hour',  $b$date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'$b$),
            ('day',   $b$(occurred_at AT TIME ZONE 'UTC')::date$b$),
            ('month', $b$date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date$b$)) AS v(name, expr)
        LOOP
            EXECUTE format('INSERT INTO facts.%1$I AS t (app_id, bucket, %2$I, count)
                SELECT app_id, %3$s, %4$s, count(*) FROM %5$s GROUP BY 1, 2, 3
                ON CONFLICT (app_id, bucket, %2$I) DO UPDATE SET count = t.count + excluded.count',
                format('events_by_%s_per_%s', k.name, g.name), k.col, g.expr, k.expr, k.src);
            EXECUTE format('INSERT INTO facts.%1$I AS t (bucket, %2$I, count)
                SELECT %3$s, %4$s, count(*) FROM %5$s GROUP BY 1, 2
                ON CONFLICT (bucket, %2$I) DO UPDATE SET count = t.count + excluded.count',
                format('all_apps_events_by_%s_per_%s', k.name, g.name), k.col, g.expr, k.expr, k.src);
            -- Counts are updated in place: with count in no index and room on
            -- the page, the update is HOT (no index entry written). The
            -- all-apps summaries' index by key carried count (INCLUDE), which
            -- made every update write a new index entry.
            EXECUTE format('ALTER TABLE facts.%I SET (fillfactor = 80)', format('events_by_%s_per_%s', k.name, g.name));
            EXECUTE format('ALTER TABLE facts.%I SET (fillfactor = 80)', format('all_apps_events_by_%s_per_%s', k.name, g.name));
            EXECUTE format('DROP INDEX facts.%I', format('all_apps_events_by_%s_per_%s_by_key', k.name, g.name));
            EXECUTE format('CREATE INDEX %I ON facts.%I (%I, bucket)', format('all_apps_events_by_%s_per_%s_by_key', k.name, g.name),
                format('all_apps_events_by_%s_per_%s', k.name, g.name), k.col);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

TRUNCATE facts.facts_to_process, facts.aggregate_staging;

-- +goose StatementBegin
CREATE FUNCTION facts.refuse_queue_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'facts.facts_to_process is no longer written (migration 000014): this processor is older than the schema';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER refuse_queue_insert BEFORE INSERT ON facts.facts_to_process
    FOR EACH STATEMENT EXECUTE FUNCTION facts.refuse_queue_insert();

-- events.lock_apps takes, in a fixed order, a transaction-level advisory lock
-- per distinct app of apps (key space (1953915248 "tvap", hashtext(app_id)),
-- apart from the one-number keys of the leader locks). The writer takes them
-- before its insert statement, so two writers (a leader hand-over, or a
-- deployment with more than one) never both miss each other's copy of a
-- re-sent id; an app's suppression takes its app's lock (below), so a write
-- in flight commits before the suppression does, and a later write's insert
-- sees it.
-- +goose StatementBegin
CREATE FUNCTION events.lock_apps(apps text[]) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    n integer := 0;
BEGIN
    FOR k IN SELECT DISTINCT hashtext(a) FROM unnest(apps) AS a ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1953915248, k);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION events.suppression_waits_for_writers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM events.lock_apps(ARRAY[NEW.app_id]);
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER suppression_waits_for_writers BEFORE INSERT ON events.suppressions
    FOR EACH ROW EXECUTE FUNCTION events.suppression_waits_for_writers();

-- +goose Down
DROP TRIGGER suppression_waits_for_writers ON events.suppressions;
DROP FUNCTION events.suppression_waits_for_writers();
DROP FUNCTION events.lock_apps(text[]);
DROP TRIGGER refuse_queue_insert ON facts.facts_to_process;
DROP FUNCTION facts.refuse_queue_insert();
-- +goose StatementBegin
DO $$
DECLARE
    k record;
    g text;
BEGIN
    FOR k IN SELECT * FROM (VALUES ('country', 'country'), ('device_model', 'device_model_id'), ('os', 'os'), ('threat', 'threat')) AS v(name, col)
    LOOP
        FOREACH g IN ARRAY ARRAY['hour', 'day', 'month'] LOOP
            EXECUTE format('DROP INDEX facts.%I', format('all_apps_events_by_%s_per_%s_by_key', k.name, g));
            EXECUTE format('CREATE INDEX %I ON facts.%I (%I, bucket) INCLUDE (count)', format('all_apps_events_by_%s_per_%s_by_key', k.name, g),
                format('all_apps_events_by_%s_per_%s', k.name, g), k.col);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd
