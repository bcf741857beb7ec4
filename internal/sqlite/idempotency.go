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

// IdempotencyKey reads a key's row from the readers, writing nothing.
func (s *Store) IdempotencyKey(ctx context.Context, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	return readKey(ctx, s.read, s.secretBox(), sc)
}

// idemColumns are an Idempotency-Key's columns (ik) and its owner's
// heartbeat (si), as idemRow receives them.
const idemColumns = `ik.fingerprint, ik.state, ik.locked_until, ik.expires_at, ik.response_status,
	ik.response_content_type, ik.response_location, ik.response_body, ik.token, ik.instance_id, si.heartbeat_at`

// idemRow receives idemColumns: all NULL when a LEFT JOIN found no key.
type idemRow struct {
	state, token, ctype, loc, owner           sql.NullString
	lockedUntil, expiresAt, status, heartbeat sql.NullInt64
	fingerprint, body                         []byte
}

func (r *idemRow) dest() []any {
	return []any{&r.fingerprint, &r.state, &r.lockedUntil, &r.expiresAt, &r.status, &r.ctype, &r.loc, &r.body,
		&r.token, &r.owner, &r.heartbeat}
}

// record returns the key the row holds, nil when it holds none; a sealed
// stored answer is opened with box.
func (r *idemRow) record(box xaalis.SecretBox, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	if !r.state.Valid { // state is NOT NULL: the join found no key
		return nil, nil
	}
	rec := &xaalis.IdempotencyRecord{Fingerprint: r.fingerprint, Token: r.token.String, Owner: r.owner.String,
		LockedUntil: fromMicros(r.lockedUntil.Int64), ExpiresAt: fromMicros(r.expiresAt.Int64),
		OwnerHeartbeat: fromNullMicros(r.heartbeat)}
	if rec.Done = r.state.String == "done"; rec.Done {
		body, err := openAnswer(box, sc, r.body)
		if err != nil {
			return nil, err
		}
		rec.Response = &xaalis.StoredResponse{Status: int(r.status.Int64), ContentType: r.ctype.String,
			Location: r.loc.String, Body: body}
	}
	return rec, nil
}

// readKey reads a key's row; a sealed stored answer is opened with box.
func readKey(ctx context.Context, q querier, box xaalis.SecretBox, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	// The owner's heartbeat comes with the key: whether its holder still
	// runs is decided from this one read.
	var r idemRow
	err := q.QueryRowContext(ctx, `SELECT `+idemColumns+`
		FROM idempotency_keys ik LEFT JOIN server_instances si ON si.id = ik.instance_id
		WHERE ik.merchant_id = ? AND ik.mode = ? AND ik.key_type = ? AND ik.key = ?`, sc.MerchantID, sc.Mode, sc.KeyType, sc.Key).
		Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, xaalis.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	return r.record(box, sc)
}

// ClaimIdempotency claims a key for one request in its own transaction.
func (s *Store) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	// The claim is all this transaction writes: nothing to save by
	// writing it at the end.
	c.Unseen = false
	var out xaalis.ClaimResult
	err := s.Update(ctx, func(xtx xaalis.Tx) (err error) {
		if out, err = xtx.ClaimIdempotency(ctx, c); err == nil && out.Outcome == xaalis.ClaimQuotaExceeded {
			return errQuota
		}
		return err
	})
	if errors.Is(err, errQuota) {
		return out, nil // rolled back: a refused key does not count
	}
	return out, err
}

