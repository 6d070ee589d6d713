-- +goose Up
-- The triggers of migration 000015 keep facts.inv_device_recent,
-- inv_user_recent, inv_threat_daily_all and inv_geo_daily_all as whoever
-- changes the investigation day tables: the processor's writes and the
-- privacy service's erasures. They insert, update and delete rows there
-- (a summary key left at zero is deleted), which the processor's role
-- (threatview_processor: SELECT, INSERT, UPDATE on facts, migration 000091)
-- may not do, and on a fresh database 000015's own grants run before
-- 000091 makes the roles. So the trigger functions run as their owner, as
-- the partition functions do (000091): SECURITY DEFINER with a fixed
-- search_path (every name in them is schema-qualified). A writer then needs
-- no grant on the tables the triggers keep.
ALTER FUNCTION facts.inv_device_recent_add() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION facts.inv_device_recent_forget() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION facts.inv_user_recent_add() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION facts.inv_user_recent_forget() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION facts.inv_sum_over_apps() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- +goose Down
ALTER FUNCTION facts.inv_device_recent_add() SECURITY INVOKER RESET search_path;
ALTER FUNCTION facts.inv_device_recent_forget() SECURITY INVOKER RESET search_path;
ALTER FUNCTION facts.inv_user_recent_add() SECURITY INVOKER RESET search_path;
ALTER FUNCTION facts.inv_user_recent_forget() SECURITY INVOKER RESET search_path;
ALTER FUNCTION facts.inv_sum_over_apps() SECURITY INVOKER RESET search_path;
