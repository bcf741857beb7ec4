-- +goose Up
-- The Idempotency-Key of the last request that created or resumed a
-- payment sent to a provider: that request, retried after a 5xx, finds the
-- payment whatever it became meanwhile. Not unique, and not indexed: it is
-- read with the payment's merchant_ref.
ALTER TABLE transactions ADD COLUMN creation_key text;

-- +goose Down
ALTER TABLE transactions DROP COLUMN creation_key;
