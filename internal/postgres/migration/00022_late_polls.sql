-- +goose Up
-- Payments cancelled or expired after a provider was asked to collect
-- them: a payer may still pay in the wallet, and a notification of it may
-- be lost. Each row is when reconciliation next asks the provider; it
-- goes when the payment is collected late or its provider's answer is
-- final, or a day after the payment closed.
CREATE TABLE late_polls (
    transaction_id text PRIMARY KEY REFERENCES transactions (id),
    poll_at        timestamptz NOT NULL
);
CREATE INDEX late_polls_due ON late_polls (poll_at);

-- The payments that closed in the last day are asked about at once.
INSERT INTO late_polls (transaction_id, poll_at)
SELECT id, updated_at FROM transactions
WHERE type = 'payment' AND status IN ('cancelled', 'expired') AND provider <> ''
    AND updated_at >= now() - interval '1 day';

-- +goose Down
DROP TABLE late_polls;
