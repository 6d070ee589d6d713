-- +goose Up
-- Rollups by app, and threat rollups.
--
-- Every rollup gets app_id in its primary key, (app_id, bucket, key); three
-- new rollups, facts.events_by_threat_per_{hour,day,month}, count threat
-- sightings by threat type. Each of the twelve has a summary over all apps,
-- facts.all_apps_<rollup> (bucket, key, count), kept by the aggregator in
-- the same transaction: a query over all apps reads one row per bucket and
-- key instead of one per app (a month of hourly counts over 100 apps is
-- 100 times fewer rows); an index on (key, bucket) reads the points of a
-- few keys without the other keys' rows. The facts carry what the aggregator needs: facts.facts and
-- the work queue get the threat types of the event (text[]); the queue and
-- the staging table get app_id.
--
-- A threat is a string (its type) or an object with a "type" string; other
-- elements, and empty types, are not counted. An event counts once per
-- distinct type ("root" twice in one event is one sighting of root). Types
-- are cut to 128 characters, so no client can make a rollup key too long
-- for its index.
--
-- Existing rows. The whole migration runs in one transaction that first
-- locks the facts and every rollup, so the processor waits and nothing is
-- counted twice or lost:
--   * The rollups are rebuilt from facts.facts, which now gives the app of
--     every event whose fact still exists (facts still in the work queue
--     are counted too: the queue is emptied, since its rows carry no app).
--   * Counts of events whose facts are already gone (a dropped partition)
--     cannot be split by app: for each old (bucket, key) row, what the
--     remaining facts do not explain (old count + queued - facts) is kept
--     with app_id '' (unknown app). Totals over all apps stay what they
--     were; such counts are absent from any query for one app.
--   * facts.facts.threats is filled from events.events.payload. Threat
--     rollups are built only from existing facts: sightings of events whose
--     facts are gone were never counted and are not now.
-- An old processor still running after this migration fails its inserts
-- (app_id and threats have no default) and retries them until the new one
-- takes over: it never writes a count under the wrong app.

-- +goose StatementBegin
CREATE FUNCTION facts.threat_types(payload jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT k ORDER BY k), '{}')
      FROM (SELECT left(CASE jsonb_typeof(t)
                            WHEN 'string' THEN t #>> '{}'
                            WHEN 'object' THEN CASE WHEN jsonb_typeof(t -> 'type') = 'string' THEN t ->> 'type' END
                        END, 128) AS k
              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'threats') = 'array'
                                             THEN payload -> 'threats' ELSE '[]'::jsonb END) AS t) x
     WHERE k IS NOT NULL AND k <> ''
$$;
-- +goose StatementEnd

LOCK TABLE facts.facts, facts.facts_to_process, facts.aggregate_staging,
    facts.events_by_country_per_hour, facts.events_by_country_per_day, facts.events_by_country_per_month,
    facts.events_by_device_model_per_hour, facts.events_by_device_model_per_day, facts.events_by_device_model_per_month,
    facts.events_by_os_per_hour, facts.events_by_os_per_day, facts.events_by_os_per_month
    IN ACCESS EXCLUSIVE MODE;

ALTER TABLE facts.facts ADD COLUMN threats text[];
UPDATE facts.facts f SET threats = facts.threat_types(e.payload)
  FROM events.events e
 WHERE e.id = f.event_id AND e.received_at = f.received_at AND e.app_id = f.app_id;
UPDATE facts.facts SET threats = '{}' WHERE threats IS NULL;
ALTER TABLE facts.facts ALTER COLUMN threats SET NOT NULL;

-- The pending work, by old rollup key, for the remainder computed below.
CREATE TEMP TABLE pending_work ON COMMIT DROP AS
SELECT occurred_at, country, device_model_id, os FROM facts.facts_to_process;

TRUNCATE facts.facts_to_process, facts.aggregate_staging;
ALTER TABLE facts.facts_to_process ADD COLUMN app_id text NOT NULL, ADD COLUMN threats text[] NOT NULL;
ALTER TABLE facts.aggregate_staging ADD COLUMN app_id text NOT NULL, ADD COLUMN threats text[] NOT NULL;

-- +goose StatementBegin
DO $$
DECLARE
    g   record;
    k   record;
    old text;
