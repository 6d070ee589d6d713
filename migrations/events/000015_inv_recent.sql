-- +goose Up
-- Fast exact distinct counts for the investigation API (issue 39's bounds;
-- docs/investigation.md, "Performance").
--
-- The recency tables keep, per scope and subject, the two most recent
-- DISTINCT days the subject was seen (last_day > prev_day; prev_day NULL
-- when seen on one day only). A subject seen in [from, to) is then one with
--   last_day in [from, to), or last_day >= to and prev_day in [from, to),
-- which is exact whenever no subject of the scope has prev_day >= to: true
-- for "today", "the last 7 days" and any range ending today (prev_day is
-- before last_day, and last_day is at most today but for clock-skewed
-- events), and for "yesterday" unless a device has events dated after
-- today. The renderer checks this (rows with last_day > to are few) and
-- otherwise counts over the day tables, exact and slower. Triggers on the
-- day tables (below) fold their new rows in, in the statement that writes
-- them (facts.inv_second_day keeps the top two of the old and new days):
-- merging is order-free and idempotent.
--
-- Scopes: app_id is the app or '' for all apps (so the all-apps count is a
-- count of rows, not a DISTINCT over apps); threat is '' (any event) or one
-- threat type. The primary keys lead with the subject, so an erasure finds
-- a subject's rows in every app and rebuilds its all-apps rows from the
-- apps left; the by_day indexes serve the counts.
CREATE TABLE facts.inv_device_recent (
    device_id text NOT NULL,
    threat    text NOT NULL,
    app_id    text NOT NULL,
    last_day  date NOT NULL,
    prev_day  date CHECK (prev_day < last_day),
    PRIMARY KEY (device_id, threat, app_id)
);
CREATE INDEX inv_device_recent_by_day ON facts.inv_device_recent (app_id, threat, last_day) INCLUDE (prev_day);

-- inv_place_recent: the same for the map's places of any event (threat
-- ''): place is 'c:' and the country, or 'g:' and the grid cell ("lat,lon";
-- none without a location), so the map's devices per country and per cell
-- (K-anonymity) are counts of rows too.
CREATE TABLE facts.inv_place_recent (
    device_id text NOT NULL,
    place     text NOT NULL,
    app_id    text NOT NULL,
    last_day  date NOT NULL,
    prev_day  date CHECK (prev_day < last_day),
    PRIMARY KEY (device_id, place, app_id)
);
CREATE INDEX inv_place_recent_by_day ON facts.inv_place_recent (app_id, last_day) INCLUDE (prev_day, place);

CREATE TABLE facts.inv_user_recent (
    user_pseudonym text NOT NULL,
    app_id         text NOT NULL,
    last_day       date NOT NULL,
    prev_day       date CHECK (prev_day < last_day),
    PRIMARY KEY (user_pseudonym, app_id)
);
CREATE INDEX inv_user_recent_by_day ON facts.inv_user_recent (app_id, last_day) INCLUDE (prev_day);

-- inv_threat_daily_all: facts.inv_threat_daily summed over all apps, so a
-- threat report over all apps reads a few thousand rows, not every app's.
-- Kept by triggers on inv_threat_daily (below), so whatever changes that
-- table (the processor's writes, an erasure's subtraction) changes this.
CREATE TABLE facts.inv_threat_daily_all (
    day    date   NOT NULL,
    threat text   NOT NULL,
    dim    text   NOT NULL,
    key    text   NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (day, threat, dim, key)
);

-- inv_geo_daily_all: facts.inv_geo_daily summed over all apps (the map's
-- event counts over all apps), kept the same way.
CREATE TABLE facts.inv_geo_daily_all (
    day     date    NOT NULL,
    threat  text    NOT NULL,
    country char(2) NOT NULL,
    cell    text    NOT NULL,
    events  bigint  NOT NULL,
    PRIMARY KEY (day, threat, country, cell)
);

-- inv_second_day is the greatest of a, b, c, d below top (NULL if none):
-- with top = greatest(old last, new last), the new prev_day.
-- +goose StatementBegin
CREATE FUNCTION facts.inv_second_day(top date, a date, b date, c date, d date) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(CASE WHEN a < top THEN a END, CASE WHEN b < top THEN b END,
                    CASE WHEN c < top THEN c END, CASE WHEN d < top THEN d END)
