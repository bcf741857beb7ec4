-- +goose Up
-- The PostgreSQL twin of internal/sqlite's webhooks migration, in native
-- types: timestamptz for times, text[] for an endpoint's event types.
-- Merchants' endpoints, one delivery per event and URL, every attempt of a
-- delivery, and the merchants' secrets for callback_url deliveries.

-- events is the list of event types, empty for every event. A deleted
-- endpoint keeps its row (deliveries name it) with deleted_at set.
-- previous_secret signs too until previous_expires_at (secret rotation).
CREATE TABLE webhook_endpoints (
    id                  text PRIMARY KEY,
    merchant_id         text NOT NULL REFERENCES merchants (id),
    mode                text NOT NULL CHECK (mode IN ('test', 'live')),
    url                 text NOT NULL,
    description         text NOT NULL DEFAULT '',
    events              text[] NOT NULL DEFAULT '{}',
    payload_format      text NOT NULL CHECK (payload_format IN ('legacy', '2026-06-01')),
    secret              text NOT NULL,
    previous_secret     text NOT NULL DEFAULT '',
    previous_expires_at timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    deleted_at          timestamptz
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, mode) WHERE deleted_at IS NULL;

-- One event on its way to one URL: an endpoint's, or the transaction's
-- callback_url (endpoint_id NULL). locked_until is the hold of the
-- dispatcher that claimed it, the epoch when nobody holds it.
CREATE TABLE webhook_deliveries (
    id              text PRIMARY KEY,
    event_id        text NOT NULL REFERENCES events (id),
    merchant_id     text NOT NULL,
    mode            text NOT NULL CHECK (mode IN ('test', 'live')),
    endpoint_id     text REFERENCES webhook_endpoints (id),
    url             text NOT NULL,
    payload_format  text NOT NULL CHECK (payload_format IN ('legacy', '2026-06-01')),
    status          text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_attempt_at timestamptz,
    locked_until    timestamptz NOT NULL DEFAULT 'epoch',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
-- Claiming (ClaimDeliveries) scans the pending deliveries by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- http_status is 0 when no answer came.
CREATE TABLE webhook_attempts (
    id            text PRIMARY KEY,
    delivery_id   text NOT NULL REFERENCES webhook_deliveries (id),
    attempted_at  timestamptz NOT NULL,
    duration_ms   bigint NOT NULL,
    http_status   integer NOT NULL DEFAULT 0,
    error_message text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempted_at);

-- The secret that signs a merchant's callback_url deliveries in a mode,
-- made on first use and never changed.
CREATE TABLE webhook_callback_secrets (
    merchant_id text NOT NULL,
    mode        text NOT NULL CHECK (mode IN ('test', 'live')),
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, mode)
);

-- +goose Down
DROP TABLE webhook_callback_secrets;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
