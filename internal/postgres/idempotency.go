package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// epoch is locked_until of a completed key: never held.
var epoch = time.Unix(0, 0).UTC()

// claimAttempts bounds the read-then-insert loop of a claim. Each retry
// means another claimer's row came and went between the two statements,
// so two rounds suffice in practice.
const claimAttempts = 5

// IdempotencyKey reads a key's row without writing or locking.
func (s *Store) IdempotencyKey(ctx context.Context, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	return readKey(ctx, s.pool, s.box, sc, "")
}

// idemColumns are an Idempotency-Key's columns (ik) and its owner's
// heartbeat (si), as idemRow receives them.
const idemColumns = `ik.fingerprint, ik.state, ik.locked_until, ik.expires_at, ik.response_status,
	ik.response_content_type, ik.response_location, ik.response_body, ik.token, ik.instance_id, si.heartbeat_at`

// idemRow receives idemColumns: all NULL when a LEFT JOIN found no key.
type idemRow struct {
	state, token, ctype, loc, owner   *string
	lockedUntil, expiresAt, heartbeat *time.Time
	status                            *int
	fingerprint, body                 []byte
}

func (r *idemRow) dest() []any {
	return []any{&r.fingerprint, &r.state, &r.lockedUntil, &r.expiresAt, &r.status, &r.ctype, &r.loc, &r.body,
		&r.token, &r.owner, &r.heartbeat}
}

// record returns the key the row holds, nil when it holds none; a sealed
// stored answer is opened with box.
func (r *idemRow) record(box xaalis.SecretBox, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	if r.state == nil { // state is NOT NULL: the join found no key
		return nil, nil
	}
	rec := &xaalis.IdempotencyRecord{Fingerprint: r.fingerprint, Token: deref(r.token), Owner: deref(r.owner),
		LockedUntil: r.lockedUntil.UTC(), ExpiresAt: r.expiresAt.UTC(), OwnerHeartbeat: utcPtr(r.heartbeat)}
	if rec.Done = *r.state == "done"; rec.Done {
		body, err := openAnswer(box, sc, r.body)
		if err != nil {
			return nil, err
		}
		rec.Response = &xaalis.StoredResponse{ContentType: deref(r.ctype), Location: deref(r.loc), Body: body}
		if r.status != nil {
			rec.Response.Status = *r.status
		}
	}
	return rec, nil
}

// readKey reads a key's row; a sealed stored answer is opened with box.
func readKey(ctx context.Context, q querier, box xaalis.SecretBox, sc xaalis.IdempotencyScope, lock string) (*xaalis.IdempotencyRecord, error) {
	// The owner's heartbeat comes with the key: whether its holder still
	// runs is decided from this one read.
	var r idemRow
	err := q.QueryRow(ctx, `SELECT `+idemColumns+`
		FROM idempotency_keys ik LEFT JOIN server_instances si ON si.id = ik.instance_id
		WHERE ik.merchant_id = $1 AND ik.mode = $2 AND ik.key_type = $3 AND ik.key = $4`+lock,
		sc.MerchantID, sc.Mode, sc.KeyType, sc.Key).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
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
		out, err = xtx.ClaimIdempotency(ctx, c)
		return err
	})
	if r := (*xaalis.ClaimRefused)(nil); errors.As(err, &r) {
		return r.Result, nil // rolled back: a refused key does not count
	}
	return out, err
}

// quotaShardFrom is the smallest quota counted in shards. A quota in
// shards is exact for keys claimed one after the other; keys claimed at
// the same moment each see the others' shards as last committed, so the
// last keys of a window may pass it by as many as the transactions in
// flight together (at most the connections of every process: a few dozen
// against a quota of thousands). A smaller quota has one row, exact
// under any concurrency: its transactions take turns.
const quotaShardFrom = 1024

// quotaShard is the shard a new key counts in: its transaction's
// connection's (connShard), as for the other hot rows, so that two keys
// claimed at once by one process never wait for each other's shard. (A
// shard by the key's hash made one in sixteen pairs of concurrent claims
// wait for a whole COMMIT's fsync.)
func (t *Tx) quotaShard(c xaalis.Claim) int16 {
	if c.QuotaLimit < quotaShardFrom {
		return 0
	}
	return t.tx.shard
}

// The SQLSTATEs xaalis_raise raises (migration 00013) to stop a COMMIT.
const (
	quotaExceededCode = "XQ001"
	claimLostCode     = "XQ002"
	// claimRaceCode: an Unseen key written at the end of its command found
	// another request's row (Tx.unwritten).
	claimRaceCode = "XQ004"
	// overdrawnCode: a checked debit of a merchant's available money
	// (ledger.go); the message is "<balance> <account> <currency>".
	overdrawnCode = "XQ003"
)

