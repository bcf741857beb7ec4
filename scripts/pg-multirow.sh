#!/usr/bin/env bash
# What PostgreSQL's bare writes of a payment can reach, one payment a
# transaction against several payments' rows in multi-row statements
# (BENCHMARKS.md, the day's sixth session, next step 3).
#
# Each payment writes the rows the Store writes for a test-mode payment:
# the customer, the transaction, the event, the ledger entry and its three
# postings, and the Idempotency-Key with its stored answer, pipelined in one
# transaction. The hot rows (balances, counters), the reads before the
# transaction and the server are left out, on both sides. A batch of N
# writes N payments' rows with one INSERT ... SELECT a table. Each
# configuration keeps 16 payments in flight: 16 connections of single
# payments, 8 of batches of 2, 4 of 4, 2 of 8.
#
#   bash scripts/pg-multirow.sh            # 6 s a configuration, twice
#   DURATION=10 ROUNDS=3 bash scripts/pg-multirow.sh
#
# XAALIS_BENCH_POSTGRES_URL picks the database (default: the local test
# database). The script makes the schema exp_multirow there (migrations and
# a merchant by the xaalis command, XAALIS_BIN or `go run ./cmd/xaalis`), and
# drops it at the end. It needs pgbench.
set -euo pipefail

URL="${XAALIS_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
DURATION="${DURATION:-6}"
ROUNDS="${ROUNDS:-2}"
schema=exp_multirow
cd "$(dirname "$0")/.."
if [ -n "${XAALIS_BIN:-}" ]; then xaalis=("$XAALIS_BIN"); else xaalis=(go run ./cmd/xaalis); fi
case "$URL" in *\?*) surl="$URL&search_path=$schema" ;; *) surl="$URL?search_path=$schema" ;; esac

work="$(mktemp -d)"
trap 'psql "$URL" -qc "DROP SCHEMA IF EXISTS '"$schema"' CASCADE" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql "$URL" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" -c "CREATE SCHEMA $schema" >/dev/null 2>&1
# The merchant's keys are sealed under a key file of the run's own.
export XAALIS_SECRET_KEY_FILE="$work/secret.key"
"${xaalis[@]}" migrate --database-url "$surl" >/dev/null
merchant="$("${xaalis[@]}" merchant create --json --name "Multi-row bench" --database-url "$surl" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["merchant_id"])')"

# script N writes N payments a transaction. pgbench passes :r and :m as
# parameters (casts give their types); a literal must hold no colon.
script() {
	local n=$1 id
	id="(:r::bigint * 10 + g)::text"
	cat <<EOF
\set r random(1, 90000000000000)
\startpipeline
BEGIN;
INSERT INTO customers (id, merchant_id, mode, phone, name, created_at, updated_at)
  SELECT 'c' || $id, :m::text, 'test', '+22177' || $id, 'Awa Diop', now(), now() FROM generate_series(1, $n) g;
INSERT INTO transactions (id, merchant_id, mode, type, reference, merchant_ref, status, amount, currency,
    limit_amount, country, provider, route, route_reason, provider_ref, payer_phone, payer_name, customer_id,
    success_url, failed_url, metadata, expires_at, created_at, updated_at)
  SELECT 't' || $id, :m::text, 'test', 'payment', 'TXN-' || $id, 'ref-' || $id, 'success', 1000, 'XOF',
    1000, 'SN', 'channel_a', 'sim', 'test mode', 'SIM-' || $id, '+22177' || $id, 'Awa Diop', 'c' || $id,
    'https://example.com/ok', 'https://example.com/ko', '{}', now() + interval '1 day', now(), now()
  FROM generate_series(1, $n) g;
INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data, created_at)
  SELECT 'e' || $id, :m::text, 'test', 'payment.succeeded', 'transaction', 't' || $id, 1, repeat('x', 900), now()
  FROM generate_series(1, $n) g;
INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
  SELECT 'l' || $id, 'test', :m::text, 'payment', 'transaction', 't' || $id, now() FROM generate_series(1, $n) g;
INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
  SELECT 'l' || $id, p.line, p.account, 'XOF', p.amount FROM generate_series(1, $n) g,
    (VALUES (1, 'provider/channel_a', 1000), (2, 'merchant/' || :m::text, -990), (3, 'platform/fees', -10)) p (line, account, amount);
INSERT INTO idempotency_keys (merchant_id, mode, key, fingerprint, token, state, locked_until, response_status,
    response_content_type, response_body, created_at, expires_at, key_type)
  SELECT :m::text, 'test', 'k' || $id, '\x00', 'token', 'done', now(), 201, 'application/json',
    convert_to(repeat('y', 1200), 'UTF8'), now(), now() + interval '1 day', 'secret' FROM generate_series(1, $n) g;
COMMIT;
\endpipeline
EOF
}

for n in 1 2 4 8; do script "$n" >"$work/b$n.sql"; done

echo "| round | payments a transaction | connections | transactions/s | payments/s |"
echo "|---:|---:|---:|---:|---:|"
for round in $(seq 1 "$ROUNDS"); do
	for cfg in "1 16" "2 8" "4 4" "8 2"; do
		set -- $cfg
		if ! PGOPTIONS="-c search_path=$schema" pgbench "$URL" -n -c "$2" -j 2 -T "$DURATION" -M prepared \
			-D m="$merchant" -f "$work/b$1.sql" >"$work/out" 2>&1; then
			echo "pgbench failed for batches of $1:" >&2
			tail -5 "$work/out" >&2
			exit 1
		fi
		tps="$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/out")"
		awk -v r="$round" -v n="$1" -v c="$2" -v t="$tps" 'BEGIN { printf "| %d | %d | %d | %.0f | %.0f |\n", r, n, c, t, t * n }'
	done
done
