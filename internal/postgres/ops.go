package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// AddStats adds deltas to the stat counters of a day and shard.
func (t *Tx) AddStats(ctx context.Context, day int64, shard int, deltas ...xaalis.StatDelta) error {
	// Written at COMMIT with the other hot rows (txConn.hot), in the
	// connection's shard rather than shard: a counter of every payment is
	// the hottest row of all.
	for _, d := range deltas {
		t.tx.addStat(statRow{day: day, metric: d.Metric, key: d.Key, shard: int(t.tx.shard)}, d.Count, d.Amount)
	}
	return nil
}

// StatTotals sums the counters of the days from fromDay on.
func (s *Store) StatTotals(ctx context.Context, fromDay int64) ([]xaalis.StatTotal, error) {
	return queryAll(ctx, s.pool, "stat totals", func(op string, row interface{ Scan(...any) error }) (xaalis.StatTotal, error) {
		var t xaalis.StatTotal
		if err := row.Scan(&t.Metric, &t.Key, &t.Count, &t.Amount); err != nil {
			return t, fmt.Errorf("%s: %w", op, err)
		}
		return t, nil
	}, `SELECT metric, key, sum(count)::bigint, sum(amount)::bigint FROM stat_counters WHERE day >= $1
		GROUP BY metric, key ORDER BY metric, key`, fromDay)
}

// CompactStats folds the counters of the days before beforeDay into the
// folded day in one statement: the DELETE locks the rows it removes, so a
// concurrent compaction waits, then finds them gone and adds nothing.
func (s *Store) CompactStats(ctx context.Context, beforeDay int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `WITH gone AS (
			DELETE FROM stat_counters WHERE day > $1 AND day < $2 RETURNING metric, key, shard, count, amount
		), folded AS (
			INSERT INTO stat_counters (day, metric, key, shard, count, amount)
			SELECT $1, metric, key, shard, sum(count)::bigint, sum(amount)::bigint FROM gone GROUP BY metric, key, shard
			ON CONFLICT (day, metric, key, shard)
			DO UPDATE SET count = stat_counters.count + excluded.count, amount = stat_counters.amount + excluded.amount
		)
		SELECT count(*) FROM gone`, int64(xaalis.StatDayFolded), beforeDay).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("compact stats: %w", err)
	}
	return n, nil
}

// WebhookBacklog reads the delivery outbox's backlog.
func (s *Store) WebhookBacklog(ctx context.Context, capAt, limit int) (xaalis.WebhookBacklog, error) {
	var b xaalis.WebhookBacklog
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries
		WHERE status = 'pending'`+limitSQL(capAt)+`) AS p`).Scan(&b.Pending); err != nil {
		return b, fmt.Errorf("count pending deliveries: %w", err)
	}
	b.Saturated = b.Pending >= capAt
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(created_at) FROM webhook_deliveries WHERE status = 'pending'`).
		Scan(&oldest); err != nil {
		return b, fmt.Errorf("oldest pending delivery: %w", err)
	}
	if oldest != nil {
		b.OldestPending = oldest.UTC()
	}
	if limit <= 0 {
		return b, nil
	}
	var err error
	b.Failing, err = queryAll(ctx, s.pool, "failing endpoints", func(op string, row interface{ Scan(...any) error }) (xaalis.FailingEndpoint, error) {
		var f xaalis.FailingEndpoint
		if err := row.Scan(&f.MerchantID, &f.Mode, &f.EndpointID, &f.URL, &f.Pending, &f.Oldest, &f.LastAttemptAt); err != nil {
			return f, fmt.Errorf("%s: %w", op, err)
		}
		f.Oldest, f.LastAttemptAt = f.Oldest.UTC(), f.LastAttemptAt.UTC()
		return f, nil
	}, `SELECT merchant_id, mode, coalesce(endpoint_id, ''), url, count(*), min(created_at),
			max(coalesce(last_attempt_at, 'epoch'::timestamptz))
		FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0
		GROUP BY merchant_id, mode, coalesce(endpoint_id, ''), url ORDER BY count(*) DESC, min(created_at)`+limitSQL(limit))
	return b, err
}

