-- +goose Up
-- The event stream (GET /v1/events/stream) reads events in the order they
-- committed. SQLite has one writer at a time, so a number taken inside the
-- inserting transaction is that order: stream_pos, which the insert of an
-- event takes as the last one plus one. Existing events keep their
-- insertion order.
ALTER TABLE events ADD COLUMN stream_pos INTEGER;
UPDATE events SET stream_pos = rowid;
CREATE UNIQUE INDEX events_stream_pos ON events (stream_pos);
CREATE INDEX events_stream ON events (merchant_id, mode, stream_pos);


-- The secret `xaalis listen` signs forwarded events with, one per merchant
-- and mode, made on first use and never changed.
CREATE TABLE webhook_listen_secrets (
    merchant_id TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, mode)
) STRICT;

-- +goose Down
DROP TABLE webhook_listen_secrets;
DROP INDEX events_stream;
DROP INDEX events_stream_pos;
ALTER TABLE events DROP COLUMN stream_pos;
