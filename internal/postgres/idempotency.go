package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// epoch is locked_until of a completed key: never held.
var epoch = time.Unix(0, 0).UTC()

// claimAttempts bounds the read-then-insert loop of a claim. Each retry
// means another claimer's row came and went between the two statements,
// so two rounds suffice in practice.
const claimAttempts = 5

// ClaimIdempotency claims a key for one request in its own transaction.
//
// The key's row is read FOR UPDATE, so claimers of an existing key take
// turns. A new key is inserted ON CONFLICT DO NOTHING: when two claimers
// insert the same new key, the second waits for the first to commit, finds
// the conflict, and reads the row again, which it then answers as in flight,
// replay or conflict.
func (s *Store) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	var out xaalis.ClaimResult
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		for range claimAttempts {
			done, err := claimExisting(ctx, tx, c, &out)
			if err != nil || done {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (merchant_id, mode, key, fingerprint, token, state,
				locked_until, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, 'in_flight', $6, $7, $8)
				ON CONFLICT (merchant_id, mode, key) DO NOTHING`,
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key, c.Fingerprint, c.Token, c.Now.Add(c.Lease),
				c.Now, c.Now.Add(xaalis.IdempotencyTTL))
			if err != nil {
				return fmt.Errorf("insert idempotency key: %w", err)
			}
			if tag.RowsAffected() == 0 {
				continue // a concurrent claimer made the key first: read its row
			}
			// Only a key this claim made counts against the quota.
			if c.QuotaLimit > 0 {
				start := xaalis.QuotaWindowStart(c.Now, c.QuotaWindow)
				var n int
				if err := tx.QueryRow(ctx, `INSERT INTO idempotency_quota (merchant_id, mode, window_start, count)
					VALUES ($1, $2, $3, 1) ON CONFLICT (merchant_id, mode, window_start)
					DO UPDATE SET count = idempotency_quota.count + 1 RETURNING count`,
					c.Scope.MerchantID, c.Scope.Mode, start).Scan(&n); err != nil {
					return fmt.Errorf("count idempotency quota: %w", err)
				}
				if n > c.QuotaLimit {
					out = xaalis.ClaimResult{Outcome: xaalis.ClaimQuotaExceeded, RetryAfter: start.Add(c.QuotaWindow).Sub(c.Now)}
					return errQuota
				}
			}
			out = xaalis.ClaimResult{Outcome: xaalis.ClaimAcquired}
			return nil
		}
		return errors.New("claim idempotency key: the key keeps changing under concurrent claims")
	})
	if errors.Is(err, errQuota) {
		return out, nil // rolled back: a refused key does not count
	}
	return out, err
}

var errQuota = errors.New("idempotency quota exceeded")

// claimExisting locks the key's row and answers the claim from it. It
// reports false when there is no live row (an expired one is deleted), so
// the key is new.
func claimExisting(ctx context.Context, tx pgx.Tx, c xaalis.Claim, out *xaalis.ClaimResult) (bool, error) {
	var (
		fp          []byte
		state       string
		lockedUntil time.Time
		expiresAt   time.Time
		status      *int
		ctype, loc  *string
		body        []byte
	)
	err := tx.QueryRow(ctx, `SELECT fingerprint, state, locked_until, expires_at, response_status,
		response_content_type, response_location, response_body FROM idempotency_keys
		WHERE merchant_id = $1 AND mode = $2 AND key = $3 FOR UPDATE`, c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key).
		Scan(&fp, &state, &lockedUntil, &expiresAt, &status, &ctype, &loc, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read idempotency key: %w", err)
	}
	// Stored times have microseconds; compare at that precision, as SQLite does.
	now := c.Now.Truncate(time.Microsecond)
	if !expiresAt.After(now) {
		// Past its 24 hours the key is forgotten and may be used anew.
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND mode = $2 AND key = $3`,
			c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key); err != nil {
			return false, fmt.Errorf("delete expired idempotency key: %w", err)
		}
		return false, nil
	}
	switch {
	case !bytes.Equal(fp, c.Fingerprint):
		*out = xaalis.ClaimResult{Outcome: xaalis.ClaimConflict}
	case state == "done":
		r := &xaalis.StoredResponse{Body: body}
		if status != nil {
			r.Status = *status
		}
		if ctype != nil {
			r.ContentType = *ctype
		}
		if loc != nil {
			r.Location = *loc
		}
		*out = xaalis.ClaimResult{Outcome: xaalis.ClaimReplay, Response: r}
	case lockedUntil.After(now):
		*out = xaalis.ClaimResult{Outcome: xaalis.ClaimInFlight}
	default:
		// The holder died before its action committed: take the key over.
		if _, err := tx.Exec(ctx, `UPDATE idempotency_keys SET token = $1, locked_until = $2
			WHERE merchant_id = $3 AND mode = $4 AND key = $5`, c.Token, c.Now.Add(c.Lease),
			c.Scope.MerchantID, c.Scope.Mode, c.Scope.Key); err != nil {
			return false, fmt.Errorf("take over idempotency key: %w", err)
		}
		*out = xaalis.ClaimResult{Outcome: xaalis.ClaimAcquired}
	}
	return true, nil
}

func completeIdempotency(ctx context.Context, q querier, s xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	tag, err := q.Exec(ctx, `UPDATE idempotency_keys SET state = 'done', locked_until = $1, response_status = $2,
		response_content_type = $3, response_location = $4, response_body = $5
		WHERE merchant_id = $6 AND mode = $7 AND key = $8 AND token = $9 AND state = 'in_flight'`,
		epoch, r.Status, r.ContentType, r.Location, r.Body, s.MerchantID, s.Mode, s.Key, token)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return xaalis.ErrClaimLost
	}
	return nil
}

// CompleteIdempotency stores the response of a claim in its own transaction.
func (s *Store) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	return completeIdempotency(ctx, s.pool, sc, token, r)
}

// CompleteIdempotency stores the response of a claim with the command.
func (t *Tx) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	return completeIdempotency(ctx, t.tx, sc, token, r)
}

// ReleaseIdempotency forgets a claim still held by token.
func (s *Store) ReleaseIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys
		WHERE merchant_id = $1 AND mode = $2 AND key = $3 AND token = $4 AND state = 'in_flight'`,
		sc.MerchantID, sc.Mode, sc.Key, token)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotency deletes expired keys and old quota windows.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1 AND locked_until <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	n := tag.RowsAffected()
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_quota WHERE window_start < $1`,
		now.Add(-xaalis.IdempotencyTTL)); err != nil {
		return n, fmt.Errorf("purge idempotency quota: %w", err)
	}
	return n, nil
}
