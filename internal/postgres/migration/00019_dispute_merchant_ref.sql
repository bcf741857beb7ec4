-- +goose Up
-- A dispute carries its payment's merchant_ref, so that its record and its
-- events (dispute.opened, .responded, .won, .lost) name the merchant's
-- order as merchant_reference, as the payment's own events do. A
-- payment's merchant_ref never changes, so a copy cannot drift.
ALTER TABLE disputes ADD COLUMN merchant_ref text;
UPDATE disputes d SET merchant_ref = t.merchant_ref FROM transactions t WHERE t.id = d.transaction_id;

-- +goose Down
ALTER TABLE disputes DROP COLUMN merchant_ref;
