-- +goose Up
-- The event stream (GET /v1/events/stream) reads events in an order in
-- which no event can appear behind one already read: by the id of the
-- inserting transaction (stream_xid), then insertion (stream_pos), and
-- only events of transactions older than every transaction still running
-- (the snapshot's xmin). A transaction that began earlier but commits
-- later holds the stream back until it ends instead of being skipped.
-- Both columns are set by their defaults, whoever inserts the event.
ALTER TABLE events ADD COLUMN stream_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE events ADD COLUMN stream_pos bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX events_stream ON events (merchant_id, mode, stream_xid, stream_pos);

-- The secret `xaalis listen` signs forwarded events with, one per merchant
-- and mode, made on first use and never changed.
CREATE TABLE webhook_listen_secrets (
    merchant_id text NOT NULL,
    mode        text NOT NULL CHECK (mode IN ('test', 'live')),
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (merchant_id, mode)
);

-- +goose Down
DROP TABLE webhook_listen_secrets;
DROP INDEX events_stream;
ALTER TABLE events DROP COLUMN stream_pos;
ALTER TABLE events DROP COLUMN stream_xid;
