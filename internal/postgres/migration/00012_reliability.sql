-- +goose Up
-- Server instances. Each `xaalis serve` records itself here and beats every
-- few seconds; a clean shutdown deletes its row. An Idempotency-Key claim
-- names the instance running its request (instance_id): the key is in
-- flight while that instance lives, and a retry takes it over at once when
-- the instance is gone (no row, or a heartbeat older than three intervals).
-- Claims of a claimant without an instance (NULL) hold for locked_until.
CREATE TABLE server_instances (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    process      text NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
ALTER TABLE idempotency_keys ADD COLUMN instance_id text;

-- Refund debt. A merchant's available balance may now go below zero, but
-- only through refunds and chargebacks: the store refuses any other debit
-- that ends below zero (ledger.Entry.AllowDebt, checked as each entry is
-- posted). Reserved money stays non-negative in the database itself.
UPDATE ledger_balances SET non_negative = false WHERE account LIKE '%:merchant:%:available';

-- The chargeback debt of disputes that available could not cover was kept
-- apart, in a chargeback_debt account, and only shown. It is now carried
-- in available like every debt, and recovered from the next credits: one
-- balanced entry per account moves it there.
INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
SELECT 'debt-00012-' || account || '-' || currency, split_part(account, ':', 1), split_part(account, ':', 3),
       'debt.fold', 'ledger_account', account, now()
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
SELECT 'debt-00012-' || account || '-' || currency, 1, account, currency, -balance
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
SELECT 'debt-00012-' || account || '-' || currency, 2,
       left(account, length(account) - length(':chargeback_debt')) || ':available', currency, balance
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;
INSERT INTO ledger_balances (account, currency, balance, non_negative)
SELECT left(account, length(account) - length(':chargeback_debt')) || ':available', currency, 0, false
FROM ledger_balances WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0
ON CONFLICT (account, currency) DO NOTHING;
UPDATE ledger_balances AS a SET balance = a.balance + d.balance
FROM ledger_balances AS d
WHERE a.account LIKE '%:merchant:%:available' AND d.balance <> 0 AND d.currency = a.currency
  AND d.account = left(a.account, length(a.account) - length(':available')) || ':chargeback_debt';
UPDATE ledger_balances SET balance = 0 WHERE account LIKE '%:merchant:%:chargeback_debt' AND balance <> 0;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN instance_id;
DROP TABLE server_instances;
UPDATE ledger_balances SET non_negative = true WHERE account LIKE '%:merchant:%:available' AND balance >= 0;
