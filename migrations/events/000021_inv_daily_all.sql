-- +goose Up
-- Unique devices and users of one day over all apps, counted as they come
-- (issue 40: the analyst's home page shows the previous day's numbers with
-- the day before beside them; docs/investigation.md, "Performance"). The
-- recency pairs of migration 000020 tell a range ending today or yesterday;
-- the day before yesterday is past them (a subject seen then and on both
-- days since has neither as its two most recent days), and counting its
-- day rows grows with the devices active that day.
--
-- A subject's day is new over all apps when it is after the subject's last
-- day, or between its two most recent days, or the subject has none yet;
-- only a day older than its previous day (a late event) is looked up in
-- the day table's other apps. The recency rows are found by key from a
-- list (= ANY(ARRAY(...))): the planner knows nothing of a transition
-- table's size, and a join let it read the whole recency table per
-- statement; and the look-up runs only for a day before a known previous
-- day (with prev_day NULL, "n.day < prev_day AND ..." is NULL, not false,
-- and ran the look-up for every repeated subject: BenchmarkStore_InvRecent
-- measured +400-760 µs of PostgreSQL CPU an event). The recency row is read as it was before the
-- statement (these triggers fire before 000015's recency triggers, whose
-- names sort after theirs), locked first in key order as the recency
-- upsert locks it, so a second writer of the same subject waits, and its
-- count (a statement of its own, with a snapshot taken after the wait) then
-- sees the first writer's day rows and recency. Two writers adding the same brand-new subject at once
-- in two apps on two shards would both count it: a device id is an app
-- install's, so that takes one id in two apps, first seen at the same
-- moment.
CREATE TABLE facts.inv_daily_all (
    day     date   PRIMARY KEY,
    devices bigint NOT NULL DEFAULT 0,
    users   bigint NOT NULL DEFAULT 0
);

-- +goose StatementBegin
CREATE FUNCTION facts.inv_daily_devices_add() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM facts.inv_device_recent
    WHERE threat = '' AND device_id = ANY(ARRAY(SELECT DISTINCT device_id FROM inv_new WHERE threat = ''))
    ORDER BY device_id FOR UPDATE;
    WITH n AS (
        SELECT DISTINCT device_id, day FROM inv_new WHERE threat = ''
    ), r AS (
        SELECT device_id, last_day, prev_day FROM facts.inv_device_recent
        WHERE threat = '' AND device_id = ANY(ARRAY(SELECT DISTINCT device_id FROM n))
    ), fresh AS (
        SELECT n.day FROM n LEFT JOIN r USING (device_id)
        WHERE r.device_id IS NULL OR n.day > r.last_day
           OR (n.day < r.last_day AND n.day > coalesce(r.prev_day, '-infinity'))
           OR (r.prev_day IS NOT NULL AND n.day < r.prev_day AND NOT EXISTS (SELECT 1 FROM facts.inv_device_days d
                WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.device_id = n.device_id
                  AND d.threat = '' AND d.day = n.day
                  AND NOT EXISTS (SELECT 1 FROM inv_new x WHERE x.threat = '' AND x.app_id = d.app_id
                                    AND x.device_id = d.device_id AND x.day = d.day
                                    AND x.country = d.country AND x.cell = d.cell)))
    )
    INSERT INTO facts.inv_daily_all AS a (day, devices)
    SELECT day, count(*) FROM fresh GROUP BY 1 ORDER BY 1
    ON CONFLICT (day) DO UPDATE SET devices = a.devices + EXCLUDED.devices;
    RETURN NULL;
END
$$;

