-- +goose Up
-- Investigation: who, which session, which device, where (issue 39; see
-- docs/investigation.md).
--
-- events.events (and events.late_events, which mirrors it) gain the new
-- optional event fields. Every column has a constant default or none, so
-- adding it rewrites no partition (a catalogue change only):
--   session_id      the app run, opaque, '' when absent
--   user_pseudonym  "<key id>:<hex HMAC-SHA256>" of the user id made by the
--                   collector; the raw id is never stored
--   language        BCP 47, '' when absent
--   os_major/minor  the OS version's numbers for the rollups, NULL when the
--                   version does not start with a number
--   lat, lon        the coarsened location (the grid cell's south-west
--                   corner), NULL when absent; never finer than the grid
--   threat_types    the distinct threat types of the event (as
--                   facts.threat_types gives them), '{}' for an event without
--                   threats: such events are listed, never counted as threats
ALTER TABLE events.events
    ADD COLUMN session_id     text     NOT NULL DEFAULT '',
    ADD COLUMN user_pseudonym text     NOT NULL DEFAULT '',
    ADD COLUMN language       text     NOT NULL DEFAULT '',
    ADD COLUMN os_major       smallint,
    ADD COLUMN os_minor       smallint,
    ADD COLUMN lat            real,
    ADD COLUMN lon            real,
    ADD COLUMN threat_types   text[]   NOT NULL DEFAULT '{}';
ALTER TABLE events.late_events
    ADD COLUMN session_id     text     NOT NULL DEFAULT '',
    ADD COLUMN user_pseudonym text     NOT NULL DEFAULT '',
    ADD COLUMN language       text     NOT NULL DEFAULT '',
    ADD COLUMN os_major       smallint,
    ADD COLUMN os_minor       smallint,
    ADD COLUMN lat            real,
    ADD COLUMN lon            real,
    ADD COLUMN threat_types   text[]   NOT NULL DEFAULT '{}';

-- Existing threat events get their types, so a search by threat finds them.
-- Only rows with threats are rewritten (payload ? 'threats').
UPDATE events.events SET threat_types = facts.threat_types(payload)
 WHERE payload ? 'threats' AND facts.threat_types(payload) <> '{}';

-- Indexes of the read API, each a partitioned index (every monthly
-- partition, present and future, gets its own). Newest first is
-- (received_at DESC, id DESC), the keyset the cursor carries; a btree reads
-- backwards, so the indexes are ascending. Each costs one more index entry
-- per stored event (partial ones only for the rows they hold): measured
-- cost in docs/investigation.md.
--   events_by_time: the latest events of all apps, the live stream's poll,
--     any filter without a better index (app, type, country, os).
CREATE INDEX events_by_time ON events.events (received_at, id);
--   events_threats_by_time: threat events only (about a third at the
--     simulator's mix), for the threat and category filters.
CREATE INDEX events_threats_by_time ON events.events (received_at, id) WHERE threat_types <> '{}';
--   one subject's events, newest first: device, session, user.
CREATE INDEX events_by_device ON events.events (device_id, received_at, id) WHERE device_id <> '';
CREATE INDEX events_by_session ON events.events (session_id, received_at, id) WHERE session_id <> '';
CREATE INDEX events_by_user ON events.events (user_pseudonym, received_at, id) WHERE user_pseudonym <> '';
-- Erasure by user reaches what erasure by device reaches through this one
-- (late events are few and scanned).

-- The threat taxonomy: each threat type's category (MASVS-RESILIENCE
-- platform integrity, anti-tampering, anti-static and anti-dynamic
-- analysis, plus network and malware) and severity. A type not listed is
-- category 'other', severity 'medium', and still counts.
CREATE TABLE events.threat_taxonomy (
    type       text        PRIMARY KEY CHECK (type <> '' AND length(type) <= 128),
    category   text        NOT NULL CHECK (category IN ('platform-integrity', 'anti-tampering',
                                   'anti-static-analysis', 'anti-dynamic-analysis', 'network', 'malware', 'other')),
    severity   text        NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL DEFAULT 'migration'
);
INSERT INTO events.threat_taxonomy (type, category, severity) VALUES
    -- freeRASP's callback names, verbatim
    ('AppIntegrity', 'anti-tampering', 'high'),
    ('PrivilegedAccess', 'platform-integrity', 'high'),
    ('Debug', 'anti-dynamic-analysis', 'high'),
    ('Hooks', 'anti-dynamic-analysis', 'critical'),
    ('Passcode', 'platform-integrity', 'low'),
    ('Simulator', 'anti-dynamic-analysis', 'medium'),
    ('SecureHardwareNotAvailable', 'platform-integrity', 'low'),
    ('SystemVPN', 'network', 'low'),
    ('DeviceBinding', 'anti-tampering', 'medium'),
    ('DeviceID', 'platform-integrity', 'low'),
    ('UnofficialStore', 'anti-tampering', 'medium'),
    ('ObfuscationIssues', 'anti-static-analysis', 'medium'),
    ('DevMode', 'platform-integrity', 'low'),
    ('Malware', 'malware', 'critical'),
    ('ADBEnabled', 'platform-integrity', 'medium'),
    ('Screenshot', 'anti-dynamic-analysis', 'low'),
    ('ScreenRecording', 'anti-dynamic-analysis', 'medium'),
    ('MultiInstance', 'anti-tampering', 'medium'),
    -- the demo vocabulary (loadtest/sim)
    ('root_detected', 'platform-integrity', 'high'),
    ('jailbreak_detected', 'platform-integrity', 'high'),
    ('debugger_attached', 'anti-dynamic-analysis', 'high'),
    ('emulator', 'anti-dynamic-analysis', 'medium'),
    ('simulator', 'anti-dynamic-analysis', 'medium'),
    ('hooking_framework', 'anti-dynamic-analysis', 'critical'),
    ('app_tampered', 'anti-tampering', 'high'),
    ('untrusted_installer', 'anti-tampering', 'medium'),
    ('developer_options', 'platform-integrity', 'low'),
    ('screen_recording', 'anti-dynamic-analysis', 'medium'),
    ('malware_package', 'malware', 'critical'),
    ('insecure_wifi', 'network', 'medium'),
    ('vpn_profile', 'network', 'low'),
    ('outdated_os', 'platform-integrity', 'low'),
    ('usb_debugging', 'platform-integrity', 'medium'),
    ('passcode_not_set', 'platform-integrity', 'low');

