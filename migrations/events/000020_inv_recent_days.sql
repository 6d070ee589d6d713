-- +goose Up
-- Unique devices and users over all apps for a range ending today (the
-- overview's and a threat report's; issue 40's bound at 50 M events) as a
-- sum over a few dozen rows instead of a count over one index entry per
-- active subject (docs/investigation.md, "Performance").
--
-- The recency tables of migration 000015 keep each subject's two most
-- recent days; these count the subjects per pair of days (and threat type
-- for devices; prev_day '-infinity' for none), as migration 000018 does per
-- map place, with the same trigger function (facts.inv_count_pairs). A
-- subject was seen in [from, to) when its last day is in it, or its last
-- day is at or after to and its previous day in it: a sum over the rows
-- with last_day >= from, unless some subject has both days at or after to
-- (then the renderer counts as before).
CREATE TABLE facts.inv_device_recent_days (
    threat   text   NOT NULL,
    last_day date   NOT NULL,
    prev_day date   NOT NULL,
    devices  bigint NOT NULL,
    PRIMARY KEY (threat, last_day, prev_day)
);
CREATE TABLE facts.inv_user_recent_days (
    last_day date   NOT NULL,
    prev_day date   NOT NULL,
    users    bigint NOT NULL,
    PRIMARY KEY (last_day, prev_day)
);

-- Writers wait while the counts are made from the recency rows and the
-- triggers are made.
LOCK TABLE facts.inv_device_recent, facts.inv_user_recent IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO facts.inv_device_recent_days (threat, last_day, prev_day, devices)
SELECT threat, last_day, coalesce(prev_day, '-infinity'), count(*) FROM facts.inv_device_recent GROUP BY 1, 2, 3;
INSERT INTO facts.inv_user_recent_days (last_day, prev_day, users)
SELECT last_day, coalesce(prev_day, '-infinity'), count(*) FROM facts.inv_user_recent GROUP BY 1, 2;

CREATE TRIGGER inv_device_recent_days_insert AFTER INSERT ON facts.inv_device_recent
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_device_recent_days', 'threat, last_day', 'devices');
CREATE TRIGGER inv_device_recent_days_update AFTER UPDATE ON facts.inv_device_recent
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_device_recent_days', 'threat, last_day', 'devices');
CREATE TRIGGER inv_device_recent_days_delete AFTER DELETE ON facts.inv_device_recent
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_device_recent_days', 'threat, last_day', 'devices');
CREATE TRIGGER inv_user_recent_days_insert AFTER INSERT ON facts.inv_user_recent
    REFERENCING NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_user_recent_days', 'last_day', 'users');
CREATE TRIGGER inv_user_recent_days_update AFTER UPDATE ON facts.inv_user_recent
    REFERENCING OLD TABLE AS inv_old NEW TABLE AS inv_new FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_user_recent_days', 'last_day', 'users');
CREATE TRIGGER inv_user_recent_days_delete AFTER DELETE ON facts.inv_user_recent
    REFERENCING OLD TABLE AS inv_old FOR EACH STATEMENT EXECUTE FUNCTION facts.inv_count_pairs(
        'facts.inv_user_recent_days', 'last_day', 'users');

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT SELECT ON facts.inv_device_recent_days, facts.inv_user_recent_days TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER inv_user_recent_days_delete ON facts.inv_user_recent;
DROP TRIGGER inv_user_recent_days_update ON facts.inv_user_recent;
DROP TRIGGER inv_user_recent_days_insert ON facts.inv_user_recent;
DROP TRIGGER inv_device_recent_days_delete ON facts.inv_device_recent;
DROP TRIGGER inv_device_recent_days_update ON facts.inv_device_recent;
DROP TRIGGER inv_device_recent_days_insert ON facts.inv_device_recent;
DROP TABLE facts.inv_user_recent_days, facts.inv_device_recent_days;
