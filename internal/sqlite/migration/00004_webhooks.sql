-- +goose Up
-- Webhooks: merchants' endpoints, one delivery per event and URL, every
-- attempt of a delivery, and the merchants' secrets for callback_url
-- deliveries. Times are INTEGER microseconds since the Unix epoch, UTC.

-- events is a comma-joined list of event types, '' for every event. A
-- deleted endpoint keeps its row (deliveries name it) with deleted_at set.
-- previous_secret signs too until previous_expires_at (secret rotation).
CREATE TABLE webhook_endpoints (
    id                  TEXT PRIMARY KEY,
    merchant_id         TEXT NOT NULL REFERENCES merchants (id),
    mode                TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    url                 TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    events              TEXT NOT NULL DEFAULT '',
    payload_format      TEXT NOT NULL CHECK (payload_format IN ('legacy', '2026-06-01')),
    secret              TEXT NOT NULL,
    previous_secret     TEXT NOT NULL DEFAULT '',
    previous_expires_at INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    deleted_at          INTEGER
) STRICT;
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, mode) WHERE deleted_at IS NULL;

-- One event on its way to one URL: an endpoint's, or the transaction's
-- callback_url (endpoint_id NULL). locked_until is the hold of the
-- dispatcher that claimed it, 0 when nobody holds it.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL REFERENCES events (id),
    merchant_id     TEXT NOT NULL,
    mode            TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    endpoint_id     TEXT REFERENCES webhook_endpoints (id),
    url             TEXT NOT NULL,
    payload_format  TEXT NOT NULL CHECK (payload_format IN ('legacy', '2026-06-01')),
    status          TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_attempt_at INTEGER,
    locked_until    INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
-- Claiming (ClaimDeliveries) scans the pending deliveries by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- http_status is 0 when no answer came.
CREATE TABLE webhook_attempts (
    id            TEXT PRIMARY KEY,
    delivery_id   TEXT NOT NULL REFERENCES webhook_deliveries (id),
    attempted_at  INTEGER NOT NULL,
    duration_ms   INTEGER NOT NULL,
    http_status   INTEGER NOT NULL DEFAULT 0,
    error_message TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempted_at);

-- The secret that signs a merchant's callback_url deliveries in a mode,
-- made on first use and never changed.
CREATE TABLE webhook_callback_secrets (
    merchant_id TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, mode)
) STRICT;

-- +goose Down
DROP TABLE webhook_callback_secrets;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
