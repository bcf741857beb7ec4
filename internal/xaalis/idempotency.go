package xaalis

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// Idempotency limits of the specification.
const (
	IdempotencyKeyMaxLen = 255
	IdempotencyTTL       = 24 * time.Hour
)

// IdempotencyScope names one key: keys are scoped to a merchant and mode,
// so two merchants (or one merchant's test and live traffic) never collide.
type IdempotencyScope struct {
	MerchantID string
	Mode       Mode
	Key        string
}

// StoredResponse is a response kept for replay, byte for byte.
type StoredResponse struct {
	Status      int
	ContentType string
	Location    string
	Body        []byte
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
	// Lease is how long the claim stays exclusive without completion. An
	// expired lease means the holder died before its action committed
	// (completion commits with the action), so a retry may run it.
	Lease time.Duration
	// QuotaLimit new keys per QuotaWindow per merchant and mode; 0 is no
	// quota.
	QuotaLimit  int
	QuotaWindow time.Duration
}

// ClaimResult is the answer to a Claim.
type ClaimResult struct {
	Outcome    ClaimOutcome
	Response   *StoredResponse // ClaimReplay
	RetryAfter time.Duration   // ClaimQuotaExceeded
}

// ErrClaimLost is returned by completion when the claim no longer belongs
// to the caller; the transaction that tried to complete it must roll back.
var ErrClaimLost = Errorf(EIdempotencyConflict, "The idempotency key was taken over by another request.")

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