$$;
-- +goose StatementEnd

-- Search by threat type (GET /v1/events?threat=): an index led by the
-- event's first threat type, newest first within it, and the events with
-- more than one type by time (a type in second place or later is found
-- there). events_threats_by_time stays for the category filter. Costs: one
-- entry per threat event, one per event with two or more types.
CREATE INDEX events_by_first_threat ON events.events ((threat_types[1]), received_at, id) WHERE threat_types <> '{}';
CREATE INDEX events_multi_threat_by_time ON events.events (received_at, id) WHERE cardinality(threat_types) > 1;

-- Kept by statement triggers on the day tables, so every writer keeps them
-- exact without knowing them: the processor's inserts (only the rows it
-- actually inserts, the first sighting of a subject in a day, reach the
-- trigger), the privacy service's erasures (the subject's rows are
-- rebuilt from the day rows left, the all-apps rows from the apps left, or
-- deleted), a processor of the previous release during an upgrade, and
-- any later deletion of old days. Transition tables hold only the
-- statement's rows, so each trigger costs one or two statements a batch.
-- +goose StatementBegin
CREATE FUNCTION facts.inv_device_recent_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts.inv_device_recent AS r (device_id, threat, app_id, last_day, prev_day)
    SELECT device_id, threat, app, days[1], days[2]
    FROM (SELECT n.device_id, n.threat, a.app, (array_agg(DISTINCT n.day ORDER BY n.day DESC))[1:2] AS days
          FROM inv_new n CROSS JOIN LATERAL (VALUES (n.app_id), ('')) AS a(app)
          GROUP BY 1, 2, 3) x
    ORDER BY 1, 2, 3
    ON CONFLICT (device_id, threat, app_id) DO UPDATE SET
        last_day = greatest(r.last_day, EXCLUDED.last_day),
        prev_day = facts.inv_second_day(greatest(r.last_day, EXCLUDED.last_day), r.last_day, r.prev_day, EXCLUDED.last_day, EXCLUDED.prev_day)
    WHERE EXCLUDED.last_day > r.last_day
       OR facts.inv_second_day(r.last_day, EXCLUDED.last_day, EXCLUDED.prev_day, NULL, NULL) > coalesce(r.prev_day, '-infinity');
    INSERT INTO facts.inv_place_recent AS r (device_id, place, app_id, last_day, prev_day)
    SELECT device_id, place, app, days[1], days[2]
    FROM (SELECT n.device_id, p.place, a.app, (array_agg(DISTINCT n.day ORDER BY n.day DESC))[1:2] AS days
          FROM inv_new n CROSS JOIN LATERAL (VALUES (n.app_id), ('')) AS a(app)
              CROSS JOIN LATERAL (VALUES ('c:' || n.country), ('g:' || nullif(n.cell, ''))) AS p(place)
          WHERE n.threat = '' AND p.place IS NOT NULL
          GROUP BY 1, 2, 3) x
    ORDER BY 1, 2, 3
    ON CONFLICT (device_id, place, app_id) DO UPDATE SET
        last_day = greatest(r.last_day, EXCLUDED.last_day),
        prev_day = facts.inv_second_day(greatest(r.last_day, EXCLUDED.last_day), r.last_day, r.prev_day, EXCLUDED.last_day, EXCLUDED.prev_day)
    WHERE EXCLUDED.last_day > r.last_day
       OR facts.inv_second_day(r.last_day, EXCLUDED.last_day, EXCLUDED.prev_day, NULL, NULL) > coalesce(r.prev_day, '-infinity');
    RETURN NULL;
