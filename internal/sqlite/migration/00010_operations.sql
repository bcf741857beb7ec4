-- +goose Up
-- The operator console and the business metrics (issue 14).

-- Business counters, added to in the transaction of the command that
-- caused them: one row per UTC day (days since 1970-01-01; day 0 holds the
-- folded totals of older days), metric, key and shard. count and amount
-- only grow; amount is in minor units of XOF. See xaalis.StatDelta.
CREATE TABLE stat_counters (
    day    INTEGER NOT NULL,
    metric TEXT NOT NULL,
    key    TEXT NOT NULL,
    shard  INTEGER NOT NULL,
    count  INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    PRIMARY KEY (day, metric, key, shard)
) STRICT, WITHOUT ROWID;

-- The payments made before this migration, counted once as initiated and
-- once in their current status, into the folded day.
INSERT INTO stat_counters (day, metric, key, shard, count, amount)
SELECT 0, 'payments', key, 0, count(*), sum(limit_amount) FROM (
    SELECT mode || '|' || provider || '|' || country || '|initiated' AS key, limit_amount
      FROM transactions WHERE type = 'payment'
    UNION ALL
    SELECT mode || '|' || provider || '|' || country || '|' || status, limit_amount
      FROM transactions WHERE type = 'payment' AND status <> 'initiated'
) GROUP BY key;

-- Every ledger check's outcome: the console and the metrics show the last.
CREATE TABLE ledger_checks (
    id          TEXT PRIMARY KEY,
    at          INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    problems    INTEGER NOT NULL,
    detail      TEXT NOT NULL,
    actor       TEXT NOT NULL
) STRICT;
CREATE INDEX ledger_checks_at ON ledger_checks (at DESC, id DESC);

-- Console sessions: the cookie's SHA-256 only.
CREATE TABLE operator_sessions (
    id           TEXT PRIMARY KEY,
    hash         BLOB NOT NULL UNIQUE,
    token_id     TEXT NOT NULL REFERENCES operator_tokens (id),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    client_ip    TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX operator_sessions_seen ON operator_sessions (last_seen_at);

-- The oldest pending delivery, read at every scrape.
CREATE INDEX webhook_deliveries_pending_created ON webhook_deliveries (created_at) WHERE status = 'pending';
-- The console's searches across merchants.
CREATE INDEX transactions_merchant_ref_any ON transactions (merchant_ref) WHERE merchant_ref IS NOT NULL;
-- The operator's queue of payout requests, oldest first.
CREATE INDEX payout_requests_queue ON payout_requests (status, submitted_at) WHERE status IN ('submitted', 'approved');
-- The jobs' lags: the oldest due item of each job.
CREATE INDEX transactions_reconcile ON transactions ((coalesce(reconciled_at, created_at)))
    WHERE type = 'payment' AND status = 'pending' AND provider_ref <> '';

-- +goose Down
DROP INDEX transactions_reconcile;
DROP INDEX payout_requests_queue;
DROP INDEX transactions_merchant_ref_any;
DROP INDEX webhook_deliveries_pending_created;
DROP TABLE operator_sessions;
DROP TABLE ledger_checks;
DROP TABLE stat_counters;
