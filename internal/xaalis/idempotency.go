package xaalis

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"
)

// Idempotency limits of the specification.
const (
	IdempotencyKeyMaxLen = 255
	IdempotencyTTL       = 24 * time.Hour
)

// IdempotencyScope names one key: keys are scoped to a merchant, mode and
// key type, so two merchants (or one merchant's test and live traffic, or
// its server and its public checkout) never collide. A publishable key
// that replays a secret key's Idempotency-Key and body therefore runs as a
// new request and never gets the secret key's stored answer.
type IdempotencyScope struct {
	MerchantID string
	Mode       Mode
	KeyType    KeyType
	Key        string
}

// StoredResponse is a response kept for replay, byte for byte.
type StoredResponse struct {
	Status      int
	ContentType string
	Location    string
	Body        []byte
	// Secret: the body shows a secret (a new webhook endpoint's); the
	// store keeps it sealed (SecretBox) and opens it for the replay.
	Secret bool
}

// Fingerprint is the SHA-256 of method, path, query and body. Each part is
// length-prefixed so that no two different requests share a fingerprint
// by moving bytes from one part to the next.
func Fingerprint(method, path, query string, body []byte) []byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), []byte(query), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// ClaimOutcome is what claiming an idempotency key found.
type ClaimOutcome int

// Claim outcomes.
const (
	// ClaimAcquired: the caller holds the key and runs the action.
	ClaimAcquired ClaimOutcome = iota + 1
	// ClaimReplay: the key completed with the same fingerprint; replay.
	ClaimReplay
	// ClaimConflict: the key was used with another fingerprint.
	ClaimConflict
	// ClaimInFlight: another request holds the key right now.
	ClaimInFlight
	// ClaimQuotaExceeded: the merchant made too many new keys this window.
	ClaimQuotaExceeded
)

// Claim asks to hold a key for one request.
type Claim struct {
	Scope       IdempotencyScope
	Fingerprint []byte
	// Token identifies this holder; completion must present it, so a
	// holder whose lease was taken over can never commit its action.
	Token string
	Now   time.Time
	// Instance is the server instance that claims (InstanceID): the claim
	// is in flight while that instance lives. "" for a claimant that runs
	// no instance, whose claim is in flight for Lease instead.
	Instance string
	// OwnerStale is how old an owner's heartbeat may be before the owner
	// counts as gone (0: an owner with a row is alive).
	OwnerStale time.Duration
	// Running reports whether a request of the claimant's own instance
	// runs the claim with a token; nil: assume it does. A claim of this
	// instance that none of its requests runs was left behind (its
	// release failed) and is taken over at once.
	Running func(token string) bool
	// Lease is how long the claim of a claimant without an instance stays
	// exclusive without completion. An expired lease means the holder died
	// before its action committed (completion commits with the action),
	// so a retry may run it.
	Lease time.Duration
	// QuotaLimit new keys per QuotaWindow per merchant, mode and key type
	// (publishable keys have a quota of their own); 0 is no quota.
	QuotaLimit  int
	QuotaWindow time.Duration
	// Unseen: the request's first look found no row for the key. A store
	// may then write the claim at the end of the command's transaction
	// instead of at its start (both do: a command completed in one
	// transaction writes its key once, with its answer), and answers
	// ErrClaimRace when another request took the key in between.
	Unseen bool
}

// ErrClaimRace is a command's error when the Idempotency-Key its request
// found absent (Claim.Unseen) was claimed by another request before the
// command's transaction wrote it. The command rolled back, having done
// nothing; the request answers from the key's row (App.update does).
var ErrClaimRace = errors.New("idempotency key claimed by a concurrent request")

// ClaimResult is the answer to a Claim.
type ClaimResult struct {
	Outcome    ClaimOutcome
	Response   *StoredResponse // ClaimReplay
	RetryAfter time.Duration   // ClaimQuotaExceeded
}

// IdempotencyRecord is a key's row as stored.
type IdempotencyRecord struct {
	Fingerprint []byte
	// Done: the response is stored; else a request holds the key.
	Done     bool
	Response *StoredResponse
	// Token is the holder's; Owner the instance it runs in ("": none, the
	// claim then holds until LockedUntil).
	Token       string
	Owner       string
	LockedUntil time.Time
	// OwnerHeartbeat is the owner's last heartbeat; nil when its row is
	// gone (it shut down, or was found dead).
	OwnerHeartbeat *time.Time
	ExpiresAt      time.Time
}

