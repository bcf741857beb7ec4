package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// AddStats adds deltas to the stat counters of a day and shard. The
// deltas of a writer batch's commands that commit are written together,
// once, before its COMMIT.
func (t *Tx) AddStats(ctx context.Context, day int64, shard int, deltas ...xaalis.StatDelta) error {
	for _, d := range deltas {
		t.stats.add(day, shard, d)
	}
	return nil
}

func writeStats(ctx context.Context, q querier, day int64, shard int, deltas ...xaalis.StatDelta) error {
	for _, d := range deltas {
		if _, err := q.ExecContext(ctx, `INSERT INTO stat_counters (day, metric, key, shard, count, amount)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day, metric, key, shard)
			DO UPDATE SET count = count + excluded.count, amount = amount + excluded.amount`,
			day, d.Metric, d.Key, shard, d.Count, d.Amount); err != nil {
			return fmt.Errorf("add stats: %w", err)
		}
	}
	return nil
}

// statKey is one stat counter row.
type statKey struct {
	day         int64
	shard       int
	metric, key string
}

// statBatch sums the counter deltas of commands.
type statBatch map[statKey]xaalis.StatDelta

func (b statBatch) add(day int64, shard int, d xaalis.StatDelta) {
	k := statKey{day: day, shard: shard, metric: d.Metric, key: d.Key}
	sum := b[k]
	sum.Metric, sum.Key = d.Metric, d.Key
	sum.Count += d.Count
	sum.Amount += d.Amount
	b[k] = sum
}

// merge adds o's deltas to b.
func (b statBatch) merge(o statBatch) {
	for k, d := range o {
		b.add(k.day, k.shard, d)
	}
}

// write writes b's deltas, one row each, and empties b.
func (b statBatch) write(ctx context.Context, q querier) error {
	for k, d := range b {
		if err := writeStats(ctx, q, k.day, k.shard, d); err != nil {
			return err
		}
		delete(b, k)
	}
	return nil
}

// StatTotals sums the counters of the days from fromDay on.
func (s *Store) StatTotals(ctx context.Context, fromDay int64) ([]xaalis.StatTotal, error) {
	return queryAll(ctx, s.read, "stat totals", func(sc func(...any) error) (xaalis.StatTotal, error) {
		var t xaalis.StatTotal
		return t, sc(&t.Metric, &t.Key, &t.Count, &t.Amount)
	}, `SELECT metric, key, sum(count), sum(amount) FROM stat_counters WHERE day >= ?
		GROUP BY metric, key ORDER BY metric, key`, fromDay)
}

