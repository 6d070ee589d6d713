-- +goose Up
-- The rollups over all apps (facts.all_apps_events_by_<dim>_per_<grain>)
-- kept as one row per shard, summed when read (issue 38). Every shard's
-- processor counts its batches into the same few rows (one per hour and
-- country, say), so with one row per key the second shard's upsert waited
-- for the first shard's COMMIT on every batch. Each writer's rows now carry
-- its shard, read like alerts.outbox's (migration 000023) from the session
-- setting threatview.shard that the processor sets on each connection
-- (unset: shard 0, as an unsharded processor, an older one and every other
-- writer use), and the key is (bucket, key, shard).
--
-- Readers sum a key's rows. The privacy erasure subtracts in shard 0's row
-- (it may go below zero when another shard counted the events; the sum is
-- what is read) and removes a row at exactly zero; a key whose rows sum to
-- zero without being zero each is not shown (readers drop sums of 0).
-- Rows already stored are shard 0's, and the default is stable, so the
-- tables are not rewritten.
-- +goose StatementBegin
DO $$
DECLARE
    k record;
    g text;
    t text;
BEGIN
    FOR k IN SELECT * FROM (VALUES ('country', 'country'), ('device_model', 'device_model_id'), ('os', 'os'), ('threat', 'threat')) AS v(name, col) LOOP
        FOREACH g IN ARRAY ARRAY['hour', 'day', 'month'] LOOP
            t := format('all_apps_events_by_%s_per_%s', k.name, g);
            EXECUTE format($f$ALTER TABLE facts.%I ADD COLUMN shard smallint NOT NULL
                DEFAULT coalesce(nullif(current_setting('threatview.shard', true), ''), '0')::smallint CHECK (shard >= 0)$f$, t);
            EXECUTE format('ALTER TABLE facts.%I DROP CONSTRAINT %I, ADD PRIMARY KEY (bucket, %I, shard)', t, t || '_pkey', k.col);
            -- The erasure now upserts its decrement (a row of shard 0
            -- may not exist yet). As in 000091, only a role that exists.
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
                EXECUTE format('GRANT INSERT ON facts.%I TO threatview_privacy', t);
            END IF;
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Back to one row per key: each key's rows summed into one (a key summing
-- to zero or less is dropped, as the erasure did).
-- +goose StatementBegin
DO $$
DECLARE
    k record;
    g text;
    t text;
BEGIN
    FOR k IN SELECT * FROM (VALUES ('country', 'country'), ('device_model', 'device_model_id'), ('os', 'os'), ('threat', 'threat')) AS v(name, col) LOOP
        FOREACH g IN ARRAY ARRAY['hour', 'day', 'month'] LOOP
            t := format('all_apps_events_by_%s_per_%s', k.name, g);
            EXECUTE format('CREATE TEMP TABLE summed ON COMMIT DROP AS SELECT bucket, %1$I, sum(count)::bigint AS count FROM facts.%2$I GROUP BY 1, 2 HAVING sum(count) > 0', k.col, t);
            EXECUTE format('TRUNCATE facts.%I', t);
            EXECUTE format('ALTER TABLE facts.%I DROP CONSTRAINT %I, DROP COLUMN shard', t, t || '_pkey');
            EXECUTE format('INSERT INTO facts.%1$I (bucket, %2$I, count) SELECT bucket, %2$I, count FROM summed', t, k.col);
            EXECUTE format('ALTER TABLE facts.%I ADD PRIMARY KEY (bucket, %I)', t, k.col);
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
                EXECUTE format('REVOKE INSERT ON facts.%I FROM threatview_privacy', t);
            END IF;
            DROP TABLE summed;
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd
