package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// seedChunk is how many payments one transaction of SeedPayments writes:
// other writes wait for the writer at most one chunk.
const seedChunk = 50_000

// SQL expressions of the seeded rows' columns. ms is created_at in
// milliseconds. A UUID v7 keeps its time in its first 48 bits; random()
// & mask takes random bits without abs()'s overflow.
const (
	seedUUID = `printf('%08x-%04x-7%03x-%04x-%012x', ms >> 16, ms & 65535, random() & 4095,
		32768 | (random() & 16383), random() & 281474976710655)`
)

// seedTime is the SQL of a time in milliseconds as xaalis.Timestamp writes it.
func seedTime(ms string) string {
	return `strftime('%Y-%m-%dT%H:%M:%fZ', (` + ms + `) / 1000.0, 'unixepoch')`
}

// seedHole is the SQL of each placeholder of the event's data.
var seedHole = map[string]string{xaalis.SeedID: "id", xaalis.SeedRef: "ref", xaalis.SeedPhone: "phone",
	xaalis.SeedCustomer: "coalesce(customer, '')", xaalis.SeedCreated: seedTime("ms"), xaalis.SeedExpires: seedTime("ms + ?")}

// seedReference is the SQL of a TXN- reference: 16 characters drawn from
// the reference alphabet, as xaalis.NewReference makes them.
func seedReference() string {
	ch := fmt.Sprintf("substr('%s', 1 + (random() & 2147483647) %% %d, 1)", xaalis.ReferenceAlphabet, len(xaalis.ReferenceAlphabet))
	return "'TXN-' || " + strings.TrimSuffix(strings.Repeat(ch+" || ", 16), " || ")
}

// seedPhone is the SQL of seeded payment i's payer (xaalis.SeedPayerPhone).
var seedPhone = fmt.Sprintf(`printf('+22177%%07d', 1000000 + (i / %d) %% %d)`, xaalis.SeedPayersEvery, xaalis.SeedPayers)

