-- +goose Up
-- Sign-in attempts are counted before the password is checked, and closed
-- windows are dropped as new attempts come in; this key finds them.
ALTER TABLE login_failures ADD KEY by_start (window_start);

-- +goose Down
ALTER TABLE login_failures DROP KEY by_start;
