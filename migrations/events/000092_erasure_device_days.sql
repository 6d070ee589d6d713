-- +goose Up
-- An erasure deletes the subject's rows of facts.inv_device_days (the
-- investigation rollup that names each active device per day): found by
-- (app_id, device_id), which its primary key does not lead with. A plain
-- CREATE INDEX holds the table's writers while it builds (docs/privacy.md).
CREATE INDEX inv_device_days_by_subject ON facts.inv_device_days (app_id, device_id);

-- +goose Down
DROP INDEX facts.inv_device_days_by_subject;
