-- +goose Up
-- Disputes, marketplace splits and subscriptions, and the customers list.
-- Times are INTEGER microseconds since the Unix epoch, amounts INTEGER
-- hundredths.

-- A payer contesting a payment. amount is in the payment's currency,
-- ledger_amount its worth in the merchant's ledger (reserved while the
-- dispute is open); shortfall is the part of it available could not cover.
-- evidence is a JSON array of strings. provider_event_id names the provider
-- notification that opened it, NULL when none did.
CREATE TABLE disputes (
    id                TEXT PRIMARY KEY,
    merchant_id       TEXT NOT NULL REFERENCES merchants (id),
    mode              TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    reference         TEXT NOT NULL UNIQUE,
    transaction_id    TEXT NOT NULL REFERENCES transactions (id),
    amount            INTEGER NOT NULL CHECK (amount > 0),
    currency          TEXT NOT NULL,
    ledger_amount     INTEGER NOT NULL CHECK (ledger_amount >= 0),
    ledger_currency   TEXT NOT NULL,
    shortfall         INTEGER NOT NULL DEFAULT 0 CHECK (shortfall >= 0),
    reason            TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL CHECK (status IN ('needs_response', 'under_review', 'won', 'lost')),
    evidence          TEXT NOT NULL DEFAULT '[]',
    merchant_response TEXT NOT NULL DEFAULT '',
    due_by            INTEGER NOT NULL,
    responded_at      INTEGER,
    closed_at         INTEGER,
    provider_event_id TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX disputes_list ON disputes (merchant_id, mode, created_at DESC, id DESC);
-- DueDisputes: needs_response ones by due date.
CREATE INDEX disputes_due ON disputes (status, due_by);
-- At most one open dispute per payment: the database refuses a second.
CREATE UNIQUE INDEX disputes_open ON disputes (transaction_id)
    WHERE status IN ('needs_response', 'under_review');
CREATE UNIQUE INDEX disputes_provider_event ON disputes (provider_event_id)
    WHERE provider_event_id IS NOT NULL;

-- One beneficiary's share of a marketplace payment. merchant_id and mode
-- are the payment's; amount is in the payment's currency, ledger_amount in
-- the ledger's. credited_at is when the share reached the beneficiary.
CREATE TABLE split_items (
    id              TEXT PRIMARY KEY,
    payment_id      TEXT NOT NULL REFERENCES transactions (id),
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    mode            TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    beneficiary_id  TEXT NOT NULL REFERENCES merchants (id),
    amount          INTEGER NOT NULL CHECK (amount > 0),
    currency        TEXT NOT NULL,
    ledger_amount   INTEGER NOT NULL CHECK (ledger_amount >= 0),
    ledger_currency TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    credited_at     INTEGER,
    created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX split_items_payment ON split_items (payment_id);

-- A customer paying a plan each period. provider is '' for a hosted
-- checkout each period. next_action_at is when the job looks at it next.
-- metadata is a JSON object of strings.
CREATE TABLE subscriptions (
    id                   TEXT PRIMARY KEY,
    merchant_id          TEXT NOT NULL REFERENCES merchants (id),
    mode                 TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    plan_id              TEXT NOT NULL REFERENCES plans (id),
    customer_id          TEXT NOT NULL REFERENCES customers (id),
    status               TEXT NOT NULL CHECK (status IN ('active', 'cancelled', 'expired')),
    provider             TEXT NOT NULL DEFAULT '',
    cancel_at_period_end INTEGER NOT NULL DEFAULT 0 CHECK (cancel_at_period_end IN (0, 1)),
    current_period_start INTEGER NOT NULL,
    current_period_end   INTEGER NOT NULL,
    next_action_at       INTEGER NOT NULL,
    failed_attempts      INTEGER NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    latest_payment_id    TEXT REFERENCES transactions (id),
    cancelled_at         INTEGER,
    metadata             TEXT NOT NULL DEFAULT '{}',
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) STRICT;
CREATE INDEX subscriptions_list ON subscriptions (merchant_id, mode, created_at DESC, id DESC);
-- DueSubscriptions scans the active ones by next action.
CREATE INDEX subscriptions_due ON subscriptions (next_action_at) WHERE status = 'active';

-- Customers lists a merchant's customers, newest first.
CREATE INDEX customers_list ON customers (merchant_id, mode, created_at DESC, id DESC);

-- +goose Down
DROP INDEX customers_list;
DROP TABLE subscriptions;
DROP TABLE split_items;
DROP TABLE disputes;