// ClaimIdempotency claims a key inside the command's transaction. On
// ClaimQuotaExceeded the count was taken: the caller rolls back.
//
// A key the request found absent (Unseen) is written at the end of the
// command, once: with its answer when the command completes it
// (CompleteIdempotency), in flight otherwise (writeClaim, which the writer
// runs after the command). Another request's claim in between fails the
// command with ErrClaimRace when it writes the key. Any other key is
// inserted first: a new key costs no read. A key that exists is read and
// answered from its row; an expired one is replaced and a dead holder's
// taken over.
func (t *Tx) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	tx := t.tx
	if c.Unseen {
		res, err := t.countClaim(ctx, c, func() { t.unwritten = &c })
		if err != nil || res.Outcome != xaalis.ClaimQuotaExceeded {
			return res, err
		}
		// Past the quota, a key that exists meanwhile answers as itself
		// (a replay, 409), not 429: claim it as any other, uncounted.
		t.claims[claimQuota(c)]--
		c.Unseen = false
	}
	made, err := insertClaim(ctx, tx, c, nil, nil)
	if err != nil {
		return xaalis.ClaimResult{}, err
	}
	if !made {
		rec, err := readKey(ctx, tx, t.box, c.Scope)
		if err != nil {
			return xaalis.ClaimResult{}, err
		}
		out := rec.Outcome(c)
		switch {
		case out.Outcome != xaalis.ClaimAcquired:
			return out, nil
		case !rec.ExpiresAt.After(c.Now.Truncate(time.Microsecond)):
			// Past its 24 hours the key is forgotten and may be used anew.
			if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ?`,
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key); err != nil {
				return xaalis.ClaimResult{}, fmt.Errorf("delete expired idempotency key: %w", err)
			}
			if made, err = insertClaim(ctx, tx, c, nil, nil); err != nil || !made {
				return xaalis.ClaimResult{}, errors.Join(err, errors.New("claim idempotency key: the expired key is still there"))
			}
		default:
			// The holder is gone before its action committed: take the key
			// over. The command then resumes from its last committed step.
			if _, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET token = ?, locked_until = ?, instance_id = ?
				WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ?`, c.Token, micros(c.Now.Add(c.Lease)), nullString(c.Instance),
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key); err != nil {
				return xaalis.ClaimResult{}, fmt.Errorf("take over idempotency key: %w", err)
			}
			return out, nil
		}
	}
	return t.countClaim(ctx, c, nil)
}

// countClaim counts a key this claim makes against the quota (only those
// count) and, within it, runs hold: the claim is acquired.
func (t *Tx) countClaim(ctx context.Context, c xaalis.Claim, hold func()) (xaalis.ClaimResult, error) {
	if c.QuotaLimit > 0 {
		k := claimQuota(c)
		n, err := t.countQuota(ctx, k)
		if err != nil {
			return xaalis.ClaimResult{}, err
		}
		if n > c.QuotaLimit {
			return xaalis.ClaimResult{Outcome: xaalis.ClaimQuotaExceeded, RetryAfter: fromMicros(k.window).Add(c.QuotaWindow).Sub(c.Now)}, nil
		}
	}
	if hold != nil {
		hold()
	}
	return xaalis.ClaimResult{Outcome: xaalis.ClaimAcquired}, nil
}

// claimQuota is the quota row a new key of c counts in.
func claimQuota(c xaalis.Claim) quotaKey {
	return quotaKey{c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, micros(xaalis.QuotaWindowStart(c.Now, c.QuotaWindow))}
}