END
$$;
CREATE FUNCTION facts.inv_device_recent_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The subjects' rows in their apps, from the day rows left.
    WITH gone AS (
        SELECT DISTINCT device_id, threat, app_id FROM inv_old
    ), fresh AS (
        SELECT g.device_id, g.threat, g.app_id,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_device_days d
              WHERE d.app_id = g.app_id AND d.device_id = g.device_id AND d.threat = g.threat) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_device_recent r USING fresh f
        WHERE f.days IS NULL AND r.device_id = f.device_id AND r.threat = f.threat AND r.app_id = f.app_id
    )
    UPDATE facts.inv_device_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.device_id = f.device_id AND r.threat = f.threat AND r.app_id = f.app_id;
    -- Their all-apps rows, from their rows in the apps left: the top two
    -- days of a union are the top two of the parts' top twos.
    WITH gone AS (
        SELECT DISTINCT device_id, threat FROM inv_old
    ), fresh AS (
        SELECT g.device_id, g.threat,
            (SELECT (array_agg(DISTINCT v.day ORDER BY v.day DESC))[1:2] FROM facts.inv_device_recent r
               CROSS JOIN LATERAL (VALUES (r.last_day), (r.prev_day)) AS v(day)
              WHERE r.device_id = g.device_id AND r.threat = g.threat AND r.app_id <> '' AND v.day IS NOT NULL) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_device_recent r USING fresh f
        WHERE f.days IS NULL AND r.device_id = f.device_id AND r.threat = f.threat AND r.app_id = ''
    )
    UPDATE facts.inv_device_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.device_id = f.device_id AND r.threat = f.threat AND r.app_id = '';
    -- Their places, the same way.
    WITH gone AS (
        SELECT DISTINCT o.device_id, p.place, o.app_id, o.country, o.cell FROM inv_old o
        CROSS JOIN LATERAL (VALUES ('c:' || o.country), ('g:' || nullif(o.cell, ''))) AS p(place)
        WHERE o.threat = '' AND p.place IS NOT NULL
    ), fresh AS (
        SELECT g.device_id, g.place, g.app_id,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_device_days d
              WHERE d.app_id = g.app_id AND d.device_id = g.device_id AND d.threat = ''
                AND CASE WHEN g.place LIKE 'c:%' THEN d.country = g.country ELSE d.cell = g.cell END) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_place_recent r USING fresh f
        WHERE f.days IS NULL AND r.device_id = f.device_id AND r.place = f.place AND r.app_id = f.app_id
    )
    UPDATE facts.inv_place_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.device_id = f.device_id AND r.place = f.place AND r.app_id = f.app_id;
    WITH gone AS (
        SELECT DISTINCT o.device_id, p.place FROM inv_old o
        CROSS JOIN LATERAL (VALUES ('c:' || o.country), ('g:' || nullif(o.cell, ''))) AS p(place)
        WHERE o.threat = '' AND p.place IS NOT NULL
    ), fresh AS (
        SELECT g.device_id, g.place,
            (SELECT (array_agg(DISTINCT v.day ORDER BY v.day DESC))[1:2] FROM facts.inv_place_recent r
               CROSS JOIN LATERAL (VALUES (r.last_day), (r.prev_day)) AS v(day)
              WHERE r.device_id = g.device_id AND r.place = g.place AND r.app_id <> '' AND v.day IS NOT NULL) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_place_recent r USING fresh f
        WHERE f.days IS NULL AND r.device_id = f.device_id AND r.place = f.place AND r.app_id = ''
    )
    UPDATE facts.inv_place_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.device_id = f.device_id AND r.place = f.place AND r.app_id = '';
    RETURN NULL;
END
$$;
CREATE FUNCTION facts.inv_user_recent_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts.inv_user_recent AS r (user_pseudonym, app_id, last_day, prev_day)
    SELECT user_pseudonym, app, days[1], days[2]
    FROM (SELECT n.user_pseudonym, a.app, (array_agg(DISTINCT n.day ORDER BY n.day DESC))[1:2] AS days
          FROM inv_new n CROSS JOIN LATERAL (VALUES (n.app_id), ('')) AS a(app)
          GROUP BY 1, 2) x
    ORDER BY 1, 2
    ON CONFLICT (user_pseudonym, app_id) DO UPDATE SET
        last_day = greatest(r.last_day, EXCLUDED.last_day),
        prev_day = facts.inv_second_day(greatest(r.last_day, EXCLUDED.last_day), r.last_day, r.prev_day, EXCLUDED.last_day, EXCLUDED.prev_day)
    WHERE EXCLUDED.last_day > r.last_day
       OR facts.inv_second_day(r.last_day, EXCLUDED.last_day, EXCLUDED.prev_day, NULL, NULL) > coalesce(r.prev_day, '-infinity');
    RETURN NULL;
