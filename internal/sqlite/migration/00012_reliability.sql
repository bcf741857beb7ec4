-- +goose Up
-- Server instances. Each `xaalis serve` records itself here and beats every
-- few seconds; a clean shutdown deletes its row. An Idempotency-Key claim
-- names the instance running its request (instance_id): the key is in
-- flight while that instance lives, and a retry takes it over at once when
-- the instance is gone (no row, or a heartbeat older than three intervals).
-- Claims of a claimant without an instance (NULL) hold for locked_until.
CREATE TABLE server_instances (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    process      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
) STRICT;
ALTER TABLE idempotency_keys ADD COLUMN instance_id TEXT;

-- Refund debt. A merchant's available balance may now go below zero, but
-- only through refunds and chargebacks: the store refuses any other debit
-- that ends below zero (ledger.Entry.AllowDebt, checked as each entry is
-- posted). Reserved money stays non-negative in the database itself.
UPDATE ledger_balances SET non_negative = 0 WHERE account LIKE '%:merchant:%:available';

-- The chargeback debt of disputes that available could not cover was kept
-- apart, in a chargeback_debt account, and only shown. It is now carried
-- in available like every debt, and recovered from the next credits: one
-- balanced entry per account moves it there.
INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
SELECT 'debt-00012-' || account || '-' || currency,
       substr(account, 1, instr(account, ':') - 1),
       substr(account, instr(account, ':merchant:') + 10,
              length(account) - instr(account, ':merchant:') - 9 - length(':chargeback_debt')),
       'debt.fold', 'ledger_account', account,
       CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
SELECT 'debt-00012-' || account || '-' || currency, 1, account, currency, -balance
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
SELECT 'debt-00012-' || account || '-' || currency, 2,
       substr(account, 1, length(account) - length(':chargeback_debt')) || ':available', currency, balance
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_balances (account, currency, balance, non_negative)
SELECT substr(account, 1, length(account) - length(':chargeback_debt')) || ':available', currency, 0, 0
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0
ON CONFLICT DO NOTHING;
UPDATE ledger_balances SET balance = balance + (
        SELECT d.balance FROM ledger_balances d
        WHERE d.account = substr(ledger_balances.account, 1, length(ledger_balances.account) - length(':available')) || ':chargeback_debt'
          AND d.currency = ledger_balances.currency)
WHERE account LIKE '%:merchant:%:available' AND EXISTS (
        SELECT 1 FROM ledger_balances d
        WHERE d.account = substr(ledger_balances.account, 1, length(ledger_balances.account) - length(':available')) || ':chargeback_debt'
          AND d.currency = ledger_balances.currency AND d.balance <> 0);
UPDATE ledger_balances SET balance = 0 WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN instance_id;
DROP TABLE server_instances;
UPDATE ledger_balances SET non_negative = 1 WHERE account LIKE '%:merchant:%:available' AND balance >= 0;
