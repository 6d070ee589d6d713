-- +goose Up
-- The map over all apps from the devices per place and pair of recent days,
-- not from every device seen in the range (issue 40's bound: the analyst's
-- home page draws the previous day's map, All Events the last 7 days';
-- docs/investigation.md, "Performance").
--
-- Distinct devices per country and per grid cell are not sums of per-app
-- or per-day figures, so they are counted the way migration 000015 counts
-- devices over apps, per place. A place is a country (its two letters) or a
-- grid cell ("lat,lon": the comma tells them apart; events without a
-- location have no cell and count in their country only). They are kept
-- for the map of all events (threat ''), the one the home page and All
-- Events draw; a map of one threat type (All Events filtered by it) counts
-- that type's rows of inv_device_days, so a device's first event of a day
-- costs a row per place, not one per place and threat type it shows
-- (BenchmarkStore_Drain, every event a new device, many with threats: +68
-- µs of PostgreSQL CPU an event with every type kept).
--   inv_geo_place_recent  per threat type (only '': any event), place and
--                         device: its two most recent days there over all
--                         apps (prev_day NULL when one)
--   inv_geo_place_days    the devices per threat type, last day, place and
--                         previous day ('-infinity' for none). A device was
--                         in the place in [from, to) when its last day is
--                         in it, or its last day is at or after to and its
--                         previous day in it: a sum over the rows with
--                         last_day >= from, one day or seven alike. Devices
--                         whose two days are both at or after to (events
--                         dated ahead, a range in the past) are not told by
--                         the pair: the renderer then counts inv_device_days.
--   inv_geo_country_all   events per day, threat type and country over all
--                         apps (inv_geo_daily_all's, summed over cells).
-- Statement triggers keep them: on inv_device_days (a device's first
-- sighting in a day, threat, country and cell in its app, not every event)
-- the recency rows, on those the counts (facts.inv_count_pairs), on
-- inv_geo_daily the countries' events. So every writer of the day tables
-- (the processor, an erasure, a processor of the previous release during an
-- upgrade) keeps them exact without knowing them.
CREATE TABLE facts.inv_geo_place_recent (
    threat    text NOT NULL,
    place     text NOT NULL,
    device_id text NOT NULL,
    last_day  date NOT NULL,
    prev_day  date CHECK (prev_day < last_day),
    PRIMARY KEY (threat, place, device_id)
);
CREATE TABLE facts.inv_geo_place_days (
    threat   text   NOT NULL,
    last_day date   NOT NULL,
    place    text   NOT NULL,
    prev_day date   NOT NULL,
    devices  bigint NOT NULL,
    PRIMARY KEY (threat, last_day, place, prev_day)
);
CREATE TABLE facts.inv_geo_country_all (
    day     date    NOT NULL,
    threat  text    NOT NULL,
    country char(2) NOT NULL,
    events  bigint  NOT NULL,
    PRIMARY KEY (day, threat, country)
);

-- +goose StatementBegin
-- inv_count_pairs keeps a count of a recency table's rows (TG_ARGV[0], its
-- count column TG_ARGV[2]) per TG_ARGV[1] (the key columns before the pair)
-- and pair of days (last_day among the keys; prev_day '-infinity' for
-- none): inserted rows add one, updated rows move one from their old pair
-- to their new, deleted rows take one off. The transition tables hold the
-- rows as the statement found and left them, so concurrent writers keep
-- the counts exact. The arguments are the CREATE TRIGGER statements'
-- constants.
CREATE FUNCTION facts.inv_count_pairs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    target text := TG_ARGV[0];
    keys   text := TG_ARGV[1];
    n      text := TG_ARGV[2];
    src    text := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %s, prev_day, 1 AS n FROM inv_new', keys)
        WHEN 'UPDATE' THEN format('SELECT %s, prev_day, 1 AS n FROM inv_new UNION ALL SELECT %s, prev_day, -1 FROM inv_old', keys, keys)
        ELSE format('SELECT %s, prev_day, -1 AS n FROM inv_old', keys) END;
BEGIN
    EXECUTE format('INSERT INTO %s AS r (%s, prev_day, %I)
        SELECT %s, p, sum(n) FROM (SELECT *, coalesce(prev_day, ''-infinity'') AS p FROM (%s) y) x
        GROUP BY %s, p HAVING sum(n) <> 0 ORDER BY %s, p
        ON CONFLICT (%s, prev_day) DO UPDATE SET %I = r.%I + EXCLUDED.%I',
        target, keys, n, keys, src, keys, keys, keys, n, n, n);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- inv_geo_places_add merges the places of the devices' new day rows into
-- their recency rows (order-free and idempotent, as migration 000015's
-- inv_device_recent_add; a row that would not change is not rewritten).
CREATE FUNCTION facts.inv_geo_places_add() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO facts.inv_geo_place_recent AS r (threat, place, device_id, last_day, prev_day)
    SELECT threat, place, device_id, days[1], days[2]
    FROM (SELECT n.threat, p.place, n.device_id, (array_agg(DISTINCT n.day ORDER BY n.day DESC))[1:2] AS days
          FROM inv_new n, LATERAL (VALUES (n.country::text), (nullif(n.cell, ''))) p(place)
          WHERE n.threat = '' AND p.place IS NOT NULL GROUP BY 1, 2, 3) x
    ORDER BY 1, 2, 3
    ON CONFLICT (threat, place, device_id) DO UPDATE SET
        last_day = greatest(r.last_day, EXCLUDED.last_day),
        prev_day = facts.inv_second_day(greatest(r.last_day, EXCLUDED.last_day), r.last_day, r.prev_day, EXCLUDED.last_day, EXCLUDED.prev_day)
    WHERE EXCLUDED.last_day > r.last_day
       OR facts.inv_second_day(r.last_day, EXCLUDED.last_day, EXCLUDED.prev_day, NULL, NULL) > coalesce(r.prev_day, '-infinity');
    RETURN NULL;