END
$$;
CREATE FUNCTION facts.inv_user_recent_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        SELECT DISTINCT user_pseudonym, app_id FROM inv_old
    ), fresh AS (
        SELECT g.user_pseudonym, g.app_id,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_daily_users d
              WHERE d.app_id = g.app_id AND d.user_pseudonym = g.user_pseudonym) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_user_recent r USING fresh f
        WHERE f.days IS NULL AND r.user_pseudonym = f.user_pseudonym AND r.app_id = f.app_id
    )
    UPDATE facts.inv_user_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.user_pseudonym = f.user_pseudonym AND r.app_id = f.app_id;
    WITH gone AS (
        SELECT DISTINCT user_pseudonym FROM inv_old
    ), fresh AS (
        SELECT g.user_pseudonym,
            (SELECT (array_agg(DISTINCT v.day ORDER BY v.day DESC))[1:2] FROM facts.inv_user_recent r
               CROSS JOIN LATERAL (VALUES (r.last_day), (r.prev_day)) AS v(day)
              WHERE r.user_pseudonym = g.user_pseudonym AND r.app_id <> '' AND v.day IS NOT NULL) AS days
        FROM gone g
    ), del AS (
        DELETE FROM facts.inv_user_recent r USING fresh f
        WHERE f.days IS NULL AND r.user_pseudonym = f.user_pseudonym AND r.app_id = ''
    )
    UPDATE facts.inv_user_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.user_pseudonym = f.user_pseudonym AND r.app_id = '';
    RETURN NULL;
END
$$;
-- inv_sum_over_apps keeps a summary over apps (TG_ARGV[0]) of the table
-- it is a trigger of, whose key columns are TG_ARGV[1] (without app_id)
-- and whose count column is TG_ARGV[2]: inserted rows add, updated rows
-- add new minus old, deleted rows subtract. The arguments are the
-- constants of the CREATE TRIGGER statements below.
CREATE FUNCTION facts.inv_sum_over_apps() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    target text := TG_ARGV[0];
    keys   text := TG_ARGV[1];
    n      text := TG_ARGV[2];
    src    text := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %s, %I AS n FROM inv_new', keys, n)
        WHEN 'UPDATE' THEN format('SELECT %s, %I AS n FROM inv_new UNION ALL SELECT %s, -%I FROM inv_old', keys, n, keys, n)
        ELSE format('SELECT %s, -%I AS n FROM inv_old', keys, n) END;
BEGIN
    EXECUTE format('INSERT INTO %s AS r (%s, %I) SELECT %s, sum(n) FROM (%s) x GROUP BY %s HAVING sum(n) <> 0 ORDER BY %s
        ON CONFLICT (%s) DO UPDATE SET %I = r.%I + EXCLUDED.%I',
        target, keys, n, keys, src, keys, keys, keys, n, n, n);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Writers wait while the tables are filled from what the day tables hold
-- and the triggers are made, so no row is missed or counted twice.
LOCK TABLE facts.inv_device_days, facts.inv_daily_users, facts.inv_threat_daily, facts.inv_geo_daily IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO facts.inv_device_recent (device_id, threat, app_id, last_day, prev_day)
SELECT device_id, threat, app, days[1], days[2]
FROM (SELECT device_id, threat, a.app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
      FROM facts.inv_device_days CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app)
      GROUP BY 1, 2, 3) x;
INSERT INTO facts.inv_user_recent (user_pseudonym, app_id, last_day, prev_day)
SELECT user_pseudonym, app, days[1], days[2]
FROM (SELECT user_pseudonym, a.app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
      FROM facts.inv_daily_users CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app)
      GROUP BY 1, 2) x;
INSERT INTO facts.inv_place_recent (device_id, place, app_id, last_day, prev_day)
SELECT device_id, place, app, days[1], days[2]
FROM (SELECT device_id, p.place, a.app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
      FROM facts.inv_device_days CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app)
          CROSS JOIN LATERAL (VALUES ('c:' || country), ('g:' || nullif(cell, ''))) AS p(place)
      WHERE threat = '' AND p.place IS NOT NULL
      GROUP BY 1, 2, 3) x;
