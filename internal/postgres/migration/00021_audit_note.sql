-- +goose Up
-- What an operator wrote with an action (a payment marked refunded, a
-- dispute decided, a payout request moved): '' for none.
ALTER TABLE audit_log ADD COLUMN note text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN note;