// commitRefusal turns the commit of a transaction whose new key went past
// the quota into the claim's refusal, one whose claim was lost into
// ErrClaimLost, a checked debit that would overdraw into
// insufficient_balance, and a queued transaction whose merchant_ref was
// taken meanwhile into ErrDuplicateMerchantRef.
func (t *Tx) commitRefusal(err error) error {
	pe := (*pgconn.PgError)(nil)
	switch {
	case !errors.As(err, &pe):
		return nil
	case pe.Code == quotaExceededCode:
		return &xaalis.ClaimRefused{Result: xaalis.ClaimResult{Outcome: xaalis.ClaimQuotaExceeded, RetryAfter: t.quotaRetry}}
	case pe.Code == claimLostCode:
		return xaalis.ErrClaimLost
	case pe.Code == claimRaceCode:
		return xaalis.ErrClaimRace
	case pe.Code == overdrawnCode:
		return t.tx.overdrawn(pe)
	case pe.Code == "23505" && pe.ConstraintName == merchantRefIndex:
		// A queued InsertTransaction whose merchant_ref a concurrent
		// transaction took.
		return xaalis.ErrDuplicateMerchantRef
	case pe.Code == "23514" && pe.ConstraintName == nonNegativeCheck:
		return fmt.Errorf("%w: %s", ledger.ErrNegative, pe.Message)
	}
	return nil
}