CREATE FUNCTION facts.inv_daily_users_add() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM facts.inv_user_recent
    WHERE user_pseudonym = ANY(ARRAY(SELECT DISTINCT user_pseudonym FROM inv_new))
    ORDER BY user_pseudonym FOR UPDATE;
    WITH n AS (
        SELECT DISTINCT user_pseudonym, day FROM inv_new
    ), r AS (
        SELECT user_pseudonym, last_day, prev_day FROM facts.inv_user_recent
        WHERE user_pseudonym = ANY(ARRAY(SELECT DISTINCT user_pseudonym FROM n))
    ), fresh AS (
        SELECT n.day FROM n LEFT JOIN r USING (user_pseudonym)
        WHERE r.user_pseudonym IS NULL OR n.day > r.last_day
           OR (n.day < r.last_day AND n.day > coalesce(r.prev_day, '-infinity'))
           OR (r.prev_day IS NOT NULL AND n.day < r.prev_day AND NOT EXISTS (SELECT 1 FROM facts.inv_daily_users d
                WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.user_pseudonym = n.user_pseudonym
                  AND d.day = n.day
                  AND NOT EXISTS (SELECT 1 FROM inv_new x WHERE x.app_id = d.app_id
                                    AND x.user_pseudonym = d.user_pseudonym AND x.day = d.day)))
    )
    INSERT INTO facts.inv_daily_all AS a (day, users)
    SELECT day, count(*) FROM fresh GROUP BY 1 ORDER BY 1
    ON CONFLICT (day) DO UPDATE SET users = a.users + EXCLUDED.users;
    RETURN NULL;
END
$$;

-- The forget functions take off the days an erasure's delete left with no
-- row in any app (found by the privacy service's indexes on (app_id,
-- subject), one descent per app with events).
CREATE FUNCTION facts.inv_daily_devices_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE facts.inv_daily_all a SET devices = a.devices - x.n
    FROM (SELECT o.day, count(*) AS n FROM (SELECT DISTINCT device_id, day FROM inv_old WHERE threat = '') o
          WHERE NOT EXISTS (SELECT 1 FROM facts.inv_device_days d
              WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.device_id = o.device_id
                AND d.threat = '' AND d.day = o.day)
          GROUP BY 1) x
    WHERE a.day = x.day;
    RETURN NULL;
END
$$;

CREATE FUNCTION facts.inv_daily_users_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE facts.inv_daily_all a SET users = a.users - x.n
    FROM (SELECT o.day, count(*) AS n FROM (SELECT DISTINCT user_pseudonym, day FROM inv_old) o
          WHERE NOT EXISTS (SELECT 1 FROM facts.inv_daily_users d
              WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.user_pseudonym = o.user_pseudonym
                AND d.day = o.day)
          GROUP BY 1) x
    WHERE a.day = x.day;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Writers wait while the counts are made and the triggers are made.
LOCK TABLE facts.inv_device_days, facts.inv_daily_users IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO facts.inv_daily_all (day, devices, users)
SELECT day, coalesce(d.n, 0), coalesce(u.n, 0)
FROM (SELECT day, count(DISTINCT device_id) AS n FROM facts.inv_device_days WHERE threat = '' GROUP BY 1) d
FULL JOIN (SELECT day, count(DISTINCT user_pseudonym) AS n FROM facts.inv_daily_users GROUP BY 1) u USING (day);

CREATE TRIGGER inv_daily_devices_add AFTER INSERT ON facts.inv_device_days
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_daily_devices_add();
CREATE TRIGGER inv_daily_devices_forget AFTER DELETE ON facts.inv_device_days
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_daily_devices_forget();
CREATE TRIGGER inv_daily_users_add AFTER INSERT ON facts.inv_daily_users
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_daily_users_add();
CREATE TRIGGER inv_daily_users_forget AFTER DELETE ON facts.inv_daily_users
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_daily_users_forget();

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.inv_daily_all TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER inv_daily_users_forget ON facts.inv_daily_users;
DROP TRIGGER inv_daily_users_add ON facts.inv_daily_users;
DROP TRIGGER inv_daily_devices_forget ON facts.inv_device_days;
DROP TRIGGER inv_daily_devices_add ON facts.inv_device_days;
DROP FUNCTION facts.inv_daily_users_forget(), facts.inv_daily_users_add(), facts.inv_daily_devices_forget(),
    facts.inv_daily_devices_add();
DROP TABLE facts.inv_daily_all;
