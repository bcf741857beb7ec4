package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// ClaimIdempotency claims a key for one request in its own transaction.
func (s *Store) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	var out xaalis.ClaimResult
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		var (
			fp          []byte
			state       string
			lockedUntil int64
			expiresAt   int64
			status      sql.NullInt64
			ctype, loc  sql.NullString
			body        []byte
		)
		err := tx.QueryRowContext(ctx, `SELECT fingerprint, state, locked_until, expires_at, response_status,
			response_content_type, response_location, response_body FROM idempotency_keys
			WHERE merchant_id = ? AND mode = ? AND key = ?`, c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key).
			Scan(&fp, &state, &lockedUntil, &expiresAt, &status, &ctype, &loc, &body)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		now := micros(c.Now)
		if found && expiresAt <= now {
			// Past its 24 hours the key is forgotten and may be used anew.
			if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = ? AND mode = ? AND key = ?`,
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key); err != nil {
				return fmt.Errorf("delete expired idempotency key: %w", err)
			}
			found = false
		}
		if found {
			switch {
			case !bytes.Equal(fp, c.Fingerprint):
				out.Outcome = xaalis.ClaimConflict
			case state == "done":
				out.Outcome = xaalis.ClaimReplay
				out.Response = &xaalis.StoredResponse{Status: int(status.Int64), ContentType: ctype.String, Location: loc.String, Body: body}
			case lockedUntil > now:
				out.Outcome = xaalis.ClaimInFlight
			default:
				// The holder died before its action committed: take the key over.
				if _, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET token = ?, locked_until = ?
					WHERE merchant_id = ? AND mode = ? AND key = ?`, c.Token, micros(c.Now.Add(c.Lease)),
					c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key); err != nil {
					return fmt.Errorf("take over idempotency key: %w", err)
				}
				out.Outcome = xaalis.ClaimAcquired
			}
			return nil
		}
		if c.QuotaLimit > 0 {
			start := xaalis.QuotaWindowStart(c.Now, c.QuotaWindow)
			var n int
			if err := tx.QueryRowContext(ctx, `INSERT INTO idempotency_quota (merchant_id, mode, window_start, count)
				VALUES (?, ?, ?, 1) ON CONFLICT (merchant_id, mode, window_start) DO UPDATE SET count = count + 1
				RETURNING count`, c.Scope.MerchantID, c.Scope.Mode, micros(start)).Scan(&n); err != nil {
				return fmt.Errorf("count idempotency quota: %w", err)
			}
			if n > c.QuotaLimit {
				out = xaalis.ClaimResult{Outcome: xaalis.ClaimQuotaExceeded, RetryAfter: start.Add(c.QuotaWindow).Sub(c.Now)}
				return errQuota
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (merchant_id, mode, key, fingerprint, token, state,
			locked_until, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)`,
			c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key, c.Fingerprint, c.Token, micros(c.Now.Add(c.Lease)),
			now, micros(c.Now.Add(xaalis.IdempotencyTTL))); err != nil {
			return fmt.Errorf("insert idempotency key: %w", err)
		}
		out.Outcome = xaalis.ClaimAcquired
		return nil
	})
	if errors.Is(err, errQuota) {
		return out, nil // rolled back: a refused key does not count
	}
	return out, err
}

var errQuota = errors.New("idempotency quota exceeded")

func completeIdempotency(ctx context.Context, q querier, s xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	res, err := q.ExecContext(ctx, `UPDATE idempotency_keys SET state = 'done', locked_until = 0, response_status = ?,
		response_content_type = ?, response_location = ?, response_body = ?
		WHERE merchant_id = ? AND mode = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		r.Status, r.ContentType, r.Location, r.Body, s.MerchantID, s.Mode, s.Key, token)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return xaalis.ErrClaimLost
	}
	return nil
}

// CompleteIdempotency stores the response of a claim in its own transaction.
func (s *Store) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	return completeIdempotency(ctx, s.write, sc, token, r)
}

// CompleteIdempotency stores the response of a claim with the command.
func (t *Tx) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	return completeIdempotency(ctx, t.tx, sc, token, r)
}

// ReleaseIdempotency forgets a claim still held by token.
func (s *Store) ReleaseIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string) error {
	_, err := s.write.ExecContext(ctx, `DELETE FROM idempotency_keys
		WHERE merchant_id = ? AND mode = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		sc.MerchantID, sc.Mode, sc.Key, token)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotency deletes expired keys and old quota windows.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.write.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ? AND locked_until <= ?`,
		micros(now), micros(now))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := s.write.ExecContext(ctx, `DELETE FROM idempotency_quota WHERE window_start < ?`,
		micros(now.Add(-xaalis.IdempotencyTTL))); err != nil {
		return n, fmt.Errorf("purge idempotency quota: %w", err)
	}
	return n, nil
}