// ClaimIdempotency claims a key inside the command's transaction.
//
// A key the request found absent (Unseen) is written at the end of the
// command, once, in the round trip of its COMMIT: with its answer when the
// command completes it (CompleteIdempotency), in flight otherwise
// (writeClaim, which Update queues before the COMMIT). Its INSERT raises
// claimRaceCode when another request's row is there (a request that is
// still in its transaction is waited for), and the command fails with
// ErrClaimRace, having done nothing. The claim at the start costs a
// statement and a round trip of its own, the answer's UPDATE another
// statement; so does any other key, below.
//
// The key's row is read FOR UPDATE, so claimers of an existing key take
// turns. A new key is inserted ON CONFLICT DO NOTHING: when two claimers
// insert the same new key, the second waits for the first's transaction
// to end, finds the conflict, and reads the row again, which it then
// answers as in flight, replay or conflict. On ClaimQuotaExceeded the
// count was taken: the caller rolls back.
func (t *Tx) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	tx := t.tx
	if c.Unseen {
		t.countKey(c)
		t.unwritten = &c
		return xaalis.ClaimResult{Outcome: xaalis.ClaimAcquired}, nil
	}
	for range claimAttempts {
		// The insert first: a new key (the common case, the request having
		// found none) costs no read. A conflict waits for the transaction
		// that holds the key to end, then the row answers.
		sql, args := claimInsert(c, nil, nil)
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			return xaalis.ClaimResult{}, fmt.Errorf("insert idempotency key: %w", err)
		}
		if tag.RowsAffected() == 1 {
			t.countKey(c)
			return xaalis.ClaimResult{Outcome: xaalis.ClaimAcquired}, nil
		}
		// OF k: the owner's instance row, joined, stays free for its
		// heartbeats.
		rec, err := readKey(ctx, tx, t.box, c.Scope, " FOR UPDATE OF ik")
		if errors.Is(err, xaalis.ErrNotFound) {
			continue // the holder rolled back between the two statements
		}
		if err != nil {
			return xaalis.ClaimResult{}, err
		}
		out := rec.Outcome(c)
		switch {
		case out.Outcome != xaalis.ClaimAcquired:
			return out, nil
		case !rec.ExpiresAt.After(c.Now.Truncate(time.Microsecond)):
			// Past its 24 hours the key is forgotten and may be used anew.
			if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND mode = $2 AND key_type = $3 AND key = $4`,
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key); err != nil {
				return xaalis.ClaimResult{}, fmt.Errorf("delete expired idempotency key: %w", err)
			}
		default:
			// The holder is gone before its action committed: take the key
			// over. The command then resumes from its last committed step.
			if _, err := tx.Exec(ctx, `UPDATE idempotency_keys SET token = $1, locked_until = $2, instance_id = $7
				WHERE merchant_id = $3 AND mode = $4 AND key_type = $5 AND key = $6`, c.Token, c.Now.Add(c.Lease),
				c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key, nullString(c.Instance)); err != nil {
				return xaalis.ClaimResult{}, fmt.Errorf("take over idempotency key: %w", err)
			}
			return out, nil
		}
	}
	return xaalis.ClaimResult{}, errors.New("claim idempotency key: the key keeps changing under concurrent claims")
}

// countKey counts the key c makes against the quota (only a key the
// claim makes counts), at COMMIT, its row being hot: past the limit the
// statement raises quotaExceededCode and the transaction rolls back,
// answered as ClaimQuotaExceeded (commitRefusal). An Unseen key's own
// INSERT goes ahead of the count in the COMMIT's round trip, so a key that
// exists meanwhile answers as itself, not 429.
func (t *Tx) countKey(c xaalis.Claim) {
	if c.QuotaLimit <= 0 {
		return
	}
	start := xaalis.QuotaWindowStart(c.Now, c.QuotaWindow)
	t.quotaRetry = start.Add(c.QuotaWindow).Sub(c.Now)
	t.tx.addQuota(quotaCount{merchant: c.Scope.MerchantID, mode: string(c.Scope.Mode),
		keyType: string(c.Scope.KeyType), start: start, limit: int64(c.QuotaLimit), shard: t.quotaShard(c), n: 1})
}

// writeUnwritten queues the INSERT of the command's Unseen key: done with
// the answer done (its body already sealed if need be), or in flight for
// the claim's lease when done is nil. The statement raises claimRaceCode,
// failing the COMMIT, when the key exists. The claim stays t.unwritten
// until the commit: a command failing before then still looks for the
// key (claimFailed).
func (t *Tx) writeUnwritten(done *xaalis.StoredResponse, body []byte) {
	t.claimQueued = true
	_, args := claimInsert(*t.unwritten, done, body)
	t.tx.queued = append(t.tx.queued, insertUnseenKeyRows.one("insert idempotency key", args...))
}

// claimInsert is the INSERT of c's key: done with the answer done (its
// body already sealed if need be), or in flight for c's lease when done
// is nil. A key that exists is left as it is.
func claimInsert(c xaalis.Claim, done *xaalis.StoredResponse, body []byte) (string, []any) {
	state, lockedUntil := "in_flight", c.Now.Add(c.Lease)
	var status, ctype, loc any
	if done != nil {
		state, lockedUntil = "done", epoch
		status, ctype, loc = done.Status, done.ContentType, done.Location
	}
	return claimInsertHead + ` VALUES ` + claimInsertRow + ` ` + claimInsertTail,
		[]any{c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key, c.Fingerprint, c.Token, state, lockedUntil,
			c.Now, c.Now.Add(xaalis.IdempotencyTTL), nullString(c.Instance), status, ctype, loc, body}
}

const (
	claimInsertHead = `INSERT INTO idempotency_keys (merchant_id, mode, key_type, key, fingerprint, token, state, locked_until,
		created_at, expires_at, instance_id, response_status, response_content_type, response_location, response_body)`
	claimInsertRow  = `($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`
	claimInsertTail = `ON CONFLICT (merchant_id, mode, key_type, key) DO NOTHING`
)

// insertUnseenKeyRows inserts Unseen keys (writeUnwritten), raising
// claimRaceCode when one exists.
var insertUnseenKeyRows = func() *valuesRows {
	v := newValuesRows(claimInsertHead, claimInsertRow, claimInsertTail)
	v.raise, v.message = claimRaceCode, "idempotency key claimed meanwhile"
	return v
}()

// orRaise makes a data-modifying statement (without RETURNING) raise code
// with message when it changed no row: sent with the COMMIT, it stops the
// commit server-side.
func orRaise(stmt, code, message string) string {
	return `WITH w AS (` + stmt + ` RETURNING 1)
		SELECT CASE WHEN count(*) = 0 THEN xaalis_raise('` + code + `', '` + message + `') ELSE 0 END FROM w`
}

// writeClaim queues the command's claim that is still unwritten, in
// flight: the command ends without its answer (a live payment waits for
// its provider).
func (t *Tx) writeClaim() {
	if t.unwritten != nil && !t.claimQueued {
		t.writeUnwritten(nil, nil)
	}
}

// claimFailed returns the error of a command that failed with err: an
// Unseen key another request took meanwhile makes it ErrClaimRace. The
// command may have failed because that request did its work (its
// merchant_ref is taken now, its refund used the amount up): the request
// answers from the key's row, as a claim at the start would have. The
// transaction is rolled back first, and the key looked for on the same
// connection (a second one from the pool could wait for ever, every
// connection held by a command doing the same).
func (t *Tx) claimFailed(ctx context.Context, err error) error {
	c := t.unwritten
	if c == nil || errors.Is(err, xaalis.ErrClaimRace) || isUnavailable(err) {
		return err
	}
	t.unwritten = nil
	t.tx.rollback(ctx)
	var one int
	switch perr := t.tx.c.QueryRow(ctx, `SELECT 1 FROM idempotency_keys
		WHERE merchant_id = $1 AND mode = $2 AND key_type = $3 AND key = $4`,
		c.Scope.MerchantID, c.Scope.Mode, c.Scope.KeyType, c.Scope.Key).Scan(&one); {
	case perr == nil:
		return xaalis.ErrClaimRace
	case errors.Is(perr, pgx.ErrNoRows):
		return err
	default:
		return errors.Join(err, fmt.Errorf("read idempotency key: %w", perr))
	}
}

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

// completion is the statement that stores a claim's answer; its tag
// says whether the claim was still the caller's.
func completion(ctx context.Context, q querier, box xaalis.SecretBox, s xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) (string, []any, error) {
	body, err := sealAnswer(ctx, q, box, s, r)
	if err != nil {
		return "", nil, err
	}
	return `UPDATE idempotency_keys SET state = 'done', locked_until = $1, response_status = $2,
		response_content_type = $3, response_location = $4, response_body = $5
		WHERE merchant_id = $6 AND mode = $7 AND key_type = $8 AND key = $9 AND token = $10 AND state = 'in_flight'`,
		[]any{epoch, r.Status, r.ContentType, r.Location, body, s.MerchantID, s.Mode, s.KeyType, s.Key, token}, nil
}

// sealAnswer returns the body to store of an answer: sealed when it shows
// a secret.
func sealAnswer(ctx context.Context, q querier, box xaalis.SecretBox, s xaalis.IdempotencyScope, r xaalis.StoredResponse) ([]byte, error) {
	return xaalis.SealAnswer(box, s, r, func() (string, error) { return currentSecretKey(ctx, q, box) })
}

// claimKept fails a completion that found its claim gone.
func claimKept(tag pgconn.CommandTag) error {
	if tag.RowsAffected() == 0 {
		return xaalis.ErrClaimLost
	}
	return nil
}

// CompleteIdempotency stores the response of a claim in its own transaction.
func (s *Store) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	sql, args, err := completion(ctx, s.pool, s.box, sc, token, r)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return claimKept(tag)
}

// CompleteIdempotency stores the response of a claim with the command: it
// goes with the COMMIT, and a claim found lost fails the commit.
//
// The command's own unwritten claim is written now, done, with its
// answer: one INSERT for the key of a command done in one transaction.
func (t *Tx) CompleteIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	if c := t.unwritten; c != nil && !t.claimQueued && c.Scope == sc && c.Token == token {
		body, err := sealAnswer(ctx, t.tx, t.box, sc, r)
		if err != nil {
			return err // the claim is still unwritten: claimFailed looks for the key
		}
		t.writeUnwritten(&r, body)
		return nil
	}
	sql, args, err := completion(ctx, t.tx, t.box, sc, token, r)
	if err != nil {
		return err
	}
	// Sent with the COMMIT: a claim found lost must stop it server-side.
	t.tx.later("complete idempotency key", orRaise(sql, claimLostCode, "idempotency claim lost"), args...)
	return nil
}

// ReleaseIdempotency forgets a claim still held by token.
func (s *Store) ReleaseIdempotency(ctx context.Context, sc xaalis.IdempotencyScope, token string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys
		WHERE merchant_id = $1 AND mode = $2 AND key_type = $3 AND key = $4 AND token = $5 AND state = 'in_flight'`,
		sc.MerchantID, sc.Mode, sc.KeyType, sc.Key, token)
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
	if _, err := s.pool.Exec(ctx, `DELETE FROM rate_counters WHERE window_start < $1`,
		now.Add(-xaalis.IdempotencyTTL)); err != nil {
		return n, fmt.Errorf("purge rate counters: %w", err)
	}
	// Hold counters ('h:' scopes, by minute) older than a day hold nothing.
	if _, err := s.pool.Exec(ctx, `DELETE FROM volume_counters WHERE scope >= 'h:' AND scope < 'h;' AND day < $1`,
		xaalis.HoldMinute(now.Add(-xaalis.IdempotencyTTL))); err != nil {
		return n, fmt.Errorf("purge hold counters: %w", err)
	}
	return n, nil
}
