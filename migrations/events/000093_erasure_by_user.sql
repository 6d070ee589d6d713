-- +goose Up
-- Erasure by user (issue 39): an erasure names either one device of an app
-- or one user of an app. A user is stored only as the pseudonyms the
-- collector would have made of the raw id, one per configured key (the
-- current key's first), so events stored under an older key are found too;
-- the raw id is never stored. A user erasure has no suppression (the
-- processor suppresses devices only), so suppress is false for it.
ALTER TABLE events.erasures ADD COLUMN user_pseudonyms text[] NOT NULL DEFAULT '{}';
ALTER TABLE events.erasures DROP CONSTRAINT erasures_device_id_check;
ALTER TABLE events.erasures ADD CONSTRAINT erasures_one_subject
    CHECK ((device_id <> '') <> (cardinality(user_pseudonyms) > 0));
ALTER TABLE events.erasures ADD CONSTRAINT erasures_user_not_suppressed
    CHECK (cardinality(user_pseudonyms) = 0 OR NOT suppress);

-- At most one open erasure per subject: a device's (user_pseudonyms '{}')
-- or a user's (device_id '').
DROP INDEX events.erasures_one_open;
CREATE UNIQUE INDEX erasures_one_open ON events.erasures (app_id, device_id, user_pseudonyms)
    WHERE status IN ('pending', 'queued', 'running');

-- Finding a user's rows of the investigation rollup of active users per
-- day, whose primary key leads with the day. One more index entry per
-- active user and day.
CREATE INDEX inv_daily_users_by_user ON facts.inv_daily_users (app_id, user_pseudonym);

-- +goose Down
DROP INDEX facts.inv_daily_users_by_user;
DELETE FROM events.erasures WHERE cardinality(user_pseudonyms) > 0;
DROP INDEX events.erasures_one_open;
CREATE UNIQUE INDEX erasures_one_open ON events.erasures (app_id, device_id)
    WHERE status IN ('pending', 'queued', 'running');
ALTER TABLE events.erasures DROP CONSTRAINT erasures_user_not_suppressed;
ALTER TABLE events.erasures DROP CONSTRAINT erasures_one_subject;
ALTER TABLE events.erasures ADD CONSTRAINT erasures_device_id_check CHECK (device_id <> '');
ALTER TABLE events.erasures DROP COLUMN user_pseudonyms;
