-- +goose Up
-- An event id is unique within its app, not across apps: app A sending app
-- B's event_id must neither suppress B's event nor be suppressed by it
-- (event ids come from clients, and any token holder can pick them). The
-- unique keys of events.events and facts.facts gain app_id; the partition
-- key (received_at) stays in them, as a partitioned table requires. id
-- stays first, so lookups by id alone still use the index.
--
-- Both tables are rebuilt index by index (every partition), under an
-- ACCESS EXCLUSIVE lock: the processor waits, and retries, meanwhile.
ALTER TABLE events.events DROP CONSTRAINT events_pkey;
ALTER TABLE events.events ADD PRIMARY KEY (id, app_id, received_at);
ALTER TABLE facts.facts DROP CONSTRAINT facts_pkey;
ALTER TABLE facts.facts ADD PRIMARY KEY (event_id, app_id, received_at);

-- +goose Down
-- Fails if two apps have stored the same id at the same received_at.
ALTER TABLE facts.facts DROP CONSTRAINT facts_pkey;
ALTER TABLE facts.facts ADD PRIMARY KEY (event_id, received_at);
ALTER TABLE events.events DROP CONSTRAINT events_pkey;
ALTER TABLE events.events ADD PRIMARY KEY (id, received_at);