INSERT INTO facts.inv_threat_daily_all (day, threat, dim, key, count)
SELECT day, threat, dim, key, sum(count) FROM facts.inv_threat_daily GROUP BY 1, 2, 3, 4;
INSERT INTO facts.inv_geo_daily_all (day, threat, country, cell, events)
SELECT day, threat, country, cell, sum(events) FROM facts.inv_geo_daily GROUP BY 1, 2, 3, 4;

CREATE TRIGGER inv_device_recent_add AFTER INSERT ON facts.inv_device_days
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_device_recent_add();
CREATE TRIGGER inv_device_recent_forget AFTER DELETE ON facts.inv_device_days
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_device_recent_forget();
CREATE TRIGGER inv_user_recent_add AFTER INSERT ON facts.inv_daily_users
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_user_recent_add();
CREATE TRIGGER inv_user_recent_forget AFTER DELETE ON facts.inv_daily_users
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_user_recent_forget();
CREATE TRIGGER inv_threat_daily_all_insert AFTER INSERT ON facts.inv_threat_daily
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_threat_daily_all', 'day, threat, dim, key', 'count');
CREATE TRIGGER inv_threat_daily_all_update AFTER UPDATE ON facts.inv_threat_daily
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_threat_daily_all', 'day, threat, dim, key', 'count');
CREATE TRIGGER inv_threat_daily_all_delete AFTER DELETE ON facts.inv_threat_daily
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_threat_daily_all', 'day, threat, dim, key', 'count');
CREATE TRIGGER inv_geo_daily_all_insert AFTER INSERT ON facts.inv_geo_daily
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_daily_all', 'day, threat, country, cell', 'events');
CREATE TRIGGER inv_geo_daily_all_update AFTER UPDATE ON facts.inv_geo_daily
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_daily_all', 'day, threat, country, cell', 'events');
CREATE TRIGGER inv_geo_daily_all_delete AFTER DELETE ON facts.inv_geo_daily
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_sum_over_apps(
        'facts.inv_geo_daily_all', 'day, threat, country, cell', 'events');

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor') THEN
        GRANT SELECT, INSERT, UPDATE ON facts.inv_device_recent, facts.inv_user_recent, facts.inv_place_recent,
            facts.inv_threat_daily_all, facts.inv_geo_daily_all TO threatview_processor;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        GRANT SELECT, INSERT, UPDATE, DELETE ON facts.inv_device_recent, facts.inv_user_recent, facts.inv_place_recent TO threatview_privacy;
        GRANT SELECT, INSERT, UPDATE ON facts.inv_threat_daily_all, facts.inv_geo_daily_all TO threatview_privacy;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.inv_device_recent, facts.inv_user_recent, facts.inv_place_recent,
            facts.inv_threat_daily_all, facts.inv_geo_daily_all TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX events.events_multi_threat_by_time, events.events_by_first_threat;
DROP TRIGGER inv_geo_daily_all_delete ON facts.inv_geo_daily;
DROP TRIGGER inv_geo_daily_all_update ON facts.inv_geo_daily;
DROP TRIGGER inv_geo_daily_all_insert ON facts.inv_geo_daily;
DROP TRIGGER inv_threat_daily_all_delete ON facts.inv_threat_daily;
DROP TRIGGER inv_threat_daily_all_update ON facts.inv_threat_daily;
DROP TRIGGER inv_threat_daily_all_insert ON facts.inv_threat_daily;
DROP TRIGGER inv_user_recent_forget ON facts.inv_daily_users;
DROP TRIGGER inv_user_recent_add ON facts.inv_daily_users;
DROP TRIGGER inv_device_recent_forget ON facts.inv_device_days;
DROP TRIGGER inv_device_recent_add ON facts.inv_device_days;
DROP FUNCTION facts.inv_sum_over_apps(), facts.inv_user_recent_forget(), facts.inv_user_recent_add(),
    facts.inv_device_recent_forget(), facts.inv_device_recent_add();
DROP FUNCTION facts.inv_second_day(date, date, date, date, date);
DROP TABLE facts.inv_geo_daily_all, facts.inv_threat_daily_all, facts.inv_user_recent, facts.inv_place_recent,
    facts.inv_device_recent;
