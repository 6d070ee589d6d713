-- +goose Up
-- Issue 37 (alerts and forwarding), items 5 and 11.
--
-- secret_header: the one header an HTTP forwarder sends with every batch
-- (a SIEM's token, e.g. {"name": "Authorization", "value": "Splunk ..."}),
-- written once and never shown again: readers see its name only, audit
-- records not even the value's length. Kept out of the URL, whose query
-- string was where such tokens went before.
--
-- skipped: outbox rows a forwarder passed without sending because its
-- backlog reached ALERTS_FORWARD_MAX_BACKLOG (its destination down or its
-- sink not starting), so one dead destination cannot grow the outbox, and
-- with it the events database, without bound. GET /v1/forwarders/{id}/status
-- and alerts_forward_skipped_total show it.
--
-- Numbered 000089 by the alerts work of that wave (the numbers 000014 to
-- 000089 were the write path's; out-of-order application is on).
ALTER TABLE alerts.forwarders
    ADD COLUMN secret_header jsonb,
    ADD COLUMN skipped       bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE alerts.forwarders DROP COLUMN secret_header, DROP COLUMN skipped;
