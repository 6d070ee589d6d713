-- +goose Up
-- Alert rules scoped to a country and / or an OS, and a stable delivery id
-- per notification.
--
-- A rule's country is an ISO 3166-1 alpha-2 code (ZZ: unknown) and its os
-- one of the OS families below; blank means any. Rules without either keep
-- reading alerts.threat_minutes; scoped rules read
-- alerts.threat_minutes_scoped, folded by the alerts leader from the same
-- outbox rows in the same transaction as threat_minutes (so both are exact
-- and every row is counted once in each). The processor writes nothing new:
-- the outbox row already carries the event's country and OS. The OS is
-- counted by family (android, ios, ipados, windows, linux, macos, other),
-- so the table's width is bounded by apps x threats x countries x 7 a minute;
-- it is pruned with the other minute counts (ALERTS_COUNTS_KEEP).
ALTER TABLE alerts.rules
    ADD COLUMN country text NOT NULL DEFAULT '' CHECK (country = '' OR country ~ '^[A-Z]{2}$'),
    ADD COLUMN os      text NOT NULL DEFAULT '' CHECK (os IN ('', 'android', 'ios', 'ipados', 'windows', 'linux', 'macos', 'other'));

CREATE TABLE alerts.threat_minutes_scoped (
    minute  timestamptz NOT NULL,
    app_id  text        NOT NULL,
    threat  text        NOT NULL,
    country text        NOT NULL,
    os      text        NOT NULL,
    count   bigint      NOT NULL,
    PRIMARY KEY (minute, app_id, threat, country, os)
);

-- The id a receiver deduplicates on: the same on every attempt of one
-- notification, across restarts and leaders (webhook X-ThreatView-Delivery,
-- email Message-ID and X-ThreatView-Delivery).
ALTER TABLE alerts.notifications ADD COLUMN delivery_id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX notifications_delivery_id ON alerts.notifications (delivery_id);

-- +goose Down
DROP INDEX alerts.notifications_delivery_id;
ALTER TABLE alerts.notifications DROP COLUMN delivery_id;
DROP TABLE alerts.threat_minutes_scoped;
ALTER TABLE alerts.rules DROP COLUMN os, DROP COLUMN country;
