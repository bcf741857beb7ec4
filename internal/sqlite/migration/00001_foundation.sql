-- +goose Up
-- Times are INTEGER microseconds since the Unix epoch, UTC. Amounts are
-- INTEGER hundredths of the currency unit.

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE merchants (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    country             TEXT NOT NULL,
    settlement_currency TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'pending', 'closed')),
    kyc                 TEXT NOT NULL CHECK (kyc IN ('pending', 'approved', 'rejected')),
    allowed_providers   TEXT NOT NULL DEFAULT '',
    allow_ips           TEXT NOT NULL DEFAULT '',
    payouts_enabled     INTEGER NOT NULL DEFAULT 1,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    mode        TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    type        TEXT NOT NULL CHECK (type IN ('secret', 'publishable')),
    hash        BLOB NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    last4       TEXT NOT NULL,
    scopes      TEXT NOT NULL DEFAULT '',
    allow_ips   TEXT NOT NULL DEFAULT '',
    expires_at  INTEGER,
    revoked_at  INTEGER,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);

CREATE TABLE idempotency_keys (
    merchant_id           TEXT NOT NULL REFERENCES merchants (id),
    mode                  TEXT NOT NULL,
    key                   TEXT NOT NULL,
    fingerprint           BLOB NOT NULL,
    token                 TEXT NOT NULL,
    state                 TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
    locked_until          INTEGER NOT NULL,
    response_status       INTEGER,
    response_content_type TEXT,
    response_location     TEXT,
    response_body         BLOB,
    created_at            INTEGER NOT NULL,
    expires_at            INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, mode, key)
) STRICT;
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- New idempotency keys per merchant and mode in fixed windows: the quota
-- must hold across server processes, so it lives here.
CREATE TABLE idempotency_quota (
    merchant_id  TEXT NOT NULL,
    mode         TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, mode, window_start)
) STRICT;

CREATE TABLE plans (
    id             TEXT PRIMARY KEY,
    merchant_id    TEXT NOT NULL REFERENCES merchants (id),
    mode           TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    name           TEXT NOT NULL,
    amount         INTEGER NOT NULL CHECK (amount > 0),
    currency       TEXT NOT NULL,
    interval       TEXT NOT NULL,
    interval_count INTEGER NOT NULL CHECK (interval_count > 0),
    active         INTEGER NOT NULL,
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX plans_merchant ON plans (merchant_id, mode, created_at DESC, id DESC);

-- +goose Down
DROP TABLE plans;
DROP TABLE idempotency_quota;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE merchants;
DROP TABLE settings;