// insertClaim inserts c's key: done with the answer done (its body
// already sealed if need be), or in flight for c's lease when done is nil.
// It reports whether the key was made: an existing key is left as it is.
func insertClaim(ctx context.Context, q querier, c xaalis.Claim, done *xaalis.StoredResponse, body []byte) (bool, error) {
	state, lockedUntil := "in_flight", micros(c.Now.Add(c.Lease))
	var status, ctype, loc any
	if done != nil {
		state, lockedUntil = "done", 0
		status, ctype, loc = done.Status, done.ContentType, done.Location
	}
	res, err := q.ExecContext(ctx, `INSERT INTO idempotency_keys (merchant_id, mode, key_type, key, fingerprint, token, state,
		locked_until, created_at, expires_at, instance_id, response_status, response_content_type, response_location, response_body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key, c.Fingerprint, c.Token, state, lockedUntil,
		micros(c.Now), micros(c.Now.Add(xaalis.IdempotencyTTL)), nullString(c.Instance), status, ctype, loc, body)
	if err != nil {
		return false, fmt.Errorf("insert idempotency key: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// claimFailed returns the error of a command that failed with err: an
// Unseen key another request took meanwhile makes it ErrClaimRace. The
// command may have failed because that request did its work (its
// merchant_ref is taken now, its refund used the amount up): the request
// answers from the key's row, as a claim at the start would have.
func (t *Tx) claimFailed(ctx context.Context, err error) error {
	c := t.unwritten
	if c == nil {
		return err
	}
	t.unwritten = nil
	if _, bad := unavailableCode(err); bad || errors.Is(err, xaalis.ErrClaimRace) {
		// The disk or the database failed (the writer reports it as
		// such, and SQLite may have rolled everything back), or the race
		// is already known.
		return err
	}
	var one int
	switch perr := t.tx.QueryRowContext(ctx, `SELECT 1 FROM idempotency_keys
		WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ?`,
		c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key).Scan(&one); {
	case perr == nil:
		return xaalis.ErrClaimRace
	case errors.Is(perr, sql.ErrNoRows):
		return err
	default:
		return errors.Join(err, fmt.Errorf("read idempotency key: %w", perr))
	}
}

// writeClaim writes the command's claim that is still unwritten, in
// flight: the command ends without its answer (a live payment waits for
// its provider). ErrClaimRace when another request took the key.
func (t *Tx) writeClaim(ctx context.Context) error {
	c := t.unwritten
	if c == nil {
		return nil
	}
	t.unwritten = nil
	made, err := insertClaim(ctx, t.tx, *c, nil, nil)
	if err == nil && !made {
		err = xaalis.ErrClaimRace
	}
	return err
}

// quotaKey is one row of idempotency_quota: a scope's keys claimed in one
// window.
type quotaKey struct {
	merchantID string
	mode       xaalis.Mode
	keyType    xaalis.KeyType
	window     int64
}

// quotaBatch counts the keys that a writer batch's commands claim. The
// counts are exact: the batch holds SQLite's one write lock, so the
// stored count read once is the count until the batch commits; the
// batch adds the claims of its committed commands to it, once, before its
// COMMIT, instead of one upsert a claim on the same hot row.
type quotaBatch struct {
	stored  map[quotaKey]int // read once a batch
	pending map[quotaKey]int // claims of the batch's committed commands
}

func newQuotaBatch() *quotaBatch {
	return &quotaBatch{stored: map[quotaKey]int{}, pending: map[quotaKey]int{}}
}

// countQuota counts one more key claimed in k's window and returns the
// window's count with it.
func (t *Tx) countQuota(ctx context.Context, k quotaKey) (int, error) {
	stored, ok := t.quota.stored[k]
	if !ok {
		err := t.tx.QueryRowContext(ctx, `SELECT count FROM idempotency_quota
			WHERE merchant_id = ? AND mode = ? AND key_type = ? AND window_start = ?`,
			k.merchantID, k.mode, k.keyType, k.window).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("read idempotency quota: %w", err)
		}
		t.quota.stored[k] = stored
	}
	if t.claims == nil {
		t.claims = map[quotaKey]int{}
	}
	t.claims[k]++
	return stored + t.quota.pending[k] + t.claims[k], nil
}

// merge counts the claims of a committed command.
func (b *quotaBatch) merge(claims map[quotaKey]int) {
	for k, n := range claims {
		b.pending[k] += n
	}
}

// write adds the batch's claims to their windows' rows.
func (b *quotaBatch) write(ctx context.Context, q querier) error {
	for k, n := range b.pending {
		if _, err := q.ExecContext(ctx, `INSERT INTO idempotency_quota (merchant_id, mode, key_type, window_start, count)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (merchant_id, mode, key_type, window_start) DO UPDATE SET count = count + excluded.count`,
			k.merchantID, k.mode, k.keyType, k.window, n); err != nil {
			return fmt.Errorf("count idempotency quota: %w", err)
		}
	}
	return nil
}

var errQuota = errors.New("idempotency quota exceeded")

// openAnswer returns a stored answer in clear: sealed ones (answers that
// show a secret) are opened.
func openAnswer(box xaalis.SecretBox, sc xaalis.IdempotencyScope, body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(xaalis.SealedPrefix)) {
		return body, nil
	}
	v, err := xaalis.OpenSecret(box, string(body), xaalis.IdempotencyAAD(sc))
	if err != nil {
		return nil, fmt.Errorf("stored answer: %w", err)
	}
	return []byte(v), nil
}

// sealAnswer returns the body to store of an answer: sealed when it
// shows a secret.
func sealAnswer(ctx context.Context, q querier, box xaalis.SecretBox, s xaalis.IdempotencyScope, r xaalis.StoredResponse) ([]byte, error) {
	return xaalis.SealAnswer(box, s, r, func() (string, error) { return currentSecretKey(ctx, q, box) })
}

func completeIdempotency(ctx context.Context, q querier, box xaalis.SecretBox, s xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	body, err := sealAnswer(ctx, q, box, s, r)
	if err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, `UPDATE idempotency_keys SET state = 'done', locked_until = 0, response_status = ?,
		response_content_type = ?, response_location = ?, response_body = ?
		WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		r.Status, r.ContentType, r.Location, body, s.MerchantID, s.Mode, s.KeyType, s.Key, token)
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
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		return completeIdempotency(ctx, xtx.(*Tx).tx, xtx.(*Tx).box, sc, token, r)
	})
}