-- Rollups of the read API, written by the processor in the transaction that
-- stores the events, from the rows actually inserted (so a redelivered event
-- counts once). Days are UTC days of occurred_at, like the other rollups;
-- app_id leads or is in every key.
--
-- inv_daily: events and threat events per app and day (overview; apps are
-- the app_ids with events).
CREATE TABLE facts.inv_daily (
    day           date   NOT NULL,
    app_id        text   NOT NULL,
    events        bigint NOT NULL,
    threat_events bigint NOT NULL,
    PRIMARY KEY (day, app_id)
);
-- inv_daily_users: the pseudonyms seen per app and day, so unique users over
-- any range of days are exact (count(DISTINCT)): one row per active user
-- and day.
CREATE TABLE facts.inv_daily_users (
    day            date NOT NULL,
    app_id         text NOT NULL,
    user_pseudonym text NOT NULL,
    PRIMARY KEY (day, app_id, user_pseudonym)
);
-- inv_device_days: the devices seen per app, day, threat type ('' for all
-- events), country and grid cell ('' without a location; "lat,lon"
-- otherwise): unique devices for the overview (threat ''), the threat
-- report (threat t), the map's countries and its cells (K-anonymity: a cell
-- is shown only with at least K distinct devices). One row per active
-- device and day, plus one per threat type it showed that day.
CREATE TABLE facts.inv_device_days (
    day       date NOT NULL,
    app_id    text NOT NULL,
    threat    text NOT NULL,
    country   char(2) NOT NULL,
    cell      text NOT NULL,
    device_id text NOT NULL,
    PRIMARY KEY (day, threat, app_id, country, cell, device_id)
);
-- inv_geo_daily: events per app, day, threat type ('' for all events),
-- country and cell (the map's event counts).
CREATE TABLE facts.inv_geo_daily (
    day     date    NOT NULL,
    app_id  text    NOT NULL,
    threat  text    NOT NULL,
    country char(2) NOT NULL,
    cell    text    NOT NULL,
    events  bigint  NOT NULL,
    PRIMARY KEY (day, threat, app_id, country, cell)
);
-- inv_threat_daily: threat events per app, day and threat type broken down
-- by one dimension at a time: os, os_version ("<os> <major>.<minor>"),
-- device_model ("<manufacturer> <model>"), country, app_version, and hour
-- ("00".."23", the report's series). Each threat event counts once per type
-- in each dimension, so a dimension's sum is the type's event count.
CREATE TABLE facts.inv_threat_daily (
    day    date   NOT NULL,
    app_id text   NOT NULL,
    threat text   NOT NULL,
    dim    text   NOT NULL,
    key    text   NOT NULL,
    count  bigint NOT NULL,
    PRIMARY KEY (day, threat, dim, app_id, key)
);

-- The visual renderer's read-only role (threatview_ro in the local stack),
-- where it exists, reads the events (search, timelines, the live stream) and
-- keeps the taxonomy (PUT /v1/taxonomy/{type}, admin only): the one table it
-- writes. A deployment with another role name grants the same.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_ro') THEN
        GRANT USAGE ON SCHEMA events TO threatview_ro;
        GRANT SELECT ON events.events TO threatview_ro;
        GRANT SELECT, INSERT, UPDATE ON events.threat_taxonomy TO threatview_ro;
        GRANT SELECT ON ALL TABLES IN SCHEMA facts TO threatview_ro;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE facts.inv_threat_daily, facts.inv_geo_daily, facts.inv_device_days,
    facts.inv_daily_users, facts.inv_daily, events.threat_taxonomy;
DROP INDEX events.events_by_user, events.events_by_session, events.events_by_device,
    events.events_threats_by_time, events.events_by_time;
ALTER TABLE events.late_events
    DROP COLUMN session_id, DROP COLUMN user_pseudonym, DROP COLUMN language, DROP COLUMN os_major,
    DROP COLUMN os_minor, DROP COLUMN lat, DROP COLUMN lon, DROP COLUMN threat_types;
ALTER TABLE events.events
    DROP COLUMN session_id, DROP COLUMN user_pseudonym, DROP COLUMN language, DROP COLUMN os_major,
    DROP COLUMN os_minor, DROP COLUMN lat, DROP COLUMN lon, DROP COLUMN threat_types;