// CompactStats folds the counters of the days before beforeDay into the
// folded day, in one write transaction (SQLite has one writer: no other
// transaction sees the rows half moved).
func (s *Store) CompactStats(ctx context.Context, beforeDay int64) (int64, error) {
	var n int64
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		if _, err := tx.ExecContext(ctx, `INSERT INTO stat_counters (day, metric, key, shard, count, amount)
			SELECT ?, metric, key, shard, sum(count), sum(amount) FROM stat_counters WHERE day > ? AND day < ?
			GROUP BY metric, key, shard
			ON CONFLICT (day, metric, key, shard)
			DO UPDATE SET count = count + excluded.count, amount = amount + excluded.amount`,
			xaalis.StatDayFolded, xaalis.StatDayFolded, beforeDay); err != nil {
			return fmt.Errorf("fold stats: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM stat_counters WHERE day > ? AND day < ?`, xaalis.StatDayFolded, beforeDay)
		if err != nil {
			return fmt.Errorf("delete folded stats: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// WebhookBacklog reads the delivery outbox's backlog.
func (s *Store) WebhookBacklog(ctx context.Context, capAt, limit int) (xaalis.WebhookBacklog, error) {
	var b xaalis.WebhookBacklog
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries
		WHERE status = 'pending' LIMIT +?)`, capAt).Scan(&b.Pending); err != nil {
		return b, fmt.Errorf("count pending deliveries: %w", err)
	}
	b.Saturated = b.Pending >= capAt
	var oldest sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT min(created_at) FROM webhook_deliveries WHERE status = 'pending'`).
		Scan(&oldest); err != nil {
		return b, fmt.Errorf("oldest pending delivery: %w", err)
	}
	if oldest.Valid {
		b.OldestPending = fromMicros(oldest.Int64)
	}
	if limit <= 0 {
		return b, nil
	}
	var err error
	b.Failing, err = queryAll(ctx, s.read, "failing endpoints", func(sc func(...any) error) (xaalis.FailingEndpoint, error) {
		var f xaalis.FailingEndpoint
		var oldest, last int64
		err := sc(&f.MerchantID, &f.Mode, &f.EndpointID, &f.URL, &f.Pending, &oldest, &last)
		f.Oldest, f.LastAttemptAt = fromMicros(oldest), fromMicros(last)
		return f, err
	}, `SELECT merchant_id, mode, coalesce(endpoint_id, ''), url, count(*), min(created_at), max(coalesce(last_attempt_at, 0))
		FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0
		GROUP BY merchant_id, mode, coalesce(endpoint_id, ''), url ORDER BY count(*) DESC, min(created_at) LIMIT +?`, limit)
	return b, err
}

// JobsDue finds the oldest due item of each background job. Each query
// reads the first entry of an index.
func (s *Store) JobsDue(ctx context.Context, q xaalis.JobsDueQuery) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	now := micros(q.Now)
	for _, j := range []struct {
		job    string
		query  string
		arg    int64
		offset time.Duration
	}{
		{xaalis.JobExpire, `SELECT min(expires_at) FROM transactions
			WHERE type = 'payment' AND status IN ('initiated', 'pending') AND expires_at <= ?`, now, 0},
		{xaalis.JobReconcile, `SELECT min(coalesce(reconciled_at, created_at)) FROM transactions
			WHERE type = 'payment' AND status = 'pending' AND provider_ref <> '' AND coalesce(reconciled_at, created_at) < ?`,
			micros(q.ReconcileBefore), q.Now.Sub(q.ReconcileBefore)},
		{xaalis.JobDisputes, `SELECT min(due_by) FROM disputes WHERE status = 'needs_response' AND due_by <= ?`, now, 0},
		{xaalis.JobSubscriptions, `SELECT min(next_action_at) FROM subscriptions WHERE status = 'active' AND next_action_at <= ?`, now, 0},
		{xaalis.JobDispatch, `SELECT min(coalesce(dispatched_at, created_at)) FROM transactions
			WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending') AND coalesce(dispatched_at, created_at) < ?`,
			micros(q.DispatchBefore), q.Now.Sub(q.DispatchBefore)},
		{xaalis.JobWebhooks, `SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?`, now, 0},
	} {
		var v sql.NullInt64
		if err := s.read.QueryRowContext(ctx, j.query, j.arg).Scan(&v); err != nil {
			return nil, fmt.Errorf("jobs due: %s: %w", j.job, err)
		}
		if v.Valid {
			out[j.job] = fromMicros(v.Int64).Add(j.offset)
		} else {
			out[j.job] = time.Time{}
		}
	}
	// The reconcile job asks about closed payments' late polls too.
	var late sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT min(poll_at) FROM late_polls WHERE poll_at <= ?`, now).Scan(&late); err != nil {
		return nil, fmt.Errorf("jobs due: late polls: %w", err)
	}
	if r := out[xaalis.JobReconcile]; late.Valid && (r.IsZero() || fromMicros(late.Int64).Before(r)) {
		out[xaalis.JobReconcile] = fromMicros(late.Int64)
	}
	return out, nil
}

// InsertLedgerCheck records a ledger check.
func (t *Tx) InsertLedgerCheck(ctx context.Context, c *xaalis.LedgerCheckRun) error {
	detail, err := json.Marshal(nonNilStrings(c.Detail))
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO ledger_checks (id, at, duration_ms, problems, detail, actor)
		VALUES (?, ?, ?, ?, ?, ?)`, c.ID, micros(c.At), c.Duration.Milliseconds(), c.Problems, string(detail), c.Actor)
	if err != nil {
		return fmt.Errorf("insert ledger check: %w", err)
	}
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// LastLedgerCheck returns the newest recorded ledger check.
func (s *Store) LastLedgerCheck(ctx context.Context) (*xaalis.LedgerCheckRun, error) {
	var c xaalis.LedgerCheckRun
	var at, ms int64
	var detail string
	err := s.read.QueryRowContext(ctx, `SELECT id, at, duration_ms, problems, detail, actor FROM ledger_checks
		ORDER BY at DESC, id DESC LIMIT 1`).Scan(&c.ID, &at, &ms, &c.Problems, &detail, &c.Actor)
	if err != nil {
		return nil, notFound(err)
	}
	c.At, c.Duration = fromMicros(at), time.Duration(ms)*time.Millisecond
	if err := json.Unmarshal([]byte(detail), &c.Detail); err != nil {
		return nil, fmt.Errorf("ledger check detail: %w", err)
	}
	return &c, nil
}

// RateCount reads a rate counter's window.
func (s *Store) RateCount(ctx context.Context, scope string, window time.Time) (int, error) {
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT count FROM rate_counters WHERE scope = ? AND window_start = ?`,
		scope, micros(window)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// InsertOperatorSession stores a console session.
func (t *Tx) InsertOperatorSession(ctx context.Context, s *xaalis.OperatorSession) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO operator_sessions (id, hash, token_id, created_at, last_seen_at, client_ip)
		VALUES (?, ?, ?, ?, ?, ?)`, s.ID, s.Hash, s.TokenID, micros(s.CreatedAt), micros(s.LastSeenAt), s.ClientIP)
	return err
}

// OperatorSessionByHash finds a session and its token.
func (s *Store) OperatorSessionByHash(ctx context.Context, hash []byte) (*xaalis.OperatorSession, *xaalis.OperatorToken, error) {
	var ses xaalis.OperatorSession
	var created, seen int64
	var tok *xaalis.OperatorToken
	tok, err := scanOperatorToken(func(dst ...any) error {
		return s.read.QueryRowContext(ctx, `SELECT s.id, s.hash, s.token_id, s.created_at, s.last_seen_at, s.client_ip,
			o.id, o.name, o.hash, o.created_at, o.expires_at, o.revoked_at
			FROM operator_sessions s JOIN operator_tokens o ON o.id = s.token_id WHERE s.hash = ?`, hash).
			Scan(append([]any{&ses.ID, &ses.Hash, &ses.TokenID, &created, &seen, &ses.ClientIP}, dst...)...)
	})
	if err != nil {
		return nil, nil, err
	}
	ses.CreatedAt, ses.LastSeenAt = fromMicros(created), fromMicros(seen)
	return &ses, tok, nil
}

// TouchOperatorSession moves a session's last activity.
func (t *Tx) TouchOperatorSession(ctx context.Context, id string, at time.Time) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE operator_sessions SET last_seen_at = ? WHERE id = ?`, micros(at), id)
	return err
}

// DeleteOperatorSession ends a session.
func (t *Tx) DeleteOperatorSession(ctx context.Context, id string) error {
	_, err := t.tx.ExecContext(ctx, `DELETE FROM operator_sessions WHERE id = ?`, id)
	return err
}

// PurgeOperatorSessions deletes idle sessions.
func (t *Tx) PurgeOperatorSessions(ctx context.Context, idle time.Time) (int64, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM operator_sessions WHERE last_seen_at < ?`, micros(idle))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// likePattern makes a LIKE pattern matching s anywhere, with \ escaping.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// Merchants lists merchants for the console.
func (s *Store) Merchants(ctx context.Context, f xaalis.MerchantFilter, page xaalis.PageRequest) ([]*xaalis.Merchant, int, error) {
	where, args := `1 = 1`, []any{}
	if f.Query != "" {
		p := likePattern(strings.ToLower(f.Query))
		// CAST: a bare bound pattern is read by the planner, and the
		// statement prepared again at each new one (TestReadsPrepareOnce).
		where = `(m.id LIKE CAST(? AS TEXT) ESCAPE '\' OR lower(m.name) LIKE CAST(? AS TEXT) ESCAPE '\')`
		args = append(args, p+"%", "%"+p+"%")
	}
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM merchants m WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count merchants: %w", err)
	}
	list, err := queryAll(ctx, s.read, "list merchants", func(sc func(...any) error) (*xaalis.Merchant, error) {
		return scanMerchant(sc)
	}, `SELECT `+merchantColumns+` FROM merchants m WHERE `+where+` ORDER BY m.created_at DESC, m.id DESC LIMIT +? OFFSET ?`,
		append(args, page.PerPage, page.Offset())...)
	return list, total, err
}