END
$$;

-- inv_geo_places_forget rebuilds the recency rows of the places the deleted
-- day rows (an erasure) were in from the day rows left in every app, found
-- by the privacy service's index on (app_id, device_id), one descent per
-- app with events (facts.inv_apps), as migration 000015's forget functions.
CREATE FUNCTION facts.inv_geo_places_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH fresh AS (
        SELECT k.threat, k.place, k.device_id,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_device_days d
              WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.device_id = k.device_id
                AND d.threat = k.threat AND k.place IN (d.country::text, d.cell)) AS days
        FROM (SELECT DISTINCT o.threat, p.place, o.device_id
              FROM inv_old o, LATERAL (VALUES (o.country::text), (nullif(o.cell, ''))) p(place)
              WHERE o.threat = '' AND p.place IS NOT NULL) k
    ), gone AS (
        DELETE FROM facts.inv_geo_place_recent r USING fresh f
        WHERE f.days IS NULL AND (r.threat, r.place, r.device_id) = (f.threat, f.place, f.device_id)
    )
    UPDATE facts.inv_geo_place_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND (r.threat, r.place, r.device_id) = (f.threat, f.place, f.device_id)
      AND (r.last_day, r.prev_day) IS DISTINCT FROM (f.days[1], f.days[2]);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Writers wait while the tables are filled from what the day tables hold
-- and the triggers are made, so no sighting is missed or counted twice.
LOCK TABLE facts.inv_device_days, facts.inv_geo_daily IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO facts.inv_geo_place_recent (threat, place, device_id, last_day, prev_day)
SELECT threat, place, device_id, days[1], days[2]
FROM (SELECT d.threat, p.place, d.device_id, (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] AS days
      FROM facts.inv_device_days d, LATERAL (VALUES (d.country::text), (nullif(d.cell, ''))) p(place)
      WHERE d.threat = '' AND p.place IS NOT NULL GROUP BY 1, 2, 3) x;
INSERT INTO facts.inv_geo_place_days (threat, last_day, place, prev_day, devices)
SELECT threat, last_day, place, coalesce(prev_day, '-infinity'), count(*) FROM facts.inv_geo_place_recent GROUP BY 1, 2, 3, 4;
INSERT INTO facts.inv_geo_country_all (day, threat, country, events)
SELECT day, threat, country, sum(events) FROM facts.inv_geo_daily GROUP BY 1, 2, 3;

CREATE TRIGGER inv_geo_places_add AFTER INSERT ON facts.inv_device_days
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_geo_places_add();
CREATE TRIGGER inv_geo_places_forget AFTER DELETE ON facts.inv_device_days
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_geo_places_forget();
CREATE TRIGGER inv_geo_place_days_insert AFTER INSERT ON facts.inv_geo_place_recent
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_geo_place_days', 'threat, last_day, place', 'devices');
CREATE TRIGGER inv_geo_place_days_update AFTER UPDATE ON facts.inv_geo_place_recent
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_geo_place_days', 'threat, last_day, place', 'devices');
CREATE TRIGGER inv_geo_place_days_delete AFTER DELETE ON facts.inv_geo_place_recent
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_geo_place_days', 'threat, last_day, place', 'devices');
-- The countries' events as migration 000015 keeps the cells'.
CREATE TRIGGER inv_geo_country_all_insert AFTER INSERT ON facts.inv_geo_daily
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_country_all', 'day, threat, country', 'events');
CREATE TRIGGER inv_geo_country_all_update AFTER UPDATE ON facts.inv_geo_daily
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_country_all', 'day, threat, country', 'events');
CREATE TRIGGER inv_geo_country_all_delete AFTER DELETE ON facts.inv_geo_daily
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_country_all', 'day, threat, country', 'events');

-- The renderer reads them; the writers reach them through the triggers,
-- which run as their owner.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.inv_geo_place_recent, facts.inv_geo_place_days, facts.inv_geo_country_all TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER inv_geo_country_all_delete ON facts.inv_geo_daily;
DROP TRIGGER inv_geo_country_all_update ON facts.inv_geo_daily;
DROP TRIGGER inv_geo_country_all_insert ON facts.inv_geo_daily;
DROP TRIGGER inv_geo_place_days_delete ON facts.inv_geo_place_recent;
DROP TRIGGER inv_geo_place_days_update ON facts.inv_geo_place_recent;
DROP TRIGGER inv_geo_place_days_insert ON facts.inv_geo_place_recent;
DROP TRIGGER inv_geo_places_forget ON facts.inv_device_days;
DROP TRIGGER inv_geo_places_add ON facts.inv_device_days;
DROP FUNCTION facts.inv_geo_places_forget(), facts.inv_geo_places_add(), facts.inv_count_pairs();
DROP TABLE facts.inv_geo_country_all, facts.inv_geo_place_days, facts.inv_geo_place_recent;
