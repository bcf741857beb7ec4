-- +goose Up
-- The list indexes of the two tables every payment writes keep their
-- times ascending, as on SQLite. Descending, each new row (the newest)
-- went to the leftmost leaf of its merchant's range: no fast path for the
-- rightmost leaf, and a full leaf split in halves, leaving the index
-- about half empty, where a split at the right edge leaves the left page
-- full. A list, newest first, reads the same index backwards. Each index
-- is built again under a lock that holds the table's writes meanwhile.
DROP INDEX transactions_list;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at, id);
DROP INDEX customers_list;
CREATE INDEX customers_list ON customers (merchant_id, mode, created_at, id);

-- +goose Down
DROP INDEX transactions_list;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at DESC, id DESC);
DROP INDEX customers_list;
CREATE INDEX customers_list ON customers (merchant_id, mode, created_at DESC, id DESC);