// Keys lists a merchant's keys, newest first.
func (s *Store) Keys(ctx context.Context, merchantID string) ([]*xaalis.Key, error) {
	return queryAll(ctx, s.read, "list keys", func(sc func(...any) error) (*xaalis.Key, error) {
		var k xaalis.Key
		var scopes, ips string
		var exp, rev sql.NullInt64
		var created int64
		if err := sc(keyDest(&k, &scopes, &ips, &exp, &rev, &created)...); err != nil {
			return nil, err
		}
		return &k, finishKey(&k, scopes, ips, exp, rev, created)
	}, `SELECT `+keyColumns+` FROM api_keys k WHERE k.merchant_id = ? ORDER BY k.created_at DESC, k.id DESC`, merchantID)
}

// PayoutRequestByID returns a payout request of any merchant.
func (s *Store) PayoutRequestByID(ctx context.Context, id string) (*xaalis.PayoutRequest, error) {
	return scanPR(s.read.QueryRowContext(ctx, `SELECT `+prColumns+` FROM payout_requests WHERE id = ?`, id).Scan)
}

// PayoutRequestQueue lists payout requests in the statuses, oldest first.
func (s *Store) PayoutRequestQueue(ctx context.Context, statuses []xaalis.PayoutRequestStatus, page xaalis.PageRequest) ([]*xaalis.PayoutRequest, int, error) {
	if len(statuses) == 0 {
		return nil, 0, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(statuses)), ", ")
	args := make([]any, len(statuses))
	for i, st := range statuses {
		args[i] = st
	}
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM payout_requests WHERE status IN (`+in+`)`, args...).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count payout requests: %w", err)
	}
	list, err := queryPRs(ctx, s.read, `SELECT `+prColumns+` FROM payout_requests WHERE status IN (`+in+`)
		ORDER BY submitted_at, id LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("payout request queue: %w", err)
	}
	return list, total, nil
}

