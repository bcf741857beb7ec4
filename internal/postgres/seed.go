package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// seedChunk is how many payments one transaction of SeedPayments writes.
const seedChunk = 100_000

// SQL expressions of the seeded rows' columns; ms is created_at in
// milliseconds.
const (
	// seedUUID is a UUID v7 of time ms: a random UUID (v4) whose first
	// 48 bits are the time and whose version digit is 7.
	seedUUID = `overlay(overlay(gen_random_uuid()::text PLACING lpad(to_hex(ms >> 16), 8, '0') || '-' ||
		lpad(to_hex(ms & 65535), 4, '0') FROM 1 FOR 13) PLACING '7' FROM 15 FOR 1)`
	// seedTS is the timestamptz of ms.
	seedTS = `(timestamptz '1970-01-01 00:00:00+00' + (%s) * interval '1 millisecond')`
)

// seedTimestamp is the SQL of a time in milliseconds as xaalis.Timestamp
// writes it.
func seedTimestamp(ms string) string {
	return `to_char(` + fmt.Sprintf(seedTS, ms) + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

// seedHole is the SQL of each placeholder of the event's data ($4: the
// expiry in milliseconds).
var seedHole = map[string]string{xaalis.SeedID: "id", xaalis.SeedRef: "ref", xaalis.SeedPhone: "phone",
	xaalis.SeedCustomer: "coalesce(customer, '')", xaalis.SeedCreated: seedTimestamp("ms"),
	xaalis.SeedExpires: seedTimestamp("ms + $4::bigint")}

// seedReference is the SQL of a TXN- reference: 16 characters drawn from
// the reference alphabet, as xaalis.NewReference makes them.
func seedReference() string {
	ch := fmt.Sprintf("substr('%s', 1 + floor(random() * %d)::int, 1)", xaalis.ReferenceAlphabet, len(xaalis.ReferenceAlphabet))
	return "'TXN-' || " + strings.TrimSuffix(strings.Repeat(ch+" || ", 16), " || ")
}

// SeedPayments writes s.N successful payments of one merchant, with what
// each leaves through the API: the transaction, its payer's customer,
// its ledger entry and postings, its payment.success event, and the
// balances, volume counters and stat counters (shard 0) added to by the
// sums. It writes seedChunk payments a transaction, then analyzes the
// tables.
func (s *Store) SeedPayments(ctx context.Context, spec xaalis.SeedSpec) ([]xaalis.SeededPayment, error) {
	p, err := spec.Plan()
	if err != nil {
		return nil, err
	}
	if _, err := s.Merchant(ctx, p.MerchantID); err != nil {
		return nil, fmt.Errorf("seed: merchant %s: %w", p.MerchantID, err)
	}
	n := min(xaalis.SeedPayers, (p.N+xaalis.SeedPayersEvery-1)/xaalis.SeedPayersEvery)
	if _, err := s.pool.Exec(ctx, `INSERT INTO customers (id, merchant_id, mode, phone, name, created_at, updated_at)
		SELECT `+seedUUID+`, $5, $6, '+22177' || (1000000 + k)::text, '', `+fmt.Sprintf(seedTS, "ms")+`, `+fmt.Sprintf(seedTS, "ms")+`
		FROM (SELECT k, $2::bigint + k * $3::bigint / $4::bigint AS ms FROM generate_series(0, $1::bigint - 1) AS k) AS c
		ON CONFLICT (merchant_id, mode, phone) DO NOTHING`,
		n, p.FromMS, int64(xaalis.SeedPayersEvery)*p.SpanMS, p.N, p.MerchantID, p.Mode); err != nil {
		return nil, fmt.Errorf("seed: customers: %w", err)
	}
	// The seeded rows refer to the merchant, checked above, the customers
	// made above and the entries they insert first: a superuser (the
	// bench's usual database) skips the foreign key triggers, row by row
	// half the seed's time, by the replica replication role of each
	// chunk's transaction. The tables have no other trigger.
	var skipFK bool
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('is_superuser') = 'on'`).Scan(&skipFK); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	var sample []xaalis.SeededPayment
	for a := 0; a < p.N; a += seedChunk {
		b := min(a+seedChunk, p.N)
		k := p.Sample*b/p.N - p.Sample*a/p.N
		got, err := s.seedChunk(ctx, p, a, b, k, skipFK)
		if err != nil {
			return nil, fmt.Errorf("seed: payments %d to %d: %w", a, b, err)
		}
		sample = append(sample, got...)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE customers, transactions, events, ledger_entries, ledger_postings,
		ledger_balances, volume_counters, stat_counters, transaction_counts`); err != nil {
		return nil, fmt.Errorf("seed: analyze: %w", err)
	}
	rand.Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
	return sample, nil
}

