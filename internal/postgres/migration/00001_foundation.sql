-- +goose Up
-- The PostgreSQL twin of internal/sqlite's foundation, in native types:
-- timestamptz for times (the domain keeps microseconds, as PostgreSQL
-- does), bigint hundredths of the currency unit for amounts, bytea for
-- hashes, fingerprints and bodies, arrays for lists and jsonb for metadata.

CREATE TABLE settings (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE merchants (
    id                  text PRIMARY KEY,
    name                text NOT NULL,
    country             text NOT NULL,
    settlement_currency text NOT NULL,
    status              text NOT NULL CHECK (status IN ('active', 'suspended', 'pending', 'closed')),
    kyc                 text NOT NULL CHECK (kyc IN ('pending', 'approved', 'rejected')),
    allowed_providers   text[] NOT NULL DEFAULT '{}',
    allow_ips           cidr[] NOT NULL DEFAULT '{}',
    payouts_enabled     boolean NOT NULL DEFAULT true,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    merchant_id text NOT NULL REFERENCES merchants (id),
    mode        text NOT NULL CHECK (mode IN ('test', 'live')),
    type        text NOT NULL CHECK (type IN ('secret', 'publishable')),
    hash        bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    last4       text NOT NULL,
    scopes      text[] NOT NULL DEFAULT '{}',
    allow_ips   cidr[] NOT NULL DEFAULT '{}',
    expires_at  timestamptz,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);

-- A completed key has locked_until at the epoch, so it never looks held.
CREATE TABLE idempotency_keys (
    merchant_id           text NOT NULL REFERENCES merchants (id),
    mode                  text NOT NULL,
    key                   text NOT NULL,
    fingerprint           bytea NOT NULL,
    token                 text NOT NULL,
    state                 text NOT NULL CHECK (state IN ('in_flight', 'done')),
    locked_until          timestamptz NOT NULL,
    response_status       integer,
    response_content_type text,
    response_location     text,
    response_body         bytea,
    created_at            timestamptz NOT NULL,
    expires_at            timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, mode, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- New idempotency keys per merchant and mode in fixed windows: the quota
-- must hold across server processes, so it lives here.
CREATE TABLE idempotency_quota (
    merchant_id  text NOT NULL,
    mode         text NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL,
    PRIMARY KEY (merchant_id, mode, window_start)
);

CREATE TABLE plans (
    id             text PRIMARY KEY,
    merchant_id    text NOT NULL REFERENCES merchants (id),
    mode           text NOT NULL CHECK (mode IN ('test', 'live')),
    name           text NOT NULL,
    amount         bigint NOT NULL CHECK (amount > 0),
    currency       text NOT NULL,
    interval       text NOT NULL,
    interval_count integer NOT NULL CHECK (interval_count > 0),
    active         boolean NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX plans_merchant ON plans (merchant_id, mode, created_at DESC, id DESC);

-- +goose Down
DROP TABLE plans;
DROP TABLE idempotency_quota;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE merchants;
DROP TABLE settings;
