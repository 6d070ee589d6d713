-- +goose Up
-- Least privilege on the events database: one role per service, with the
-- grants it needs and nothing more (charts/threatview/README.md, "Least
-- privilege", lists them; the local stack logs in as these roles).
--
--   threatview_processor  writes events, late events, facts, rollups and the
--                         alerts outbox; reads suppressions
--   threatview_alerts     the alerts schema (rules, state, outbox, forwarders)
--   threatview_privacy    erasures and suppressions; reads every table of the
--                         events and facts schemas (partitions too, to verify
--                         an archive's rewrite) and goose_db_version (the
--                         schema version), deletes one subject's events,
--                         late events and facts, adjusts rollups, moves
--                         archive records
--   threatview_ro         the visual renderer (migration 000013)
--
-- The roles are cluster-wide: created here when the migrating user may
-- (CREATEROLE, e.g. RDS's master user) as NOLOGIN groups, else by the
-- operator beforehand; each service's login user is the role itself or a
-- member of it (CREATE ROLE processor LOGIN PASSWORD '...' IN ROLE
-- threatview_processor). Grants go to the roles that exist; a role created
-- later gets them by running this file's grants again (README.md).
--
-- Partitions are created by events.ensure_monthly_partitions and
-- events.maintain_partitions, which the processor calls: they run as their
-- owner (SECURITY DEFINER, with a fixed search_path), so the processor needs
-- no CREATE on the schemas and every partition belongs to the owner, whose
-- default privileges below then cover it.
-- +goose StatementBegin
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['threatview_processor', 'threatview_alerts', 'threatview_privacy'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'role % does not exist and cannot be created here: create it, then grant as in migration 000091', r;
            END;
        END IF;
    END LOOP;

    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor') THEN
        GRANT USAGE ON SCHEMA events, facts, alerts TO threatview_processor;
        GRANT SELECT, INSERT ON events.events, events.late_events TO threatview_processor;
        GRANT SELECT ON events.suppressions TO threatview_processor;
        GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA facts TO threatview_processor;
        GRANT INSERT ON alerts.outbox TO threatview_processor;
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA facts, alerts TO threatview_processor;
        ALTER DEFAULT PRIVILEGES IN SCHEMA facts GRANT SELECT, INSERT, UPDATE ON TABLES TO threatview_processor;
    END IF;

    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_alerts') THEN
        GRANT USAGE ON SCHEMA alerts TO threatview_alerts;
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA alerts TO threatview_alerts;
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA alerts TO threatview_alerts;
        ALTER DEFAULT PRIVILEGES IN SCHEMA alerts GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO threatview_alerts;
        ALTER DEFAULT PRIVILEGES IN SCHEMA alerts GRANT USAGE ON SEQUENCES TO threatview_alerts;
    END IF;

    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        GRANT USAGE ON SCHEMA events, facts TO threatview_privacy;
        GRANT SELECT ON ALL TABLES IN SCHEMA events, facts TO threatview_privacy;
        GRANT INSERT, UPDATE, DELETE ON events.erasures TO threatview_privacy;
        GRANT INSERT, UPDATE ON events.suppressions TO threatview_privacy;
        GRANT DELETE ON events.events, events.late_events, facts.facts TO threatview_privacy;
        GRANT INSERT, UPDATE, DELETE ON events.archives, events.late_archives TO threatview_privacy;
        GRANT UPDATE, DELETE ON ALL TABLES IN SCHEMA facts TO threatview_privacy;
        ALTER DEFAULT PRIVILEGES IN SCHEMA events, facts GRANT SELECT ON TABLES TO threatview_privacy;
        -- The archive rewrite checks the schema version, as the archiver does.
        GRANT SELECT ON goose_db_version TO threatview_privacy;
    END IF;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION events.ensure_monthly_partitions(regclass, timestamptz, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION events.maintain_partitions(integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION events.ensure_monthly_partitions(regclass, timestamptz, integer), events.maintain_partitions(integer) FROM PUBLIC;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor') THEN
        GRANT EXECUTE ON FUNCTION events.ensure_monthly_partitions(regclass, timestamptz, integer), events.maintain_partitions(integer) TO threatview_processor;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER FUNCTION events.ensure_monthly_partitions(regclass, timestamptz, integer) SECURITY INVOKER RESET search_path;
ALTER FUNCTION events.maintain_partitions(integer) SECURITY INVOKER RESET search_path;
GRANT EXECUTE ON FUNCTION events.ensure_monthly_partitions(regclass, timestamptz, integer), events.maintain_partitions(integer) TO PUBLIC;
