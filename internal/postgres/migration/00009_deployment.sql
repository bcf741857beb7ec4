-- +goose Up
-- The client address of an operator action: behind a trusted proxy, the
-- address the proxy forwarded, not the proxy's; '' for the command line.
ALTER TABLE audit_log ADD COLUMN client_ip text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN client_ip;