// SeedPayments writes s.N successful payments of one merchant, with what
// each leaves through the API: the transaction, its payer's customer,
// its ledger entry and postings, its payment.success event, and the
// balances, volume counters and stat counters added to by the sums. It
// writes seedChunk payments a transaction, each while the writer waits
// between batches, on a connection of its own (seedConn).
func (s *Store) SeedPayments(ctx context.Context, spec xaalis.SeedSpec) ([]xaalis.SeededPayment, error) {
	p, err := spec.Plan()
	if err != nil {
		return nil, err
	}
	if _, err := s.Merchant(ctx, p.MerchantID); err != nil {
		return nil, fmt.Errorf("seed: merchant %s: %w", p.MerchantID, err)
	}
	q, done, err := s.seedConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	defer done()
	// on runs fn on the seed's connection while the writer waits: no
	// batch commits meanwhile, and the writer's syncer fdatasyncs the WAL
	// before the next answer, as after any job of the writer.
	on := func(fn func() error) error {
		return s.w.direct(ctx, func(querier) error { return fn() })
	}
	err = on(func() error {
		_, err := q.ExecContext(ctx, `CREATE TEMP TABLE seed_rows (i INTEGER PRIMARY KEY, ms INTEGER NOT NULL,
			id TEXT NOT NULL, ref TEXT NOT NULL, phone TEXT NOT NULL, customer TEXT, entry TEXT NOT NULL,
			event TEXT NOT NULL, pref TEXT NOT NULL)`)
		if err != nil {
			return err
		}
		return seedTx(ctx, q, func() error { return seedCustomers(ctx, q, p) })
	})
	if err != nil {
		return nil, fmt.Errorf("seed: customers: %w", err)
	}
	var sample []xaalis.SeededPayment
	for a := 0; a < p.N; a += seedChunk {
		b := min(a+seedChunk, p.N)
		// This chunk's share of the sample.
		k := p.Sample*b/p.N - p.Sample*a/p.N
		err := on(func() error {
			return seedTx(ctx, q, func() error {
				got, err := seedChunkRows(ctx, q, p, a, b, k)
				sample = append(sample, got...)
				return err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("seed: payments %d to %d: %w", a, b, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := on(func() error {
		_, err := q.ExecContext(ctx, `PRAGMA optimize`)
		return err
	}); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	rand.Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
	return sample, nil
}

// seedConn opens the connection the seed writes through, with a page
// cache of 256 MiB (the indexes of a big table), and returns with it the
// function that closes it. Not the writer's: a connection keeps what the
// seed leaves in it, and SQLite's page cache never shrinks the hash table
// it grew. The writer's COMMIT walks that whole table on a database under
// 1 GiB (docs/write-path.md, item 11): after a seed of 300,000 payments
// (838 MB) through the writer's connection, the walk took 7 % of the CPU
// and the writer 501 µs a payment in create-payment's first 10 s, against
// 421 µs once the database passed 1 GiB.
func (s *Store) seedConn(ctx context.Context) (querier, func(), error) {
	db, err := openWriter(s.path)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	done := func() {
		c.Close()
		db.Close()
	}
	if _, err := c.ExecContext(ctx, `PRAGMA cache_size = -262144`); err != nil {
		done()
		return nil, nil, err
	}
	return c, done, nil
}

// seedTx runs fn in one write transaction of the seed's connection. The
// seed's rows refer to the merchant, checked first, to the customers it
// makes itself and to the entries it inserts before their postings: the
// transaction skips the foreign key checks, on the seed's connection only
// (the writer's keeps them), and turns them back on after.
func seedTx(ctx context.Context, q querier, fn func() error) (err error) {
	if _, err := q.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	defer func() {
		if _, ferr := q.ExecContext(ctx, `PRAGMA foreign_keys = ON`); ferr != nil && err == nil {
			err = ferr
		}
	}()
	if _, err := q.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, _ = q.ExecContext(ctx, `ROLLBACK`)
		return err
	}
	_, err = q.ExecContext(ctx, `COMMIT`)
	if err != nil {
		_, _ = q.ExecContext(ctx, `ROLLBACK`)
	}
	return err
}

// seedCustomers makes the customers of the seeded payers the merchant does
// not know yet, each created with its first payment.
func seedCustomers(ctx context.Context, q querier, p *xaalis.SeedPlan) error {
	n := min(xaalis.SeedPayers, (p.N+xaalis.SeedPayersEvery-1)/xaalis.SeedPayersEvery)
	_, err := q.ExecContext(ctx, `WITH RECURSIVE k(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM k WHERE k + 1 < ?),
		c(k, ms) AS (SELECT k, ? + k * ? * ? / ? FROM k)
		INSERT INTO customers (id, merchant_id, mode, phone, name, created_at, updated_at)
		SELECT `+seedUUID+`, ?, ?, printf('+22177%07d', 1000000 + k), '', ms * 1000, ms * 1000 FROM c WHERE true
		ON CONFLICT (merchant_id, mode, phone) DO NOTHING`,
		n, p.FromMS, xaalis.SeedPayersEvery, p.SpanMS, p.N, p.MerchantID, p.Mode)
	return err
}

// seedChunkRows writes payments [a, b) and returns k of them at random.
func seedChunkRows(ctx context.Context, q querier, p *xaalis.SeedPlan, a, b, k int) ([]xaalis.SeededPayment, error) {
	exec := func(query string, args ...any) error {
		_, err := q.ExecContext(ctx, query, args...)
		return err
	}
	if err := exec(`DELETE FROM temp.seed_rows`); err != nil {
		return nil, err
	}
	// The rows' generated columns, once: ids, reference, payer.
	if err := exec(`INSERT INTO temp.seed_rows (i, ms, id, ref, phone, customer, entry, event, pref)
		WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?),
		t(i, ms, phone) AS (SELECT i, ? + i * ? / ?, `+seedPhone+` FROM s)
		SELECT i, ms, `+seedUUID+`, `+seedReference()+`, phone,
			(SELECT id FROM customers WHERE merchant_id = ? AND mode = ? AND phone = t.phone),
			`+seedUUID+`, `+seedUUID+`, ? || printf('%012x%012x', random() & 281474976710655, random() & 281474976710655)
		FROM t`, a, b, p.FromMS, p.SpanMS, p.N, p.MerchantID, p.Mode, p.ProviderRefPre); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if err := exec(`INSERT INTO transactions (id, merchant_id, mode, type, reference, status, amount, currency,
			limit_amount, country, provider, route, route_reason, provider_ref, payer_phone, customer_id, metadata,
			expires_at, created_at, updated_at, fee, fee_currency, key_type)
		SELECT id, ?, ?, 'payment', ref, 'success', ?, ?, ?, ?, ?, ?, ?, pref, phone, customer, '{}',
			(ms + ?) * 1000, ms * 1000, ms * 1000, ?, ?, 'secret' FROM temp.seed_rows ORDER BY i`,
		p.MerchantID, p.Mode, p.Amount.Minor, p.Amount.Currency, p.LimitAmount, p.Country, p.Provider, p.Route,
		p.RouteReason, p.ExpiryMS, p.Fee.Minor, p.Fee.Currency); err != nil {
		return nil, fmt.Errorf("transactions: %w", err)
	}
	var pos int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(stream_pos), 0) FROM events`).Scan(&pos); err != nil {
		return nil, err
	}
	// The event's data: the record's template with this row's values.
	parts, holes := p.EventParts()
	data, args := "?", []any{p.MerchantID, p.Mode, xaalis.EventPaymentSuccess, parts[0]}
	for i, h := range holes {
		data += " || " + seedHole[h] + " || ?"
		if h == xaalis.SeedExpires {
			args = append(args, p.ExpiryMS)
		}
		args = append(args, parts[i+1])
	}
	if err := exec(`INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data, created_at, stream_pos)
		SELECT event, ?, ?, ?, 'transaction', id, 1, `+data+`, ms * 1000, ? + i - ? + 1 FROM temp.seed_rows ORDER BY i`,
		append(args, pos, a)...); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if err := exec(`INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
		SELECT entry, ?, ?, 'payment.success', 'transaction', id, ms * 1000 FROM temp.seed_rows ORDER BY i`,
		p.Mode, p.MerchantID); err != nil {
		return nil, fmt.Errorf("ledger entries: %w", err)
	}
	n := int64(b - a)
	last := p.CreatedMS(int64(b-1)) * 1000
	for line, ps := range p.Postings {
		if err := exec(`INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
			SELECT entry, ?, ?, ?, ? FROM temp.seed_rows ORDER BY i`, line+1, ps.Account, p.Amount.Currency, ps.Amount); err != nil {
			return nil, fmt.Errorf("ledger postings: %w", err)
		}
		if err := exec(`INSERT INTO ledger_balances (account, currency, balance, non_negative, updated_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (account, currency) DO UPDATE
			SET balance = balance + excluded.balance, updated_at = max(coalesce(updated_at, 0), excluded.updated_at)`,
			ps.Account, p.Amount.Currency, ps.Amount*n, boolInt(ps.NonNegative), last); err != nil {
			return nil, fmt.Errorf("ledger balances: %w", err)
		}
	}
	for _, scope := range p.Scopes {
		if err := exec(`INSERT INTO volume_counters (scope, day, amount)
			SELECT ?, ms / 86400000, count(*) * ? FROM temp.seed_rows WHERE true GROUP BY ms / 86400000
			ON CONFLICT (scope, day) DO UPDATE SET amount = amount + excluded.amount`, scope, p.LimitAmount); err != nil {
			return nil, fmt.Errorf("volume counters: %w", err)
		}
	}
	if err := exec(`INSERT INTO volume_counters (scope, day, amount)
		SELECT ? || phone, ms / 86400000, count(*) * ? FROM temp.seed_rows WHERE true GROUP BY phone, ms / 86400000
		ON CONFLICT (scope, day) DO UPDATE SET amount = amount + excluded.amount`, p.PayerScopePrefix, p.LimitAmount); err != nil {
		return nil, fmt.Errorf("payer volume counters: %w", err)
	}
	if err := exec(`INSERT INTO stat_counters (day, metric, key, shard, count, amount)
		SELECT ms / 86400000, ?, ?, 0, count(*), count(*) * ? FROM temp.seed_rows WHERE true GROUP BY ms / 86400000
		ON CONFLICT (day, metric, key, shard) DO UPDATE SET count = count + excluded.count, amount = amount + excluded.amount`,
		xaalis.StatPayments, p.StatKey, p.LimitAmount); err != nil {
		return nil, fmt.Errorf("stat counters: %w", err)
	}
	var out []xaalis.SeededPayment
	if k > 0 {
		rows, err := q.QueryContext(ctx, `SELECT id, ref FROM temp.seed_rows ORDER BY random() LIMIT +?`, k)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var sp xaalis.SeededPayment
			if err := rows.Scan(&sp.ID, &sp.Reference); err != nil {
				return nil, err
			}
			out = append(out, sp)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
