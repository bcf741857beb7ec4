-- +goose Up
-- The list indexes of the two tables every payment writes keep their
-- times ascending. Descending, each new row (the newest) went to the
-- leftmost leaf of its merchant's range, where SQLite splits a full page
-- by spreading it over its siblings: two to three pages written a
-- payment, in the WAL and its checkpoint, where an append at the right
-- edge writes one (SQLite's quick balance). A list, newest first, reads
-- the same index backwards. PostgreSQL keeps them descending: there,
-- sixteen backends appending to one rightmost leaf made create-payment
-- slower in 6 of 7 alternated pairs.
DROP INDEX transactions_list;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at, id);
DROP INDEX customers_list;
CREATE INDEX customers_list ON customers (merchant_id, mode, created_at, id);

-- +goose Down
DROP INDEX transactions_list;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at DESC, id DESC);
DROP INDEX customers_list;
CREATE INDEX customers_list ON customers (merchant_id, mode, created_at DESC, id DESC);