// JobsDue finds the oldest due item of each background job. Each query
// repeats the predicate of a partial index and reads its first entry.
func (s *Store) JobsDue(ctx context.Context, q xaalis.JobsDueQuery) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, j := range []struct {
		job    string
		query  string
		arg    time.Time
		offset time.Duration
	}{
		{xaalis.JobExpire, `SELECT min(expires_at) FROM transactions
			WHERE type = 'payment' AND status IN ('initiated', 'pending') AND expires_at <= $1`, q.Now, 0},
		{xaalis.JobReconcile, `SELECT min(coalesce(reconciled_at, created_at)) FROM transactions
			WHERE type = 'payment' AND status = 'pending' AND provider_ref <> '' AND coalesce(reconciled_at, created_at) < $1`,
			q.ReconcileBefore, q.Now.Sub(q.ReconcileBefore)},
		{xaalis.JobDisputes, `SELECT min(due_by) FROM disputes WHERE status = 'needs_response' AND due_by <= $1`, q.Now, 0},
		{xaalis.JobSubscriptions, `SELECT min(next_action_at) FROM subscriptions WHERE status = 'active' AND next_action_at <= $1`, q.Now, 0},
		{xaalis.JobDispatch, `SELECT min(coalesce(dispatched_at, created_at)) FROM transactions
			WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending') AND coalesce(dispatched_at, created_at) < $1`,
			q.DispatchBefore, q.Now.Sub(q.DispatchBefore)},
		{xaalis.JobWebhooks, `SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1`, q.Now, 0},
	} {
		var v *time.Time
		if err := s.pool.QueryRow(ctx, j.query, j.arg).Scan(&v); err != nil {
			return nil, fmt.Errorf("jobs due: %s: %w", j.job, err)
		}
		if v != nil {
			out[j.job] = v.UTC().Add(j.offset)
		} else {
			out[j.job] = time.Time{}
		}
	}
	// The reconcile job asks about closed payments' late polls too.
	var late *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(poll_at) FROM late_polls WHERE poll_at <= $1`, q.Now).Scan(&late); err != nil {
		return nil, fmt.Errorf("jobs due: late polls: %w", err)
	}
	if r := out[xaalis.JobReconcile]; late != nil && (r.IsZero() || late.Before(r)) {
		out[xaalis.JobReconcile] = late.UTC()
	}
	return out, nil
}

// InsertLedgerCheck records a ledger check.
func (t *Tx) InsertLedgerCheck(ctx context.Context, c *xaalis.LedgerCheckRun) error {
	detail, err := json.Marshal(nonNil(c.Detail))
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO ledger_checks (id, at, duration_ms, problems, detail, actor)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.ID, c.At, c.Duration.Milliseconds(), c.Problems, string(detail), c.Actor)
	if err != nil {
		return fmt.Errorf("insert ledger check: %w", err)
	}
	return nil
}

// LastLedgerCheck returns the newest recorded ledger check.
func (s *Store) LastLedgerCheck(ctx context.Context) (*xaalis.LedgerCheckRun, error) {
	var c xaalis.LedgerCheckRun
	var ms int64
	var detail []byte
	err := s.pool.QueryRow(ctx, `SELECT id, at, duration_ms, problems, detail::text, actor FROM ledger_checks
		ORDER BY at DESC, id DESC LIMIT 1`).Scan(&c.ID, &c.At, &ms, &c.Problems, &detail, &c.Actor)
	if err != nil {
		return nil, notFound("last ledger check", err)
	}
	c.At, c.Duration = c.At.UTC(), time.Duration(ms)*time.Millisecond
	if err := json.Unmarshal(detail, &c.Detail); err != nil {
		return nil, fmt.Errorf("ledger check detail: %w", err)
	}
	return &c, nil
}

// RateCount reads a rate counter's window.
func (s *Store) RateCount(ctx context.Context, scope string, window time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count FROM rate_counters WHERE scope = $1 AND window_start = $2`,
		scope, window).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read rate counter: %w", err)
	}
	return n, nil
}

