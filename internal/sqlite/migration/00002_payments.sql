-- +goose Up
CREATE TABLE customers (
    id          TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    mode        TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    phone       TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (merchant_id, mode, phone)
) STRICT;

CREATE TABLE transactions (
    id                  TEXT PRIMARY KEY,
    merchant_id         TEXT NOT NULL REFERENCES merchants (id),
    mode                TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    type                TEXT NOT NULL CHECK (type IN ('payment', 'payout', 'refund')),
    reference           TEXT NOT NULL UNIQUE,
    merchant_ref        TEXT,
    status              TEXT NOT NULL CHECK (status IN ('initiated', 'pending', 'success', 'failed',
                            'cancelled', 'expired', 'refunded', 'disputed')),
    amount              INTEGER NOT NULL CHECK (amount > 0),
    currency            TEXT NOT NULL,
    limit_amount        INTEGER NOT NULL,
    country             TEXT NOT NULL,
    provider            TEXT NOT NULL DEFAULT '',
    route               TEXT NOT NULL DEFAULT '',
    route_reason        TEXT NOT NULL DEFAULT '',
    provider_ref        TEXT NOT NULL DEFAULT '',
    next_action         TEXT,
    payer_phone         TEXT NOT NULL DEFAULT '',
    payer_name          TEXT NOT NULL DEFAULT '',
    customer_id         TEXT REFERENCES customers (id),
    success_url         TEXT NOT NULL DEFAULT '',
    failed_url          TEXT NOT NULL DEFAULT '',
    callback_url        TEXT NOT NULL DEFAULT '',
    metadata            TEXT NOT NULL DEFAULT '{}',
    failure_reason      TEXT NOT NULL DEFAULT '',
    exchange_rate       TEXT NOT NULL DEFAULT '',
    settlement_amount   INTEGER,
    settlement_currency TEXT,
    expires_at          INTEGER NOT NULL,
    reconciled_at       INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
) STRICT;
-- merchant_ref is the merchant's unique order number, per mode.
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at DESC, id DESC);
CREATE INDEX transactions_provider_ref ON transactions (provider, provider_ref) WHERE provider_ref <> '';
CREATE INDEX transactions_open ON transactions (expires_at) WHERE status IN ('initiated', 'pending');
CREATE INDEX transactions_payer ON transactions (payer_phone, created_at) WHERE payer_phone <> '';

-- The outbox: one row per committed state change.
CREATE TABLE events (
    id          TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    mode        TEXT NOT NULL,
    type        TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (object_id, seq)
) STRICT;
CREATE INDEX events_merchant ON events (merchant_id, mode, created_at);

CREATE TABLE provider_notifications (
    provider   TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (provider, event_id)
) STRICT;

-- +goose Down
DROP TABLE provider_notifications;
DROP TABLE events;
DROP TABLE transactions;
DROP TABLE customers;
