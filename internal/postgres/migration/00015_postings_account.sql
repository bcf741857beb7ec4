-- +goose Up
-- ledger_postings_account served no query: balances are cached in
-- ledger_balances and the ledger check reads every posting anyway. Each
-- payment's three postings still paid for it: on SQLite about one page of
-- the WAL a payment (a tenth of its frames), on PostgreSQL three index
-- insertions into the same hot leaf pages (the platform's and the
-- provider's accounts take a posting from every payment).
DROP INDEX ledger_postings_account;

-- +goose Down
CREATE INDEX ledger_postings_account ON ledger_postings (account, currency);
