-- +goose Up
-- facts.facts is keyed by time first (issue 38): (received_at, app_id,
-- event_id). Its rows are written in received_at order, so every insert
-- lands on the rightmost leaf pages of the key, which stay in memory,
-- whatever ids the clients send: with random (UUIDv4) ids the old key
-- (event_id, app_id, received_at) read and dirtied a cold leaf page per
-- event once the month's index outgrew the buffer cache. Nothing looks a
-- fact up by its id alone: the erasure deletes a fact by the three columns
-- of its event (events.events keeps its id-first key, which the duplicate
-- probe needs), and loadtest verify joins the events it finds by id.
--
-- Every partition's index is rebuilt under an ACCESS EXCLUSIVE lock: the
-- processor waits, and retries, meanwhile (seconds per million facts).
ALTER TABLE facts.facts DROP CONSTRAINT facts_pkey;
ALTER TABLE facts.facts ADD PRIMARY KEY (received_at, app_id, event_id);

-- +goose Down
ALTER TABLE facts.facts DROP CONSTRAINT facts_pkey;
ALTER TABLE facts.facts ADD PRIMARY KEY (event_id, app_id, received_at);
