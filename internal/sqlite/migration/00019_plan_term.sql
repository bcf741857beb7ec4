-- +goose Up
-- A plan's term: the number of billing periods a subscription to it runs
-- before it ends as expired (DECISIONS: "expired when its plan's term
-- ends"); 0 is a plan without a term, billed until cancelled.
ALTER TABLE plans ADD COLUMN term_count INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE plans DROP COLUMN term_count;
