-- +goose Up
-- Counts of a merchant's transactions by mode, type and status: a list's
-- total_count then reads a few rows instead of counting every row of the
-- merchant (a million payments took 140 ms a page). The store adds to
-- them where it inserts a transaction or changes its status, at COMMIT
-- with the other hot rows (pipeline.go), and they are split in shards as
-- those of 00013 are: the count is the sum of the shards. A status change
-- may take from one shard and add to another: a shard may be negative,
-- never the sum.
CREATE TABLE transaction_counts (
    merchant_id text NOT NULL,
    mode        text NOT NULL,
    type        text NOT NULL,
    status      text NOT NULL,
    shard       smallint NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (merchant_id, mode, type, status, shard)
);

INSERT INTO transaction_counts (merchant_id, mode, type, status, shard, n)
SELECT merchant_id, mode, type, status, 0, count(*) FROM transactions GROUP BY merchant_id, mode, type, status;

-- +goose Down
DROP TABLE transaction_counts;
