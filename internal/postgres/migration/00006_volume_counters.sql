-- +goose Up
-- Running sums of counted payments (pending, success, refunded, disputed)
-- per scope and UTC day of creation, kept in the payment's transaction, so
-- that the volume limits read at most 31 rows instead of scanning
-- payments. Scopes: 'm:<merchant>:<mode>', 'mp:<merchant>:<mode>:<provider>',
-- 'p:<mode>:<payer phone>'. day: days since 1970-01-01 UTC.
CREATE TABLE volume_counters (
    scope  text NOT NULL,
    day    bigint NOT NULL,
    amount bigint NOT NULL,
    PRIMARY KEY (scope, day)
);

INSERT INTO volume_counters (scope, day, amount)
SELECT scope, day, sum(limit_amount) FROM (
    SELECT 'm:' || merchant_id || ':' || mode AS scope,
           floor(extract(epoch FROM created_at) / 86400)::bigint AS day, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'mp:' || merchant_id || ':' || mode || ':' || provider,
           floor(extract(epoch FROM created_at) / 86400)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
    UNION ALL
    SELECT 'p:' || mode || ':' || payer_phone,
           floor(extract(epoch FROM created_at) / 86400)::bigint, limit_amount
      FROM transactions WHERE type = 'payment' AND status IN ('pending', 'success', 'refunded', 'disputed')
       AND payer_phone <> ''
) AS counted GROUP BY scope, day;

-- +goose Down
DROP TABLE volume_counters;