// seedChunk writes payments [a, b) in one transaction and returns k of
// them at random.
func (s *Store) seedChunk(ctx context.Context, p *xaalis.SeedPlan, a, b, k int, skipFK bool) (out []xaalis.SeededPayment, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	exec := func(what, query string, args ...any) error {
		if _, err := tx.Exec(ctx, query, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if skipFK {
		if err := exec("replication role", `SET LOCAL session_replication_role = replica`); err != nil {
			return nil, err
		}
	}
	if err := exec("temporary table", `CREATE TEMPORARY TABLE seed_rows (i bigint NOT NULL, ms bigint NOT NULL, id text NOT NULL,
		ref text NOT NULL, phone text NOT NULL, customer text, entry text NOT NULL, event text NOT NULL, pref text NOT NULL)
		ON COMMIT DROP`); err != nil {
		return nil, err
	}
	if err := exec("generate", `INSERT INTO seed_rows (i, ms, id, ref, phone, customer, entry, event, pref)
		SELECT i, ms, `+seedUUID+`, `+seedReference()+`, t.phone, c.id, `+seedUUID+`, `+seedUUID+`,
			$8 || substr(md5(random()::text), 1, 24)
		FROM (SELECT i, $3::bigint + i * $4::bigint / $5::bigint AS ms,
				'+22177' || (1000000 + (i / $9::bigint) % $10::bigint)::text AS phone
			FROM generate_series($1::bigint, $2::bigint - 1) AS i) AS t
		LEFT JOIN customers AS c ON c.merchant_id = $6 AND c.mode = $7 AND c.phone = t.phone`,
		a, b, p.FromMS, p.SpanMS, p.N, p.MerchantID, p.Mode, p.ProviderRefPre, xaalis.SeedPayersEvery, xaalis.SeedPayers); err != nil {
		return nil, err
	}
	ts := func(ms string) string { return fmt.Sprintf(seedTS, ms) }
	if err := exec("transactions", `INSERT INTO transactions (id, merchant_id, mode, type, reference, status, amount, currency,
			limit_amount, country, provider, route, route_reason, provider_ref, payer_phone, customer_id, metadata,
			expires_at, created_at, updated_at, fee, fee_currency, key_type)
		SELECT id, $1, $2, 'payment', ref, 'success', $3, $4, $5, $6, $7, $8, $9, pref, phone, customer, '{}',
			`+ts("ms + $10::bigint")+`, `+ts("ms")+`, `+ts("ms")+`, $11, $12, 'secret' FROM seed_rows ORDER BY i`,
		p.MerchantID, p.Mode, p.Amount.Minor, p.Amount.Currency, p.LimitAmount, p.Country, p.Provider, p.Route,
		p.RouteReason, p.ExpiryMS, p.Fee.Minor, p.Fee.Currency); err != nil {
		return nil, err
	}
	// The event's data: the record's template with this row's values.
	parts, holes := p.EventParts()
	args := []any{p.MerchantID, p.Mode, xaalis.EventPaymentSuccess, p.ExpiryMS, parts[0]}
	data := "$5::text"
	for i, h := range holes {
		args = append(args, parts[i+1])
		data += " || " + seedHole[h] + fmt.Sprintf(" || $%d::text", len(args))
	}
	if err := exec("events", `INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data, created_at)
		SELECT event, $1, $2, $3, 'transaction', id, 1, `+data+`, `+ts("ms")+` FROM seed_rows ORDER BY i`, args...); err != nil {
		return nil, err
	}
	if err := exec("ledger entries", `INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
		SELECT entry, $1, $2, 'payment.success', 'transaction', id, `+ts("ms")+` FROM seed_rows ORDER BY i`,
		p.Mode, p.MerchantID); err != nil {
		return nil, err
	}
	n := int64(b - a)
	last := p.CreatedMS(int64(b - 1))
	for line, ps := range p.Postings {
		if err := exec("ledger postings", `INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
			SELECT entry, $1, $2, $3, $4 FROM seed_rows ORDER BY i`, line+1, ps.Account, p.Amount.Currency, ps.Amount); err != nil {
			return nil, err
		}
		if err := exec("ledger balances", `INSERT INTO ledger_balances (account, currency, shard, balance, non_negative, updated_at)
			VALUES ($1, $2, 0, $3, $4, `+ts("$5::bigint")+`) ON CONFLICT (account, currency, shard) DO UPDATE
			SET balance = ledger_balances.balance + excluded.balance,
				updated_at = greatest(ledger_balances.updated_at, excluded.updated_at)`,
			ps.Account, p.Amount.Currency, ps.Amount*n, ps.NonNegative, last); err != nil {
			return nil, err
		}
	}
	for _, scope := range p.Scopes {
		if err := exec("volume counters", `INSERT INTO volume_counters (scope, day, shard, amount)
			SELECT $1, ms / 86400000, 0, count(*) * $2::bigint FROM seed_rows GROUP BY ms / 86400000
			ON CONFLICT (scope, day, shard) DO UPDATE SET amount = volume_counters.amount + excluded.amount`,
			scope, p.LimitAmount); err != nil {
			return nil, err
		}
	}
	if err := exec("payer volume counters", `INSERT INTO volume_counters (scope, day, shard, amount)
		SELECT $1 || phone, ms / 86400000, 0, count(*) * $2::bigint FROM seed_rows GROUP BY phone, ms / 86400000
		ON CONFLICT (scope, day, shard) DO UPDATE SET amount = volume_counters.amount + excluded.amount`,
		p.PayerScopePrefix, p.LimitAmount); err != nil {
		return nil, err
	}
	if err := exec("transaction counts", `INSERT INTO transaction_counts (merchant_id, mode, type, status, shard, n)
		VALUES ($1, $2, 'payment', 'success', 0, $3)
		ON CONFLICT (merchant_id, mode, type, status, shard) DO UPDATE SET n = transaction_counts.n + excluded.n`,
		p.MerchantID, p.Mode, int64(b-a)); err != nil {
		return nil, err
	}
	if err := exec("stat counters", `INSERT INTO stat_counters (day, metric, key, shard, count, amount)
		SELECT ms / 86400000, $1, $2, 0, count(*), count(*) * $3::bigint FROM seed_rows GROUP BY ms / 86400000
		ON CONFLICT (day, metric, key, shard) DO UPDATE
		SET count = stat_counters.count + excluded.count, amount = stat_counters.amount + excluded.amount`,
		xaalis.StatPayments, p.StatKey, p.LimitAmount); err != nil {
		return nil, err
	}
	if k > 0 {
		rows, err := tx.Query(ctx, `SELECT id, ref FROM seed_rows ORDER BY random() LIMIT $1`, k)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var sp xaalis.SeededPayment
			if err := rows.Scan(&sp.ID, &sp.Reference); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, sp)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return out, nil
}
