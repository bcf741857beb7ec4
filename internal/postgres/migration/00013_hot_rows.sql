-- +goose Up
-- Hot rows. Every payment of a merchant adds to the same rows: its
-- balance and the provider's and the platform's, the day's volume
-- counters, the idempotency quota of the hour. A row is locked from the
-- statement that changes it to the COMMIT, so transactions that change
-- one row take turns, one fsync each, and PostgreSQL cannot flush their
-- commits together. These rows are therefore split: a shard column, the
-- value being the sum of the shards, each transaction adding to one
-- shard. (Rows that hold a floor, a non-negative balance, stay whole in
-- shard 0; a debit that must be checked locks every shard of its account.)
ALTER TABLE ledger_balances ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE ledger_balances DROP CONSTRAINT ledger_balances_pkey;
ALTER TABLE ledger_balances ADD PRIMARY KEY (account, currency, shard);

ALTER TABLE volume_counters ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE volume_counters DROP CONSTRAINT volume_counters_pkey;
ALTER TABLE volume_counters ADD PRIMARY KEY (scope, day, shard);

ALTER TABLE idempotency_quota ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE idempotency_quota DROP CONSTRAINT idempotency_quota_pkey;
ALTER TABLE idempotency_quota ADD PRIMARY KEY (merchant_id, mode, key_type, window_start, shard);

-- The last writes of a transaction go with its COMMIT, in one round trip,
-- so that a hot row is locked for the commit only. A statement sent that
-- way that must stop the commit (the quota passed, a claim lost) calls
-- this function, which raises the error code given: the COMMIT after it
-- then rolls back.
-- +goose StatementBegin
CREATE FUNCTION xaalis_raise(code text, message text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION xaalis_raise(text, text);

DELETE FROM idempotency_quota WHERE shard <> 0;
ALTER TABLE idempotency_quota DROP CONSTRAINT idempotency_quota_pkey;
ALTER TABLE idempotency_quota ADD PRIMARY KEY (merchant_id, mode, key_type, window_start);
ALTER TABLE idempotency_quota DROP COLUMN shard;

CREATE TEMPORARY TABLE volume_sums AS SELECT scope, day, sum(amount)::bigint AS amount FROM volume_counters GROUP BY scope, day;
DELETE FROM volume_counters;
ALTER TABLE volume_counters DROP CONSTRAINT volume_counters_pkey;
ALTER TABLE volume_counters DROP COLUMN shard;
ALTER TABLE volume_counters ADD PRIMARY KEY (scope, day);
INSERT INTO volume_counters (scope, day, amount) SELECT scope, day, amount FROM volume_sums;
DROP TABLE volume_sums;

CREATE TEMPORARY TABLE balance_sums AS SELECT account, currency, sum(balance)::bigint AS balance, bool_or(non_negative) AS non_negative,
    max(updated_at) AS updated_at FROM ledger_balances GROUP BY account, currency;
DELETE FROM ledger_balances;
ALTER TABLE ledger_balances DROP CONSTRAINT ledger_balances_pkey;
ALTER TABLE ledger_balances DROP COLUMN shard;
ALTER TABLE ledger_balances ADD PRIMARY KEY (account, currency);
INSERT INTO ledger_balances (account, currency, balance, non_negative, updated_at)
    SELECT account, currency, balance, non_negative, updated_at FROM balance_sums;
DROP TABLE balance_sums;
