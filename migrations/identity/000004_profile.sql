-- +goose Up
-- My Profile: a person's display name, e-mail address and phone number, each
-- optional and erasable (blank). Roles may now include user_admin (the
-- reference's User Administrator), so the list can be longer.
ALTER TABLE users
    ADD COLUMN display_name VARCHAR(128) NOT NULL DEFAULT '',
    ADD COLUMN email        VARCHAR(254) NOT NULL DEFAULT '',
    ADD COLUMN phone        VARCHAR(32)  NOT NULL DEFAULT '',
    MODIFY COLUMN roles     VARCHAR(128) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE users DROP COLUMN display_name, DROP COLUMN email, DROP COLUMN phone,
    MODIFY COLUMN roles VARCHAR(64) NOT NULL DEFAULT '';