// CompleteIdempotency stores the response of a claim with the command.
//
// The command's own unwritten claim is written now, done, with its
// answer: one INSERT for the key of a command done in one transaction.
func (t *Tx) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	c := t.unwritten
	if c == nil || c.Scope != sc || c.Token != token {
		return completeIdempotency(ctx, t.tx, t.box, sc, token, r)
	}
	body, err := sealAnswer(ctx, t.tx, t.box, sc, r)
	if err != nil {
		return err // the claim is still unwritten: claimFailed looks for the key
	}
	made, err := insertClaim(ctx, t.tx, *c, &r, body)
	switch {
	case err != nil:
		return err
	case !made:
		err = xaalis.ErrClaimRace
	}
	t.unwritten = nil
	return err
}

// ReleaseIdempotency forgets a claim still held by token.
func (s *Store) ReleaseIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(ctx, `DELETE FROM idempotency_keys
			WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ? AND token = ? AND state = 'in_flight'`,
			sc.MerchantID, sc.Mode, sc.KeyType, sc.Key, token)
		if err != nil {
			return fmt.Errorf("release idempotency key: %w", err)
		}
		return nil
	})
}

// PurgeIdempotency deletes expired keys and old quota and rate windows.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ? AND locked_until <= ?`,
			micros(now), micros(now))
		if err != nil {
			return fmt.Errorf("purge idempotency keys: %w", err)
		}
		n, _ = res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_quota WHERE window_start < ?`,
			micros(now.Add(-xaalis.IdempotencyTTL))); err != nil {
			return fmt.Errorf("purge idempotency quota: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_counters WHERE window_start < ?`,
			micros(now.Add(-xaalis.IdempotencyTTL))); err != nil {
			return fmt.Errorf("purge rate counters: %w", err)
		}
		// Hold counters ('h:' scopes, by minute) older than a day hold nothing.
		if _, err := tx.ExecContext(ctx, `DELETE FROM volume_counters WHERE scope >= 'h:' AND scope < 'h;' AND day < ?`,
			xaalis.HoldMinute(now.Add(-xaalis.IdempotencyTTL))); err != nil {
			return fmt.Errorf("purge hold counters: %w", err)
		}
		return nil
	})
	return n, err
}
