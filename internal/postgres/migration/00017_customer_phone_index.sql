-- +goose Up
-- A payer's customer is found by (merchant_id, mode, phone) at every
-- payment. Without statistics (a new table, autovacuum yet to analyse
-- it) the planner costs that lookup the same through the unique index
-- and through customers_list (merchant_id, mode, created_at, id), which
-- reads every customer of the merchant and filters on the phone; of two
-- equal paths it keeps the one of the index it meets first, the newest.
-- customers_list (00005) was newer than the table's UNIQUE constraint, so
-- the lookup read 5,000 rows for one: 0.8 ms a payment. The same unique
-- index, made again after customers_list, wins the tie; with statistics
-- it wins on its own. TestUpsertCustomerReadsKnownPayer checks the plan.
CREATE UNIQUE INDEX customers_phone ON customers (merchant_id, mode, phone);
ALTER TABLE customers DROP CONSTRAINT customers_merchant_id_mode_phone_key;

-- +goose Down
ALTER TABLE customers ADD CONSTRAINT customers_merchant_id_mode_phone_key UNIQUE USING INDEX customers_phone;
