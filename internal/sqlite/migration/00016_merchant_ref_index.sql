-- +goose Up
-- One index on merchant_ref instead of two. transactions_merchant_ref kept
-- a merchant's references unique, led by the merchant; the console's
-- search across merchants needed a second index led by the reference
-- (00010's transactions_merchant_ref_any). Led by the reference, the
-- unique index serves both: uniqueness is the same set of columns in any
-- order, and a merchant's lookup gives every column of it. A payment's
-- merchant_ref lands at a random place of each index, so each cost a
-- leaf page written per payment.
DROP INDEX transactions_merchant_ref_any;
DROP INDEX transactions_merchant_ref;
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_ref, merchant_id, mode, key_type)
    WHERE merchant_ref IS NOT NULL;

-- +goose Down
DROP INDEX transactions_merchant_ref;
CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, key_type, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
CREATE INDEX transactions_merchant_ref_any ON transactions (merchant_ref) WHERE merchant_ref IS NOT NULL;
