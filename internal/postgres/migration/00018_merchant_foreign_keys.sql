-- +goose Up
-- The foreign keys from a payment's rows to its merchant go. Each row a
-- payment inserts (its Idempotency-Key, payer, transaction, event and
-- ledger entry) had PostgreSQL check its merchant_id at the end of the
-- statement: one query a row, locking the merchant's row FOR KEY SHARE.
-- That row is every payment's of the merchant, so the batches committing
-- side by side shared its lock through a MultiXact, created and written to
-- the WAL about once a batch. Measured with create-payment (4,000 payments
-- a run, alternated, PostgreSQL's CPU from /proc): 1,040 and 1,109 µs a
-- payment with these keys, 873 and 980 µs without.
--
-- What they guarded cannot happen: a merchant is never deleted, and a
-- row's merchant_id is the merchant the request authenticated as, read
-- from its row; a key can only catch an id of no merchant at all, not the
-- wrong merchant. The keys between a command's own rows stay (a posting's
-- entry, a transaction's customer): a batch assembles those ids in its
-- merged statements, and they check that assembly. SQLite keeps every
-- foreign key (a lookup in the writer's own pages, nothing shared), so the
-- conformance suite still runs every command against them.
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_merchant_id_fkey;
ALTER TABLE customers DROP CONSTRAINT customers_merchant_id_fkey;
ALTER TABLE transactions DROP CONSTRAINT transactions_merchant_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_merchant_id_fkey;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_merchant_id_fkey;

-- +goose Down
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
ALTER TABLE customers ADD CONSTRAINT customers_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
ALTER TABLE transactions ADD CONSTRAINT transactions_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
ALTER TABLE events ADD CONSTRAINT events_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