// DisputeByID returns a dispute of any merchant.
func (s *Store) DisputeByID(ctx context.Context, id string) (*xaalis.Dispute, error) {
	return scanDispute(s.read.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE id = ?`, id).Scan)
}

// OpenDisputes lists the open disputes of any merchant, nearest deadline
// first.
func (s *Store) OpenDisputes(ctx context.Context, page xaalis.PageRequest) ([]*xaalis.Dispute, int, error) {
	const where = `status IN ('needs_response', 'under_review')`
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM disputes WHERE `+where).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count open disputes: %w", err)
	}
	list, err := queryDisputes(ctx, s.read, `SELECT `+disputeColumns+` FROM disputes WHERE `+where+`
		ORDER BY due_by, id LIMIT +? OFFSET ?`, page.PerPage, page.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("open disputes: %w", err)
	}
	return list, total, nil
}

// DisputesOf lists a payment's disputes, oldest first.
func (s *Store) DisputesOf(ctx context.Context, transactionID string) ([]*xaalis.Dispute, error) {
	return queryDisputes(ctx, s.read, `SELECT `+disputeColumns+` FROM disputes WHERE transaction_id = ?
		ORDER BY created_at, id`, transactionID)
}

// FindTransactions finds transactions of any merchant by id, reference,
// merchant_ref or payer phone; each branch reads an index.
func (s *Store) FindTransactions(ctx context.Context, key string, limit int) ([]*xaalis.Transaction, error) {
	return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions WHERE id IN (
			SELECT id FROM transactions WHERE id = ?
			UNION SELECT id FROM transactions WHERE reference = ?
			UNION SELECT id FROM transactions WHERE merchant_ref = ? AND merchant_ref IS NOT NULL
			UNION SELECT id FROM transactions WHERE payer_phone = ? AND payer_phone <> '')
		ORDER BY created_at DESC, id DESC LIMIT +?`, key, key, key, key, limit)
}

// ChildTransactions returns the refunds of a payment, oldest first.
func (s *Store) ChildTransactions(ctx context.Context, parentID string) ([]*xaalis.Transaction, error) {
	return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions WHERE parent_id = ? ORDER BY created_at, id`, parentID)
}
