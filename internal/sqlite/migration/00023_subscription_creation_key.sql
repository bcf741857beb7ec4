-- +goose Up
-- The Idempotency-Key of the request that created a subscription: the
-- creation commits the subscription before its first payment is asked and
-- its answer stored, so a retry after a stopped process finds it rather
-- than subscribe the customer twice.
ALTER TABLE subscriptions ADD COLUMN creation_key TEXT;
CREATE UNIQUE INDEX subscriptions_creation_key ON subscriptions (merchant_id, mode, creation_key)
    WHERE creation_key IS NOT NULL;

-- +goose Down
DROP INDEX subscriptions_creation_key;
ALTER TABLE subscriptions DROP COLUMN creation_key;
