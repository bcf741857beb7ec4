-- +goose Up
-- The PostgreSQL twin of internal/sqlite's money migration: payouts and
-- refunds as transactions, the double-entry ledger, merchants' payout
-- requests and the operator's tokens, in native types (timestamptz,
-- bigint hundredths, boolean, bytea).

-- A refund names the payment it gives back (parent_id). fee is in the
-- ledger's currency (fee_currency, '' while there is no fee). A payout or
-- refund created under an Idempotency-Key keeps it, unique per merchant and
-- mode. dispatched_at is when the provider was last called about it.
ALTER TABLE transactions
    ADD COLUMN parent_id       text REFERENCES transactions (id),
    ADD COLUMN fee             bigint NOT NULL DEFAULT 0,
    ADD COLUMN fee_currency    text NOT NULL DEFAULT '',
    ADD COLUMN idempotency_key text,
    ADD COLUMN description     text NOT NULL DEFAULT '',
    ADD COLUMN dispatched_at   timestamptz;
CREATE UNIQUE INDEX transactions_idempotency_key ON transactions (merchant_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX transactions_parent ON transactions (parent_id) WHERE parent_id IS NOT NULL;
-- Payouts and refunds waiting for a provider call (DueQuery.Dispatch); the
-- query repeats this expression and predicate word for word.
CREATE INDEX transactions_dispatch ON transactions ((coalesce(dispatched_at, created_at)))
    WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending');

-- The journal. An entry's postings sum to zero in each currency. seq
-- orders entries by insertion.
CREATE TABLE ledger_entries (
    id          text PRIMARY KEY,
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    mode        text NOT NULL CHECK (mode IN ('test', 'live')),
    merchant_id text REFERENCES merchants (id),
    kind        text NOT NULL,
    ref_type    text NOT NULL,
    ref_id      text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX ledger_entries_ref ON ledger_entries (ref_id);

CREATE TABLE ledger_postings (
    entry_id text NOT NULL REFERENCES ledger_entries (id),
    line     integer NOT NULL,
    account  text NOT NULL,
    currency text NOT NULL,
    amount   bigint NOT NULL CHECK (amount <> 0),
    PRIMARY KEY (entry_id, line)
);
CREATE INDEX ledger_postings_account ON ledger_postings (account, currency);

-- Each account's balance: the sum of its postings, kept with them in the
-- same transaction. The database itself refuses a negative balance on a
-- non-negative account (a merchant's available and reserved money); the
-- store recognises a violation by the constraint's name: keep it.
-- updated_at is NULL for a row LockBalance created before any posting.
CREATE TABLE ledger_balances (
    account      text NOT NULL,
    currency     text NOT NULL,
    balance      bigint NOT NULL,
    non_negative boolean NOT NULL,
    updated_at   timestamptz,
    PRIMARY KEY (account, currency),
    CONSTRAINT ledger_balances_non_negative CHECK (NOT non_negative OR balance >= 0)
);

-- Merchants' withdrawals. amount, fee and net share one currency.
CREATE TABLE payout_requests (
    id               text PRIMARY KEY,
    merchant_id      text NOT NULL REFERENCES merchants (id),
    mode             text NOT NULL CHECK (mode IN ('test', 'live')),
    reference        text NOT NULL UNIQUE,
    status           text NOT NULL CHECK (status IN ('submitted', 'approved', 'completed', 'rejected', 'failed')),
    amount           bigint NOT NULL CHECK (amount > 0),
    fee              bigint NOT NULL CHECK (fee >= 0),
    net              bigint NOT NULL,
    currency         text NOT NULL,
    dest_phone       text NOT NULL DEFAULT '',
    dest_iban        text NOT NULL DEFAULT '',
    dest_bank        text NOT NULL DEFAULT '',
    merchant_note    text NOT NULL DEFAULT '',
    rejection_reason text NOT NULL DEFAULT '',
    failure_reason   text NOT NULL DEFAULT '',
    submitted_at     timestamptz NOT NULL,
    approved_at      timestamptz,
    completed_at     timestamptz,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX payout_requests_list ON payout_requests (merchant_id, mode, submitted_at DESC);
CREATE INDEX payout_requests_since ON payout_requests (merchant_id, submitted_at);
CREATE INDEX payout_requests_settled ON payout_requests (merchant_id, mode, completed_at DESC)
    WHERE status = 'completed';

CREATE TABLE operator_tokens (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    hash       bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

-- +goose Down
DROP TABLE operator_tokens;
DROP TABLE payout_requests;
DROP TABLE ledger_balances;
DROP TABLE ledger_postings;
DROP TABLE ledger_entries;
DROP INDEX transactions_dispatch;
DROP INDEX transactions_parent;
DROP INDEX transactions_idempotency_key;
ALTER TABLE transactions
    DROP COLUMN dispatched_at,
    DROP COLUMN description,
    DROP COLUMN idempotency_key,
    DROP COLUMN fee_currency,
    DROP COLUMN fee,
    DROP COLUMN parent_id;