// InsertOperatorSession stores a console session.
func (t *Tx) InsertOperatorSession(ctx context.Context, s *xaalis.OperatorSession) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO operator_sessions (id, hash, token_id, created_at, last_seen_at, client_ip)
		VALUES ($1, $2, $3, $4, $5, $6)`, s.ID, s.Hash, s.TokenID, s.CreatedAt, s.LastSeenAt, s.ClientIP)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// OperatorSessionByHash finds a session and its token.
func (s *Store) OperatorSessionByHash(ctx context.Context, hash []byte) (*xaalis.OperatorSession, *xaalis.OperatorToken, error) {
	var ses xaalis.OperatorSession
	var o xaalis.OperatorToken
	err := s.pool.QueryRow(ctx, `SELECT s.id, s.hash, s.token_id, s.created_at, s.last_seen_at, s.client_ip,
			o.id, o.name, o.hash, o.created_at, o.expires_at, o.revoked_at
		FROM operator_sessions s JOIN operator_tokens o ON o.id = s.token_id WHERE s.hash = $1`, hash).
		Scan(&ses.ID, &ses.Hash, &ses.TokenID, &ses.CreatedAt, &ses.LastSeenAt, &ses.ClientIP,
			&o.ID, &o.Name, &o.Hash, &o.CreatedAt, &o.ExpiresAt, &o.RevokedAt)
	if err != nil {
		return nil, nil, notFound("read session", err)
	}
	ses.CreatedAt, ses.LastSeenAt = ses.CreatedAt.UTC(), ses.LastSeenAt.UTC()
	o.CreatedAt, o.ExpiresAt, o.RevokedAt = o.CreatedAt.UTC(), utcPtr(o.ExpiresAt), utcPtr(o.RevokedAt)
	return &ses, &o, nil
}

// TouchOperatorSession moves a session's last activity.
func (t *Tx) TouchOperatorSession(ctx context.Context, id string, at time.Time) error {
	_, err := t.tx.Exec(ctx, `UPDATE operator_sessions SET last_seen_at = $1 WHERE id = $2`, at, id)
	return err
}

// DeleteOperatorSession ends a session.
func (t *Tx) DeleteOperatorSession(ctx context.Context, id string) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM operator_sessions WHERE id = $1`, id)
	return err
}

