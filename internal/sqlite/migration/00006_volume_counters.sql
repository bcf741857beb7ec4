-- +goose Up
-- Running sums of counted payments (pending, success, refunded, disputed)
-- per scope and UTC day of creation, kept in the payment's transaction, so
-- that the volume limits read at most 31 rows instead of scanning
-- payments. Scopes: 'm:<merchant>:<mode>', 'mp:<merchant>:<mode>:<provider>',
-- 'p:<mode>:<payer phone>'. day: days since 1970-01-01 UTC.
CREATE TABLE volume_counters (
    scope  TEXT NOT NULL,
    day    INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    PRIMARY KEY (scope, day)
) STRICT, WITHOUT ROWID;

INSERT INTO volume_counters (scope, day, amount)
SELECT scope, day, sum(limit_amount) FROM (
    SELECT 'm:' || merchant_id || ':' || mode AS scope, created_at / 86400000000 AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'mp:' || merchant_id || ':' || mode || ':' || provider, created_at / 86400000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'p:' || mode || ':' || payer_phone, created_at / 86400000000, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
       AND payer_phone <> ''
) GROUP BY scope, day;

-- +goose Down
DROP TABLE volume_counters;
