-- +goose Up
-- The PostgreSQL twin of internal/sqlite's market migration, in native
-- types: timestamptz for times, bigint hundredths for amounts, text[] for a
-- dispute's evidence and jsonb for a subscription's metadata. Disputes,
-- marketplace splits and subscriptions, and the customers list.

-- A payer contesting a payment. amount is in the payment's currency,
-- ledger_amount its worth in the merchant's ledger (reserved while the
-- dispute is open); shortfall is the part of it available could not cover.
-- provider_event_id names the provider notification that opened it, NULL
-- when none did.
CREATE TABLE disputes (
    id                text PRIMARY KEY,
    merchant_id       text NOT NULL REFERENCES merchants (id),
    mode              text NOT NULL CHECK (mode IN ('test', 'live')),
    reference         text NOT NULL UNIQUE,
    transaction_id    text NOT NULL REFERENCES transactions (id),
    amount            bigint NOT NULL CHECK (amount > 0),
    currency          text NOT NULL,
    ledger_amount     bigint NOT NULL CHECK (ledger_amount >= 0),
    ledger_currency   text NOT NULL,
    shortfall         bigint NOT NULL DEFAULT 0 CHECK (shortfall >= 0),
    reason            text NOT NULL DEFAULT '',
    status            text NOT NULL CHECK (status IN ('needs_response', 'under_review', 'won', 'lost')),
    evidence          text[] NOT NULL DEFAULT '{}',
    merchant_response text NOT NULL DEFAULT '',
    due_by            timestamptz NOT NULL,
    responded_at      timestamptz,
    closed_at         timestamptz,
    provider_event_id text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
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
    id              text PRIMARY KEY,
    payment_id      text NOT NULL REFERENCES transactions (id),
    merchant_id     text NOT NULL REFERENCES merchants (id),
    mode            text NOT NULL CHECK (mode IN ('test', 'live')),
    beneficiary_id  text NOT NULL REFERENCES merchants (id),
    amount          bigint NOT NULL CHECK (amount > 0),
    currency        text NOT NULL,
    ledger_amount   bigint NOT NULL CHECK (ledger_amount >= 0),
    ledger_currency text NOT NULL,
    description     text NOT NULL DEFAULT '',
    credited_at     timestamptz,
    created_at      timestamptz NOT NULL
);
CREATE INDEX split_items_payment ON split_items (payment_id);

-- A customer paying a plan each period. provider is '' for a hosted
-- checkout each period. next_action_at is when the job looks at it next.
CREATE TABLE subscriptions (
    id                   text PRIMARY KEY,
    merchant_id          text NOT NULL REFERENCES merchants (id),
    mode                 text NOT NULL CHECK (mode IN ('test', 'live')),
    plan_id              text NOT NULL REFERENCES plans (id),
    customer_id          text NOT NULL REFERENCES customers (id),
    status               text NOT NULL CHECK (status IN ('active', 'cancelled', 'expired')),
    provider             text NOT NULL DEFAULT '',
    cancel_at_period_end boolean NOT NULL DEFAULT false,
    current_period_start timestamptz NOT NULL,
    current_period_end   timestamptz NOT NULL,
    next_action_at       timestamptz NOT NULL,
    failed_attempts      integer NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    latest_payment_id    text REFERENCES transactions (id),
    cancelled_at         timestamptz,
    metadata             jsonb NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL
);
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