// PurgeOperatorSessions deletes idle sessions.
func (t *Tx) PurgeOperatorSessions(ctx context.Context, idle time.Time) (int64, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM operator_sessions WHERE last_seen_at < $1`, idle)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// likePattern escapes LIKE's wildcards (\ is the default escape).
func likePattern(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Merchants lists merchants for the console.
func (s *Store) Merchants(ctx context.Context, f xaalis.MerchantFilter, page xaalis.PageRequest) ([]*xaalis.Merchant, int, error) {
	where, args := `true`, []any{}
	if f.Query != "" {
		p := likePattern(f.Query)
		where = `(m.id LIKE $1 OR m.name ILIKE $2)`
		args = append(args, p+"%", "%"+p+"%")
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM merchants m WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count merchants: %w", err)
	}
	tail, args := pageSQL(page, args...)
	list, err := queryAll(ctx, s.pool, "list merchants", func(op string, row interface{ Scan(...any) error }) (*xaalis.Merchant, error) {
		return scanMerchant(op, row)
	}, `SELECT `+merchantColumns+` FROM merchants m WHERE `+where+` ORDER BY m.created_at DESC, m.id DESC`+tail, args...)
	return list, total, err
}

// Keys lists a merchant's keys, newest first.
func (s *Store) Keys(ctx context.Context, merchantID string) ([]*xaalis.Key, error) {
	return queryAll(ctx, s.pool, "list keys", func(op string, row interface{ Scan(...any) error }) (*xaalis.Key, error) {
		var k xaalis.Key
		var scopes []string
		if err := row.Scan(keyDest(&k, &scopes)...); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		finishKey(&k, scopes)
		return &k, nil
	}, `SELECT `+keyColumns+` FROM api_keys k WHERE k.merchant_id = $1 ORDER BY k.created_at DESC, k.id DESC`, merchantID)
}

// PayoutRequestByID returns a payout request of any merchant.
func (s *Store) PayoutRequestByID(ctx context.Context, id string) (*xaalis.PayoutRequest, error) {
	return scanPR("read payout request", s.pool.QueryRow(ctx, `SELECT `+prColumns+` FROM payout_requests WHERE id = $1`, id))
}

// PayoutRequestQueue lists payout requests in the statuses, oldest first.
func (s *Store) PayoutRequestQueue(ctx context.Context, statuses []xaalis.PayoutRequestStatus, page xaalis.PageRequest) ([]*xaalis.PayoutRequest, int, error) {
	st := make([]string, len(statuses))
	for i, v := range statuses {
		st[i] = string(v)
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM payout_requests WHERE status = ANY($1)`, st).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count payout requests: %w", err)
	}
	tail, args := pageSQL(page, st)
	list, err := queryPRs(ctx, s.pool, "payout request queue", `SELECT `+prColumns+` FROM payout_requests
		WHERE status = ANY($1) ORDER BY submitted_at, id`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// DisputeByID returns a dispute of any merchant.
func (s *Store) DisputeByID(ctx context.Context, id string) (*xaalis.Dispute, error) {
	return scanDispute("read dispute", s.pool.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE id = $1`, id))
}

// OpenDisputes lists the open disputes of any merchant, nearest deadline
// first.
func (s *Store) OpenDisputes(ctx context.Context, page xaalis.PageRequest) ([]*xaalis.Dispute, int, error) {
	const where = `status IN ('needs_response', 'under_review')`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM disputes WHERE `+where).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count open disputes: %w", err)
	}
	tail, args := pageSQL(page)
	list, err := queryDisputes(ctx, s.pool, "open disputes", `SELECT `+disputeColumns+` FROM disputes WHERE `+where+`
		ORDER BY due_by, id`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// DisputesOf lists a payment's disputes, oldest first.
func (s *Store) DisputesOf(ctx context.Context, transactionID string) ([]*xaalis.Dispute, error) {
	return queryDisputes(ctx, s.pool, "disputes of payment", `SELECT `+disputeColumns+` FROM disputes
		WHERE transaction_id = $1 ORDER BY created_at, id`, transactionID)
}

// FindTransactions finds transactions of any merchant by id, reference,
// merchant_ref or payer phone; each branch reads an index.
func (s *Store) FindTransactions(ctx context.Context, key string, limit int) ([]*xaalis.Transaction, error) {
	return queryTxs(ctx, s.pool, "find transactions", `SELECT `+txColumns+` FROM transactions WHERE id IN (
			SELECT id FROM transactions WHERE id = $1
			UNION SELECT id FROM transactions WHERE reference = $1
			UNION SELECT id FROM transactions WHERE merchant_ref = $1 AND merchant_ref IS NOT NULL
			UNION SELECT id FROM transactions WHERE payer_phone = $1 AND payer_phone <> '')
		ORDER BY created_at DESC, id DESC`+limitSQL(limit), key)
}

// ChildTransactions returns the refunds of a payment, oldest first.
func (s *Store) ChildTransactions(ctx context.Context, parentID string) ([]*xaalis.Transaction, error) {
	return queryTxs(ctx, s.pool, "refunds of payment", `SELECT `+txColumns+` FROM transactions
		WHERE parent_id = $1 ORDER BY created_at, id`, parentID)
}

// WALPosition is the cluster's WAL insert position, in bytes since its
// start: `xaalis bench` reads it before and after a scenario for the WAL
// a request writes.
func (s *Store) WALPosition(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read WAL position: %w", err)
	}
	return n, nil
}