BEGIN
    FOR g IN SELECT * FROM (VALUES
        ('hour',  'timestamptz', $b$date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'$b$),
        ('day',   'date',        $b$(occurred_at AT TIME ZONE 'UTC')::date$b$),
        ('month', 'date',        $b$date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date$b$)) AS v(name, type, expr)
    LOOP
        FOR k IN SELECT * FROM (VALUES
            ('country', 'country', 'char(2)'),
            ('device_model', 'device_model_id', 'integer'),
            ('os', 'os', 'text')) AS v(name, col, type)
        LOOP
            old := format('events_by_%s_per_%s', k.name, g.name);
            EXECUTE format('ALTER TABLE facts.%I RENAME TO %I', old, old || '_old');
            -- Free the primary key's name for the new table.
            EXECUTE format('ALTER TABLE facts.%I RENAME CONSTRAINT %I TO %I', old || '_old', old || '_pkey', old || '_old_pkey');
            EXECUTE format('CREATE TABLE facts.%I (app_id text NOT NULL, bucket %s NOT NULL, %I %s NOT NULL, count bigint NOT NULL, PRIMARY KEY (app_id, bucket, %I))',
                           old, g.type, k.col, k.type, k.col);
            EXECUTE format('INSERT INTO facts.%I (app_id, bucket, %I, count) SELECT app_id, %s, %I, count(*) FROM facts.facts GROUP BY 1, 2, 3',
                           old, k.col, g.expr, k.col);
            EXECUTE format($q$
                INSERT INTO facts.%1$I (app_id, bucket, %2$I, count)
                SELECT '', o.bucket, o.%2$I, o.count + coalesce(p.n, 0) - coalesce(f.n, 0)
                  FROM facts.%3$I o
                  LEFT JOIN (SELECT %4$s AS bucket, %2$I AS key, count(*) AS n FROM pending_work GROUP BY 1, 2) p
                         ON p.bucket = o.bucket AND p.key = o.%2$I
                  LEFT JOIN (SELECT %4$s AS bucket, %2$I AS key, count(*) AS n FROM facts.facts GROUP BY 1, 2) f
                         ON f.bucket = o.bucket AND f.key = o.%2$I
                 WHERE o.count + coalesce(p.n, 0) - coalesce(f.n, 0) > 0$q$,
                           old, k.col, old || '_old', g.expr);
            EXECUTE format('DROP TABLE facts.%I', old || '_old');
            EXECUTE format('CREATE TABLE facts.%I (bucket %s NOT NULL, %I %s NOT NULL, count bigint NOT NULL, PRIMARY KEY (bucket, %I))',
                           'all_apps_' || old, g.type, k.col, k.type, k.col);
            EXECUTE format('INSERT INTO facts.%I (bucket, %I, count) SELECT bucket, %I, sum(count) FROM facts.%I GROUP BY 1, 2',
                           'all_apps_' || old, k.col, k.col, old);
            EXECUTE format('CREATE INDEX %I ON facts.%I (%I, bucket) INCLUDE (count)', 'all_apps_' || old || '_by_key', 'all_apps_' || old, k.col);
        END LOOP;
        EXECUTE format('CREATE TABLE facts.%I (app_id text NOT NULL, bucket %s NOT NULL, threat text NOT NULL, count bigint NOT NULL, PRIMARY KEY (app_id, bucket, threat))',
                       'events_by_threat_per_' || g.name, g.type);
        EXECUTE format('INSERT INTO facts.%I (app_id, bucket, threat, count) SELECT f.app_id, %s, t.threat, count(*) FROM facts.facts f, unnest(f.threats) AS t(threat) GROUP BY 1, 2, 3',
                       'events_by_threat_per_' || g.name, g.expr);
        EXECUTE format('CREATE TABLE facts.%I (bucket %s NOT NULL, threat text NOT NULL, count bigint NOT NULL, PRIMARY KEY (bucket, threat))',
                       'all_apps_events_by_threat_per_' || g.name, g.type);
        EXECUTE format('INSERT INTO facts.%I (bucket, threat, count) SELECT bucket, threat, sum(count) FROM facts.%I GROUP BY 1, 2',
                       'all_apps_events_by_threat_per_' || g.name, 'events_by_threat_per_' || g.name);
        EXECUTE format('CREATE INDEX %I ON facts.%I (threat, bucket) INCLUDE (count)', 'all_apps_events_by_threat_per_' || g.name || '_by_key', 'all_apps_events_by_threat_per_' || g.name);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Going back keeps the counts over all apps and loses the split by app and
-- the threat rollups; the work queue is folded first by the caller (run the
-- aggregator until facts.facts_to_process is empty), else its rows are lost.
LOCK TABLE facts.facts, facts.facts_to_process, facts.aggregate_staging IN ACCESS EXCLUSIVE MODE;
DROP TABLE facts.events_by_threat_per_hour, facts.events_by_threat_per_day, facts.events_by_threat_per_month;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT format('all_apps_events_by_%s_per_%s', k, g)
               FROM unnest(ARRAY['country', 'device_model', 'os', 'threat']) AS k, unnest(ARRAY['hour', 'day', 'month']) AS g
    LOOP
        EXECUTE format('DROP TABLE facts.%I', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    c text;
BEGIN
    FOR t, c IN SELECT format('events_by_%s_per_%s', k, g), col
                  FROM unnest(ARRAY['country', 'device_model', 'os'], ARRAY['country', 'device_model_id', 'os']) AS d(k, col),
                       unnest(ARRAY['hour', 'day', 'month']) AS g
    LOOP
        EXECUTE format('CREATE TABLE facts.%I AS SELECT bucket, %I, sum(count)::bigint AS count FROM facts.%I GROUP BY 1, 2', t || '_down', c, t);
        EXECUTE format('DROP TABLE facts.%I', t);
        EXECUTE format('ALTER TABLE facts.%I RENAME TO %I', t || '_down', t);
        EXECUTE format('ALTER TABLE facts.%I ALTER COLUMN count SET NOT NULL, ADD PRIMARY KEY (bucket, %I)', t, c);
    END LOOP;
END
$$;
-- +goose StatementEnd
TRUNCATE facts.facts_to_process, facts.aggregate_staging;
ALTER TABLE facts.facts_to_process DROP COLUMN app_id, DROP COLUMN threats;
ALTER TABLE facts.aggregate_staging DROP COLUMN app_id, DROP COLUMN threats;
ALTER TABLE facts.facts DROP COLUMN threats;
DROP FUNCTION facts.threat_types(jsonb);
