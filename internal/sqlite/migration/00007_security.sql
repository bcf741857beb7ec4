-- +goose Up
-- Publishable keys are public: they get an Idempotency-Key scope and quota
-- of their own, a merchant_ref namespace of their own, and their payments
-- are marked so that the hosted page and the limits can treat them apart.

CREATE TABLE idempotency_keys_new (
    merchant_id           TEXT NOT NULL REFERENCES merchants (id),
    mode                  TEXT NOT NULL,
    key_type              TEXT NOT NULL CHECK (key_type IN ('secret', 'publishable')),
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
    PRIMARY KEY (merchant_id, mode, key_type, key)
) STRICT;
INSERT INTO idempotency_keys_new (merchant_id, mode, key_type, key, fingerprint, token, state, locked_until,
    response_status, response_content_type, response_location, response_body, created_at, expires_at)
SELECT merchant_id, mode, 'secret', key, fingerprint, token, state, locked_until,
    response_status, response_content_type, response_location, response_body, created_at, expires_at
  FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_new RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

CREATE TABLE idempotency_quota_new (
    merchant_id  TEXT NOT NULL,
    mode         TEXT NOT NULL,
    key_type     TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, mode, key_type, window_start)
) STRICT;
INSERT INTO idempotency_quota_new SELECT merchant_id, mode, 'secret', window_start, count FROM idempotency_quota;
DROP TABLE idempotency_quota;
ALTER TABLE idempotency_quota_new RENAME TO idempotency_quota;

-- Which kind of key created a transaction; merchant_ref is unique per kind,
-- so a publishable key can never take a secret key's order number.
ALTER TABLE transactions ADD COLUMN key_type TEXT NOT NULL DEFAULT 'secret'
    CHECK (key_type IN ('secret', 'publishable'));
DROP INDEX transactions_merchant_ref;
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, key_type, merchant_ref)
    WHERE merchant_ref IS NOT NULL;

-- A pending payment holds room against the limits for 30 minutes only:
-- the volume counters keep settled payments, and the hold counters
-- (scope 'h:' + the volume scope, by the UTC minute of creation in the day
-- column) keep pending ones, of which the limits read the last 30 minutes.
DELETE FROM volume_counters;
INSERT INTO volume_counters (scope, day, amount)
SELECT scope, day, sum(limit_amount) FROM (
    SELECT 'm:' || merchant_id || ':' || mode AS scope, created_at / 86400000000 AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'mp:' || merchant_id || ':' || mode || ':' || provider, created_at / 86400000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'p:' || mode || ':' || payer_phone, created_at / 86400000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
       AND payer_phone <> ''
) GROUP BY scope, day;
INSERT INTO volume_counters (scope, day, amount)
SELECT scope, day, sum(limit_amount) FROM (
    SELECT 'h:m:' || merchant_id || ':' || mode AS scope, created_at / 60000000 AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending'
    UNION ALL
    SELECT 'h:mp:' || merchant_id || ':' || mode || ':' || provider, created_at / 60000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending' AND provider <> ''
    UNION ALL
    SELECT 'h:p:' || mode || ':' || payer_phone, created_at / 60000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending' AND payer_phone <> ''
) GROUP BY scope, day;

-- The hosts a publishable key's return URLs may point at.
ALTER TABLE merchants ADD COLUMN return_hosts TEXT NOT NULL DEFAULT '';

-- Fixed-window counters of rate limits that must hold across processes.
CREATE TABLE rate_counters (
    scope        TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (scope, window_start)
) STRICT, WITHOUT ROWID;

ALTER TABLE operator_tokens ADD COLUMN expires_at INTEGER;

-- Every operator action, append-only.
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    at          INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    token_id    TEXT NOT NULL DEFAULT '',
    action      TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    before      TEXT,
    after       TEXT,
    request_id  TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE audit_log;
ALTER TABLE operator_tokens DROP COLUMN expires_at;
DROP TABLE rate_counters;
ALTER TABLE merchants DROP COLUMN return_hosts;
DROP INDEX transactions_merchant_ref;
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
ALTER TABLE transactions DROP COLUMN key_type;
