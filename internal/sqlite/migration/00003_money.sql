-- +goose Up
-- Money movements: payouts and refunds as transactions, the double-entry
-- ledger, merchants' payout requests and the operator's tokens. Times are
-- INTEGER microseconds since the Unix epoch, amounts INTEGER hundredths.

-- A refund names the payment it gives back (parent_id). fee is in the
-- ledger's currency (fee_currency, '' while there is no fee). A payout or
-- refund created under an Idempotency-Key keeps it, unique per merchant and
-- mode. dispatched_at is when the provider was last called about it.
ALTER TABLE transactions ADD COLUMN parent_id TEXT REFERENCES transactions (id);
ALTER TABLE transactions ADD COLUMN fee INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transactions ADD COLUMN fee_currency TEXT NOT NULL DEFAULT '';
ALTER TABLE transactions ADD COLUMN idempotency_key TEXT;
ALTER TABLE transactions ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE transactions ADD COLUMN dispatched_at INTEGER;
CREATE UNIQUE INDEX transactions_idempotency_key ON transactions (merchant_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX transactions_parent ON transactions (parent_id) WHERE parent_id IS NOT NULL;
-- Payouts and refunds waiting for a provider call (DueQuery.Dispatch); the
-- query repeats this expression and predicate word for word.
CREATE INDEX transactions_dispatch ON transactions (coalesce(dispatched_at, created_at))
    WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending');

-- The journal. An entry's postings sum to zero in each currency. Entries
-- are listed in insertion order, which is rowid order: rows are never
-- deleted.
CREATE TABLE ledger_entries (
    id          TEXT PRIMARY KEY,
    mode        TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    merchant_id TEXT REFERENCES merchants (id),
    kind        TEXT NOT NULL,
    ref_type    TEXT NOT NULL,
    ref_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX ledger_entries_ref ON ledger_entries (ref_id);

CREATE TABLE ledger_postings (
    entry_id TEXT NOT NULL REFERENCES ledger_entries (id),
    line     INTEGER NOT NULL,
    account  TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount   INTEGER NOT NULL CHECK (amount <> 0),
    PRIMARY KEY (entry_id, line)
) STRICT;
CREATE INDEX ledger_postings_account ON ledger_postings (account, currency);

-- Each account's balance: the sum of its postings, kept with them in the
-- same transaction. The database itself refuses a negative balance on a
-- non-negative account (a merchant's available and reserved money); the
-- store recognises a violation by the constraint's name: keep it.
-- updated_at is NULL for a row LockBalance created before any posting.
CREATE TABLE ledger_balances (
    account      TEXT NOT NULL,
    currency     TEXT NOT NULL,
    balance      INTEGER NOT NULL,
    non_negative INTEGER NOT NULL CHECK (non_negative IN (0, 1)),
    updated_at   INTEGER,
    PRIMARY KEY (account, currency),
    CONSTRAINT ledger_balances_non_negative CHECK (NOT non_negative OR balance >= 0)
) STRICT;

-- Merchants' withdrawals. amount, fee and net share one currency.
CREATE TABLE payout_requests (
    id               TEXT PRIMARY KEY,
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    mode             TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    reference        TEXT NOT NULL UNIQUE,
    status           TEXT NOT NULL CHECK (status IN ('submitted', 'approved', 'completed', 'rejected', 'failed')),
    amount           INTEGER NOT NULL CHECK (amount > 0),
    fee              INTEGER NOT NULL CHECK (fee >= 0),
    net              INTEGER NOT NULL,
    currency         TEXT NOT NULL,
    dest_phone       TEXT NOT NULL DEFAULT '',
    dest_iban        TEXT NOT NULL DEFAULT '',
    dest_bank        TEXT NOT NULL DEFAULT '',
    merchant_note    TEXT NOT NULL DEFAULT '',
    rejection_reason TEXT NOT NULL DEFAULT '',
    failure_reason   TEXT NOT NULL DEFAULT '',
    submitted_at     INTEGER NOT NULL,
    approved_at      INTEGER,
    completed_at     INTEGER,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX payout_requests_list ON payout_requests (merchant_id, mode, submitted_at DESC);
CREATE INDEX payout_requests_since ON payout_requests (merchant_id, submitted_at);
CREATE INDEX payout_requests_settled ON payout_requests (merchant_id, mode, completed_at DESC)
    WHERE status = 'completed';

CREATE TABLE operator_tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    hash       BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

-- +goose Down
DROP TABLE operator_tokens;
DROP TABLE payout_requests;
DROP TABLE ledger_balances;
DROP TABLE ledger_postings;
DROP TABLE ledger_entries;
DROP INDEX transactions_dispatch;
DROP INDEX transactions_parent;
DROP INDEX transactions_idempotency_key;
ALTER TABLE transactions DROP COLUMN dispatched_at;
ALTER TABLE transactions DROP COLUMN description;
ALTER TABLE transactions DROP COLUMN idempotency_key;
ALTER TABLE transactions DROP COLUMN fee_currency;
ALTER TABLE transactions DROP COLUMN fee;
ALTER TABLE transactions DROP COLUMN parent_id;
