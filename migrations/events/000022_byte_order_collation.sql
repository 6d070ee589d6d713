-- +goose Up
-- The events database must sort text in byte order (collation C, POSIX or
-- C.UTF-8 of the libc provider); this refuses any other. Two writers lock
-- the same summary rows: the processor upserts its rollups in keys sorted
-- in Go (byte by byte), and the privacy service's erasure and the
-- investigation triggers lock them in SQL, in the database's collation
-- order. In byte order the two orders agree, so the writers wait for each
-- other and never deadlock; under another collation (en_US, an ICU locale:
-- 'a' < 'B' there, 'B' < 'a' in Go) a processor and an erasure could each
-- hold a row the other needs next (PostgreSQL then aborts one; both retry,
-- and may meet again). A database's collation cannot be changed in place:
-- create it with LOCALE 'C' (docs/scaling.md, charts/threatview/README.md).
-- +goose StatementBegin
DO $$
DECLARE
    d record;
BEGIN
    SELECT datlocprovider, datcollate INTO d FROM pg_database WHERE datname = current_database();
    IF d.datlocprovider <> 'c' OR d.datcollate NOT IN ('C', 'POSIX', 'C.UTF-8', 'C.utf8') THEN
        RAISE EXCEPTION 'the events database % sorts text by collation % (provider %), not in byte order', current_database(), d.datcollate, d.datlocprovider
            USING HINT = 'create it with CREATE DATABASE ... LOCALE ''C'' TEMPLATE template0 and restore into it: the processor and the erasure lock rows in byte order',
                  ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
