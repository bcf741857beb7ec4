-- +goose Up
-- Publishable keys are public: they get an Idempotency-Key scope and quota
-- of their own, a merchant_ref namespace of their own, and their payments
-- are marked so that the hosted page and the limits can treat them apart.

ALTER TABLE idempotency_keys ADD COLUMN key_type text NOT NULL DEFAULT 'secret'
    CHECK (key_type IN ('secret', 'publishable'));
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (merchant_id, mode, key_type, key);
ALTER TABLE idempotency_keys ALTER COLUMN key_type DROP DEFAULT;

ALTER TABLE idempotency_quota ADD COLUMN key_type text NOT NULL DEFAULT 'secret';
ALTER TABLE idempotency_quota DROP CONSTRAINT idempotency_quota_pkey;
ALTER TABLE idempotency_quota ADD PRIMARY KEY (merchant_id, mode, key_type, window_start);
ALTER TABLE idempotency_quota ALTER COLUMN key_type DROP DEFAULT;

-- Which kind of key created a transaction; merchant_ref is unique per kind,
-- so a publishable key can never take a secret key's order number.
ALTER TABLE transactions ADD COLUMN key_type text NOT NULL DEFAULT 'secret'
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
    SELECT 'm:' || merchant_id || ':' || mode AS scope,
           floor(extract(epoch FROM created_at) / 86400)::bigint AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'mp:' || merchant_id || ':' || mode || ':' || provider,
           floor(extract(epoch FROM created_at) / 86400)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'p:' || mode || ':' || payer_phone,
           floor(extract(epoch FROM created_at) / 86400)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('success', 'refunded', 'disputed')
       AND payer_phone <> ''
) AS counted GROUP BY scope, day;
INSERT INTO volume_counters (scope, day, amount)
SELECT scope, day, sum(limit_amount) FROM (
    SELECT 'h:m:' || merchant_id || ':' || mode AS scope, floor(extract(epoch FROM created_at) / 60)::bigint AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending'
    UNION ALL
    SELECT 'h:mp:' || merchant_id || ':' || mode || ':' || provider, floor(extract(epoch FROM created_at) / 60)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending' AND provider <> ''
    UNION ALL
    SELECT 'h:p:' || mode || ':' || payer_phone, floor(extract(epoch FROM created_at) / 60)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status = 'pending' AND payer_phone <> ''
) AS held GROUP BY scope, day;

-- The hosts a publishable key's return URLs may point at.
ALTER TABLE merchants ADD COLUMN return_hosts text[] NOT NULL DEFAULT '{}';

-- Fixed-window counters of rate limits that must hold across processes.
CREATE TABLE rate_counters (
    scope        text NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL,
    PRIMARY KEY (scope, window_start)
);

ALTER TABLE operator_tokens ADD COLUMN expires_at timestamptz;

-- Every operator action, append-only.
CREATE TABLE audit_log (
    id          text PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    token_id    text NOT NULL DEFAULT '',
    action      text NOT NULL,
    object_type text NOT NULL,
    object_id   text NOT NULL,
    before      jsonb,
    after       jsonb,
    request_id  text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
-- +goose StatementBegin
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- +goose Down
DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
ALTER TABLE operator_tokens DROP COLUMN expires_at;
DROP TABLE rate_counters;
ALTER TABLE merchants DROP COLUMN return_hosts;
DROP INDEX transactions_merchant_ref;
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
ALTER TABLE transactions DROP COLUMN key_type;
