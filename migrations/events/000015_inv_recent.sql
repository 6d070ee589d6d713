-- +goose Up
-- Fast exact reads for the investigation API over all apps (issue 39's
-- bounds; docs/investigation.md, "Performance").
--
-- Distinct users and devices over all apps. A recency table keeps, per
-- subject (and for devices per threat type, '' for any event), the two
-- most recent DISTINCT days it was seen in any app (last_day > prev_day;
-- prev_day NULL when seen on one day only). A subject was seen in
-- [from, to) when last_day is in [from, to), or last_day >= to and
-- prev_day is in [from, to); when both are >= to (events dated after
-- today, or a range ending before yesterday) the renderer looks the subject
-- up in the day table. So "today", "the last 7 days" and any range ending
-- today are one index range scan counting rows, exact, and "yesterday"
-- nearly so. One app's counts stay count(DISTINCT) over the day tables,
-- whose primary keys lead with (day, threat, app_id) / (day, app_id): one
-- app's rows of 7 days are a few thousand, and keeping per-app rows here
-- too would double this table's writes.
--
-- Statement triggers on the day tables (below) keep them: an insert merges
-- the rows the statement actually inserted (a subject's first sighting in a
-- day; later events that day reach nothing) with facts.inv_second_day,
-- order-free and idempotent; a delete (an erasure, old days dropped)
-- rebuilds the subjects' rows from the day rows left (facts.inv_apps
-- below). Every writer keeps them exact
-- without knowing them: the processor, the privacy service, a processor of
-- the previous release during an upgrade.
CREATE TABLE facts.inv_device_recent (
    device_id text NOT NULL,
    threat    text NOT NULL,
    last_day  date NOT NULL,
    prev_day  date CHECK (prev_day < last_day),
    PRIMARY KEY (device_id, threat)
);
CREATE INDEX inv_device_recent_by_day ON facts.inv_device_recent (threat, last_day) INCLUDE (prev_day);

CREATE TABLE facts.inv_user_recent (
    user_pseudonym text NOT NULL,
    last_day       date NOT NULL,
    prev_day       date CHECK (prev_day < last_day),
    PRIMARY KEY (user_pseudonym)
);
CREATE INDEX inv_user_recent_by_day ON facts.inv_user_recent (last_day) INCLUDE (prev_day);

-- inv_apps lists the apps with events (facts.inv_daily's): a subject's day
-- rows in every app are then found by the privacy service's indexes on
-- (app_id, subject) (inv_device_days_by_subject, inv_daily_users_by_user),
-- one descent per app, rather than by more indexes on the write path.
-- +goose StatementBegin
CREATE FUNCTION facts.inv_apps() RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT app_id), '{}') FROM facts.inv_daily
$$;
-- +goose StatementEnd

-- inv_threat_daily_all and inv_geo_daily_all: facts.inv_threat_daily and
-- inv_geo_daily summed over all apps, so a threat report or a map over all
-- apps reads one row per key and day, not one per app. Kept by triggers on
-- the per-app tables (below), so whatever changes those (the processor's
-- writes, an erasure's subtraction) changes these.
CREATE TABLE facts.inv_threat_daily_all (
    day    date   NOT NULL,
    threat text   NOT NULL,
    dim    text   NOT NULL,
    key    text   NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (day, threat, dim, key)
);
CREATE TABLE facts.inv_geo_daily_all (
    day     date    NOT NULL,
    threat  text    NOT NULL,
    country char(2) NOT NULL,
    cell    text    NOT NULL,
    events  bigint  NOT NULL,
    PRIMARY KEY (day, threat, country, cell)
);

-- Search by threat type (GET /v1/events?threat=): an index led by the
-- event's first threat type, newest first within it, and the events with
-- more than one type by time (a type in second place or later is found
-- there). events_threats_by_time stays for the category filter. Costs: one
-- entry per threat event, one per event with two or more types.
CREATE INDEX events_by_first_threat ON events.events ((threat_types[1]), received_at, id) WHERE threat_types <> '{}';
CREATE INDEX events_multi_threat_by_time ON events.events (received_at, id) WHERE cardinality(threat_types) > 1;

-- +goose StatementBegin
-- inv_second_day is the greatest of a, b, c, d below top (NULL if none):
-- with top = greatest(old last, new last), the new prev_day.
CREATE FUNCTION facts.inv_second_day(top date, a date, b date, c date, d date) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(CASE WHEN a < top THEN a END, CASE WHEN b < top THEN b END,
                    CASE WHEN c < top THEN c END, CASE WHEN d < top THEN d END)
$$;

CREATE FUNCTION facts.inv_device_recent_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts.inv_device_recent AS r (device_id, threat, last_day, prev_day)
    SELECT device_id, threat, days[1], days[2]
    FROM (SELECT device_id, threat, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
          FROM inv_new GROUP BY 1, 2) x
    ORDER BY 1, 2
    ON CONFLICT (device_id, threat) DO UPDATE SET
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
    WITH fresh AS (
        SELECT g.device_id, g.threat,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_device_days d
              WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.device_id = g.device_id AND d.threat = g.threat) AS days
        FROM (SELECT DISTINCT device_id, threat FROM inv_old) g
    ), del AS (
        DELETE FROM facts.inv_device_recent r USING fresh f
        WHERE f.days IS NULL AND r.device_id = f.device_id AND r.threat = f.threat
    )
    UPDATE facts.inv_device_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.device_id = f.device_id AND r.threat = f.threat
      AND (r.last_day, r.prev_day) IS DISTINCT FROM (f.days[1], f.days[2]);
    RETURN NULL;
