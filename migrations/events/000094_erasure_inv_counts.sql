-- +goose Up
-- An erasure subtracts the erased events from the investigation counts
-- (facts.inv_daily, inv_geo_daily, inv_threat_daily; docs/privacy.md).
-- inv_threat_daily's triggers (migration 000015) carry every change into
-- the all-apps summary facts.inv_threat_daily_all as the role that made
-- it, so the privacy service's role writes that summary too when it
-- updates or deletes inv_threat_daily rows, and deletes the summary's rows
-- the erasure leaves at zero.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        GRANT SELECT, INSERT, UPDATE, DELETE ON facts.inv_threat_daily_all TO threatview_privacy;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- UPDATE and DELETE stay: a database migrated from scratch had them from 000091.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_privacy') THEN
        REVOKE INSERT ON facts.inv_threat_daily_all FROM threatview_privacy;
    END IF;
END
$$;
-- +goose StatementEnd