// Outcome is what the key answers a claim: ClaimAcquired when the key is
// free for it (expired, or its holder is gone before its action
// committed), else replay, conflict or in flight. Both stores decide
// with it.
func (r *IdempotencyRecord) Outcome(c Claim) ClaimResult {
	// Stored times have microseconds; compare at that precision.
	now := c.Now.Truncate(time.Microsecond)
	switch {
	case !r.ExpiresAt.After(now):
		return ClaimResult{Outcome: ClaimAcquired}
	case !bytes.Equal(r.Fingerprint, c.Fingerprint):
		return ClaimResult{Outcome: ClaimConflict}
	case r.Done:
		return ClaimResult{Outcome: ClaimReplay, Response: r.Response}
	case r.held(c, now):
		return ClaimResult{Outcome: ClaimInFlight}
	}
	return ClaimResult{Outcome: ClaimAcquired}
}

// held reports whether the holder of an unfinished claim may still be
// running it: its instance lives (a row, a recent heartbeat) and, when it
// is the claimant's own instance, one of its requests runs the token. A
// claim without an owner holds for its lease.
func (r *IdempotencyRecord) held(c Claim, now time.Time) bool {
	switch {
	case r.Owner == "":
		return r.LockedUntil.After(now)
	case r.OwnerHeartbeat == nil:
		return false // shut down, or removed as dead
	case c.OwnerStale > 0 && !r.OwnerHeartbeat.After(now.Add(-c.OwnerStale)):
		return false // silent for three heartbeats: dead
	case r.Owner == c.Instance && c.Running != nil:
		return c.Running(r.Token)
	}
	return true
}

// ClaimRefused is the error of a command whose transaction found its
// Idempotency-Key taken: the request answers Result (a replay, a
// conflict, in flight, or the quota), and the command did nothing.
type ClaimRefused struct{ Result ClaimResult }

func (e *ClaimRefused) Error() string { return "idempotency key refused" }

// PendingClaim is a request's Idempotency-Key, to be claimed inside the
// first transaction of its command (App.update), so that the claim, the
// command's writes and, for a command done in one transaction, its stored
// answer commit together: one durable commit.
type PendingClaim struct {
	Claim Claim
	taken bool
}

// Taken reports whether the claim committed.
func (p *PendingClaim) Taken() bool { return p.taken }

type pendingClaimKey struct{}

// WithPendingClaim returns ctx carrying p.
func WithPendingClaim(ctx context.Context, p *PendingClaim) context.Context {
	return context.WithValue(ctx, pendingClaimKey{}, p)
}

func pendingClaim(ctx context.Context) *PendingClaim {
	p, _ := ctx.Value(pendingClaimKey{}).(*PendingClaim)
	return p
}

// update runs fn in a write transaction; the first one of a request whose
// Idempotency-Key is still to be claimed claims it first, in the same
// transaction. A key found taken refuses the command with *ClaimRefused
// before fn runs. A merchant_ref that a concurrent command took is a
// validation_error wherever the store tells it: at the insert (SQLite),
// or with a later statement or the COMMIT (PostgreSQL queues the insert).
func (a *App) update(ctx context.Context, fn func(Tx) error) error {
	err := a.updateOnce(ctx, fn)
	if errors.Is(err, ErrDuplicateMerchantRef) {
		return merchantRefTaken()
	}
	return err
}

// merchantRefTaken is the validation_error of a new payment or payout
// whose merchant_ref another record of the merchant holds in that mode.
func merchantRefTaken() *Error {
	return &Error{Code: EValidation, Fields: ValidationErrors{"merchant_ref": {"is already used"}}}
}

func (a *App) updateOnce(ctx context.Context, fn func(Tx) error) error {
	p := pendingClaim(ctx)
	if p == nil || p.taken {
		return a.Store.Update(ctx, fn)
	}
	err := a.Store.Update(ctx, func(tx Tx) error {
		res, err := tx.ClaimIdempotency(ctx, p.Claim)
		if err != nil {
			return err
		}
		if res.Outcome != ClaimAcquired {
			return &ClaimRefused{Result: res}
		}
		return fn(tx)
	})
	if err == nil {
		p.taken = true
	}
	if errors.Is(err, ErrClaimRace) {
		return a.claimRaced(ctx, p.Claim)
	}
	return err
}