END
$$;

CREATE FUNCTION facts.inv_user_recent_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts.inv_user_recent AS r (user_pseudonym, last_day, prev_day)
    SELECT user_pseudonym, days[1], days[2]
    FROM (SELECT user_pseudonym, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
          FROM inv_new GROUP BY 1) x
    ORDER BY 1
    ON CONFLICT (user_pseudonym) DO UPDATE SET
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
    WITH fresh AS (
        SELECT g.user_pseudonym,
            (SELECT (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] FROM facts.inv_daily_users d
              WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.user_pseudonym = g.user_pseudonym) AS days
        FROM (SELECT DISTINCT user_pseudonym FROM inv_old) g
    ), del AS (
        DELETE FROM facts.inv_user_recent r USING fresh f
        WHERE f.days IS NULL AND r.user_pseudonym = f.user_pseudonym
    )
    UPDATE facts.inv_user_recent r SET last_day = f.days[1], prev_day = f.days[2]
    FROM fresh f
    WHERE f.days IS NOT NULL AND r.user_pseudonym = f.user_pseudonym
      AND (r.last_day, r.prev_day) IS DISTINCT FROM (f.days[1], f.days[2]);
    RETURN NULL;
END
$$;

-- inv_sum_over_apps keeps a summary over apps (TG_ARGV[0]) of the table
-- it is a trigger of, whose key columns are TG_ARGV[1] (without app_id)
-- and whose count column is TG_ARGV[2]: inserted rows add, updated rows
-- add new minus old, deleted rows subtract; a key left at zero is deleted. The arguments are the
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
    -- A key an erasure took to zero goes, so no list shows it counted 0.
    IF TG_OP <> 'INSERT' THEN
        EXECUTE format('DELETE FROM %s WHERE %I = 0 AND (%s) IN (SELECT %s FROM inv_old)', target, n, keys, keys);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Writers wait while the tables are filled from what the day tables hold
-- and the triggers are made, so no row is missed or counted twice.
LOCK TABLE facts.inv_device_days, facts.inv_daily_users, facts.inv_threat_daily, facts.inv_geo_daily
    IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO facts.inv_device_recent (device_id, threat, last_day, prev_day)
SELECT device_id, threat, days[1], days[2]
FROM (SELECT device_id, threat, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
      FROM facts.inv_device_days GROUP BY 1, 2) x;
INSERT INTO facts.inv_user_recent (user_pseudonym, last_day, prev_day)
SELECT user_pseudonym, days[1], days[2]
FROM (SELECT user_pseudonym, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
      FROM facts.inv_daily_users GROUP BY 1) x;
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

-- The writers of the day tables write these through the triggers; the
-- renderer reads them.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor') THEN
        GRANT SELECT, INSERT, UPDATE ON facts.inv_device_recent, facts.inv_user_recent,
            facts.inv_threat_daily_all, facts.inv_geo_daily_all TO threatview_processor;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        GRANT SELECT, INSERT, UPDATE, DELETE ON facts.inv_device_recent, facts.inv_user_recent TO threatview_privacy;
        GRANT SELECT, INSERT, UPDATE, DELETE ON facts.inv_threat_daily_all, facts.inv_geo_daily_all TO threatview_privacy;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.inv_device_recent, facts.inv_user_recent,
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
DROP FUNCTION facts.inv_apps(), facts.inv_sum_over_apps(), facts.inv_user_recent_forget(), facts.inv_user_recent_add(),
    facts.inv_device_recent_forget(), facts.inv_device_recent_add(), facts.inv_second_day(date, date, date, date, date);
DROP TABLE facts.inv_geo_daily_all, facts.inv_threat_daily_all, facts.inv_user_recent, facts.inv_device_recent;
