-- +goose Up
-- The PostgreSQL twin of internal/sqlite's payments migration, in native
-- types: timestamptz for times, bigint hundredths for amounts, jsonb for
-- metadata and next_action. An event's data is text, not jsonb: webhooks
-- sign and send the exact bytes recorded, and jsonb would rewrite them
-- (spacing, key order, duplicate keys).

CREATE TABLE customers (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL REFERENCES merchants (id),
    mode        text NOT NULL CHECK (mode IN ('test', 'live')),
    phone       text NOT NULL,
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    UNIQUE (merchant_id, mode, phone)
);

CREATE TABLE transactions (
    id                  text PRIMARY KEY,
    merchant_id         text NOT NULL REFERENCES merchants (id),
    mode                text NOT NULL CHECK (mode IN ('test', 'live')),
    type                text NOT NULL CHECK (type IN ('payment', 'payout', 'refund')),
    reference           text NOT NULL UNIQUE,
    merchant_ref        text,
    status              text NOT NULL CHECK (status IN ('initiated', 'pending', 'success', 'failed',
                            'cancelled', 'expired', 'refunded', 'disputed')),
    amount              bigint NOT NULL CHECK (amount > 0),
    currency            text NOT NULL,
    limit_amount        bigint NOT NULL,
    country             text NOT NULL,
    provider            text NOT NULL DEFAULT '',
    route               text NOT NULL DEFAULT '',
    route_reason        text NOT NULL DEFAULT '',
    provider_ref        text NOT NULL DEFAULT '',
    next_action         jsonb,
    payer_phone         text NOT NULL DEFAULT '',
    payer_name          text NOT NULL DEFAULT '',
    customer_id         text REFERENCES customers (id),
    success_url         text NOT NULL DEFAULT '',
    failed_url          text NOT NULL DEFAULT '',
    callback_url        text NOT NULL DEFAULT '',
    metadata            jsonb NOT NULL DEFAULT '{}',
    failure_reason      text NOT NULL DEFAULT '',
    exchange_rate       text NOT NULL DEFAULT '',
    settlement_amount   bigint,
    settlement_currency text,
    expires_at          timestamptz NOT NULL,
    reconciled_at       timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);
-- merchant_ref is the merchant's unique order number, per mode. The store
-- recognises a violation by this index's name: keep it.
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
CREATE INDEX transactions_list ON transactions (merchant_id, mode, type, created_at DESC, id DESC);
CREATE INDEX transactions_provider_ref ON transactions (provider, provider_ref) WHERE provider_ref <> '';
CREATE INDEX transactions_open ON transactions (expires_at) WHERE status IN ('initiated', 'pending');
CREATE INDEX transactions_payer ON transactions (payer_phone, created_at) WHERE payer_phone <> '';

-- The outbox: one row per committed state change.
CREATE TABLE events (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL REFERENCES merchants (id),
    mode        text NOT NULL,
    type        text NOT NULL,
    object_type text NOT NULL,
    object_id   text NOT NULL,
    seq         bigint NOT NULL,
    data        text NOT NULL,
    created_at  timestamptz NOT NULL,
    UNIQUE (object_id, seq)
);
CREATE INDEX events_merchant ON events (merchant_id, mode, created_at);

CREATE TABLE provider_notifications (
    provider   text NOT NULL,
    event_id   text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);

-- +goose Down
DROP TABLE provider_notifications;
DROP TABLE events;
DROP TABLE transactions;
DROP TABLE customers;
