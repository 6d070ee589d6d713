-- +goose Up
-- Erasures: audited before they can run, retried with a backoff each.
--
-- A request is stored as 'pending' while its audit record is written: the
-- runner claims only 'queued' and 'running' rows, and no job suppresses a
-- pending subject, so a request whose audit failed is withdrawn (deleted)
-- without having run and without a suppression. Pending rows count as
-- open (a second request for the subject is refused meanwhile); one left
-- by a process that stopped between storing and auditing is removed by
-- the runner after a minute (its client got no answer).
--
-- next_attempt_at is when the runner may take the erasure (again): a
-- failed try of a transient kind pushes it back (exponential backoff), so
-- one stuck erasure does not hold up the others; the runner takes the
-- open erasure due first, not the oldest.
ALTER TABLE events.erasures DROP CONSTRAINT erasures_status_check;
ALTER TABLE events.erasures ADD CONSTRAINT erasures_status_check
    CHECK (status IN ('pending', 'queued', 'running', 'done', 'failed'));
ALTER TABLE events.erasures ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now();

DROP INDEX events.erasures_one_open;
CREATE UNIQUE INDEX erasures_one_open ON events.erasures (app_id, device_id)
    WHERE status IN ('pending', 'queued', 'running');
CREATE INDEX erasures_due ON events.erasures (next_attempt_at)
    WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX events.erasures_due;
DROP INDEX events.erasures_one_open;
DELETE FROM events.erasures WHERE status = 'pending';
CREATE UNIQUE INDEX erasures_one_open ON events.erasures (app_id, device_id) WHERE status IN ('queued', 'running');
ALTER TABLE events.erasures DROP COLUMN next_attempt_at;
ALTER TABLE events.erasures DROP CONSTRAINT erasures_status_check;
ALTER TABLE events.erasures ADD CONSTRAINT erasures_status_check
    CHECK (status IN ('queued', 'running', 'done', 'failed'));