// claimRaced answers a command whose key another request claimed between
// the request's first look and the command's write (ErrClaimRace): from
// the key's row, as a claim that found it at the start would have. A key
// free again by now (its holder released it, or is gone) answers in
// flight: nothing was done, and a retry runs.
func (a *App) claimRaced(ctx context.Context, c Claim) error {
	res := ClaimResult{Outcome: ClaimInFlight}
	rec, err := a.Store.IdempotencyKey(ctx, c.Scope)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		if out := rec.Outcome(c); out.Outcome != ClaimAcquired {
			res = out
		}
	}
	return &ClaimRefused{Result: res}
}

// StoreAnswer keeps the answer of a request that changed nothing (a
// validation error, a refusal) under its Idempotency-Key, claiming the
// key and completing it in one transaction. A key taken meanwhile (a
// concurrent request) keeps its own answer; a key past its quota is not
// stored.
func (a *App) StoreAnswer(ctx context.Context, c Claim, r StoredResponse) error {
	err := a.Store.Update(ctx, func(tx Tx) error {
		res, err := tx.ClaimIdempotency(ctx, c)
		if err != nil {
			return err
		}
		if res.Outcome != ClaimAcquired {
			return errNotStored
		}
		return tx.CompleteIdempotency(ctx, c.Scope, c.Token, r)
	})
	// A key past the quota found at the commit (PostgreSQL counts it
	// there) is not stored either.
	if r := (*ClaimRefused)(nil); errors.Is(err, errNotStored) || errors.Is(err, ErrClaimRace) || errors.As(err, &r) {
		return nil
	}
	return err
}

var errNotStored = errors.New("answer not stored")

// ErrClaimLost is returned by completion when the claim no longer belongs
// to the caller; the transaction that tried to complete it must roll back.
// It carries Retry-After (1 s), as an in-flight conflict does: the same
// request sent again gets the answer of the one that took the key over.
var ErrClaimLost = func() *Error {
	e := Errorf(EIdempotencyConflict, "The idempotency key was taken over by another request.")
	e.RetryAfter = time.Second
	return e
}()

// QuotaWindowStart is the start of the fixed window holding t.
func QuotaWindowStart(t time.Time, window time.Duration) time.Time {
	return t.Truncate(window)
}

// CommitHook, carried by a request's context, runs inside the transaction
// of the command it wraps, just before commit, with the command's result.
// The HTTP layer uses it to store the idempotent response in the same
// transaction as the action: both commit, or neither does.
type CommitHook func(ctx context.Context, tx Tx, result any) error

type commitHookKey struct{}

// WithCommitHook returns ctx carrying h.
func WithCommitHook(ctx context.Context, h CommitHook) context.Context {
	return context.WithValue(ctx, commitHookKey{}, h)
}

// RunCommitHook runs the hook of ctx, if any. Commands call it last in
// their transaction.
func RunCommitHook(ctx context.Context, tx Tx, result any) error {
	if h, ok := ctx.Value(commitHookKey{}).(CommitHook); ok && h != nil {
		return h(ctx, tx, result)
	}
	return nil
}

// keyedBefore decides what old, a payout or refund found under the
// Idempotency-Key of a new request, means for it (same: old is that
// request's record). The same request, at any age, ran before without its
// answer stored (a 5xx, a stopped process, a client retrying long after):
// resume it, so that a late retry never moves money twice. Another request
// within IdempotencyTTL is the key used twice: idempotency_conflict. Past
// it, the key names a new request, as the idempotency layer, which keeps
// keys that long, already took it: old lets go of it. A payout or a refund
// under a key of the day before answered the old record, and the new one
// was never made.
func (a *App) keyedBefore(ctx context.Context, tx Tx, old *Transaction, same bool) (resume bool, err error) {
	if same {
		return true, nil
	}
	if !a.now().Before(old.CreatedAt.Add(IdempotencyTTL)) {
		return false, tx.ForgetTransactionKey(ctx, old.ID)
	}
	return false, E(EIdempotencyConflict)
}
