package xaalis

import (
	"context"
	"errors"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
)

// Store is the persistence the domain needs. Two adapters implement it,
// internal/sqlite and internal/postgres, and internal/storetest holds the
// conformance suite both must pass.
//
// Reads return ErrNotFound (not_found) for a missing row. Every write
// happens inside Update, so one command is one database transaction.
type Store interface {
	WebhookStore
	MarketStore
	OpsStore
	InstanceStore

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
	Close() error

	// Subscribe returns a channel that receives after commits that made
	// work of a kind in w due (Tx.Wake), in any process sharing the
	// database where the backend can tell (PostgreSQL's NOTIFY), else in
	// this one. Loops still poll: a wake-up only makes them early.
	Subscribe(w Wakeup) <-chan struct{}

	// Pepper returns the installation's key-hashing secret, made on first
	// use and never changed.
	Pepper(ctx context.Context) ([]byte, error)

	// Update runs fn in one write transaction, committed when fn returns
	// nil and rolled back otherwise. It returns once the commit is
	// durable. When ctx is marked Rerunnable, a store may run fn in a
	// transaction shared with other commands, at the same time as theirs,
	// and, when that transaction rolls back, run it again in one of its
	// own.
	Update(ctx context.Context, fn func(tx Tx) error) error

	// Durable returns once the writes a read may have seen are durable:
	// when ctx carries a ReadMark (WithReadMark), those its reads saw;
	// else every write committed before the call. A read may see a
	// commit before it is durable (SQLite's writer goes on while the WAL
	// is synced), so whatever leaves the process after a read (an HTTP
	// answer, a streamed event) waits here first; what Update did is
	// durable when it returns. It fails with service_unavailable when the
	// database could not make a write durable, or with ctx's error.
	// PostgreSQL's commits are durable before any read can see them.
	Durable(ctx context.Context) error

	Merchant(ctx context.Context, id string) (*Merchant, error)
	// Key returns a key by id.
	Key(ctx context.Context, id string) (*Key, error)
	// KeyByHash returns a key and its merchant in one read: the hot path of
	// authentication. When idemKey is not empty, the same read returns the
	// Idempotency-Key idemKey of the key's merchant, mode and key type, or
	// nil when there is none: a replay then costs one read, and a new key
	// one read fewer before its transaction.
	KeyByHash(ctx context.Context, hash []byte, idemKey string) (*Key, *Merchant, *IdempotencyRecord, error)

	// Plan returns a plan of the merchant in either mode; callers compare
	// its mode with the key's.
	Plan(ctx context.Context, merchantID, id string) (*Plan, error)
	Plans(ctx context.Context, f PlanFilter, page PageRequest) ([]*Plan, int, error)

	// Transaction returns one of the merchant's transactions by id.
	Transaction(ctx context.Context, merchantID, id string) (*Transaction, error)
	// LookupTransactions returns the merchant's transactions whose id,
	// reference or merchant_ref is key, in both modes.
	LookupTransactions(ctx context.Context, merchantID, key string) ([]*Transaction, error)
	// TransactionByProviderRef finds a transaction from a provider's id.
	TransactionByProviderRef(ctx context.Context, mode Mode, provider, providerRef string) (*Transaction, error)
	// TransactionByReference finds a transaction of a provider by its TXN-
	// reference, in a mode.
	TransactionByReference(ctx context.Context, mode Mode, provider, reference string) (*Transaction, error)
	// Transactions lists one page, newest first, and the total.
	Transactions(ctx context.Context, f TxFilter, page PageRequest) ([]*Transaction, int, error)
	// DueTransactions returns up to limit transactions of any merchant
	// with background work: open payments expired at now (Expired),
	// pending payments not polled since Before (Reconcile), closed
	// payments whose late poll is due at now (LatePoll), payouts and
	// refunds to send or ask about (Dispatch).
	DueTransactions(ctx context.Context, q DueQuery) ([]*Transaction, error)
	// Volume sums the limit amounts of counted payments in a scope created
	// on or after Since's UTC day, from the running volume counters, plus
	// the hold counters of the pending payments created from
	// FirstHoldMinute on.
	Volume(ctx context.Context, q VolumeQuery) (int64, error)
	// Volumes is Volume of several queries in one round trip.
	Volumes(ctx context.Context, qs []VolumeQuery) ([]int64, error)
	// Customer returns one of the merchant's customers.
	Customer(ctx context.Context, merchantID, id string) (*Customer, error)
	// Events returns the events of an object in order.
	Events(ctx context.Context, objectID string) ([]*Event, error)
	// OperatorTokenByHash finds an operator token.
	OperatorTokenByHash(ctx context.Context, hash []byte) (*OperatorToken, error)
	// OperatorTokens lists every operator token, newest first.
	OperatorTokens(ctx context.Context) ([]*OperatorToken, error)
	// AuditLog lists one page of operator actions, newest first, and the
	// total.
	AuditLog(ctx context.Context, page PageRequest) ([]*AuditEntry, int, error)

	// Balances returns the cached balances of accounts in a currency (0 for
	// an account without postings) and when the newest of them changed.
	Balances(ctx context.Context, accounts []string, currency Currency) (map[string]int64, time.Time, error)
	// CheckLedger compares every cached balance with the sum of its
	// postings, every entry's sum with zero and every cached count of
	// transactions with the rows; it returns the differences.
	CheckLedger(ctx context.Context) ([]ledger.Problem, error)
	// Entries returns the ledger entries a record caused, in order.
	Entries(ctx context.Context, refID string) ([]*ledger.Entry, error)
	// PayoutRequest returns one of the merchant's payout requests by id or
	// PR- reference; merchantID "" finds any merchant's (the operator).
	PayoutRequest(ctx context.Context, merchantID, key string) (*PayoutRequest, error)
	// PayoutRequests returns the merchant's latest payout requests in a
	// mode, newest first.
	PayoutRequests(ctx context.Context, merchantID string, mode Mode, limit int) ([]*PayoutRequest, error)
	// Settlements lists completed payout requests, newest first, and the total.
	Settlements(ctx context.Context, merchantID string, mode Mode, page PageRequest) ([]*PayoutRequest, int, error)

	// IdempotencyKey reads a key's row without writing: ErrNotFound when
	// there is none.
	IdempotencyKey(ctx context.Context, s IdempotencyScope) (*IdempotencyRecord, error)
	// ClaimIdempotency claims a key for one request, in its own
	// transaction, counting new keys against the quota.
	ClaimIdempotency(ctx context.Context, c Claim) (ClaimResult, error)
	// CompleteIdempotency stores the response of a request that changed
	// nothing (an error answer). Commands complete inside their own
	// transaction through Tx.CompleteIdempotency instead.
	CompleteIdempotency(ctx context.Context, s IdempotencyScope, token string, r StoredResponse) error
	// ReleaseIdempotency forgets a claim whose request failed with a 5xx,
	// so that a retry runs again.
	ReleaseIdempotency(ctx context.Context, s IdempotencyScope, token string) error
	// SetSecretBox makes the store keep secrets sealed under box (set once,
	// before use). Without a box secrets are stored in clear, for tests of
	// other things, and a sealed one cannot be read: xaalis serve and the
	// command line always set one.
	SetSecretBox(box SecretBox)
	// SecretKeys reports the current key and which keys the stored
	// secrets are sealed under: webhook endpoint and callback secrets, and
	// with answers the stored Idempotency-Key answers that show a secret
	// (which takes a scan of them).
	SecretKeys(ctx context.Context, answers bool) (SecretKeyUsage, error)
	// UseSecretKey makes id the key new secrets are sealed under, in every
	// process on the database; the box must hold it.
	UseSecretKey(ctx context.Context, id string) error
	// ResealSecrets seals under the current key up to limit stored secrets
	// that are in clear or, unless clearOnly, under another key, in one
	// transaction, and returns how many rows it sealed (0: none is left).
	// A secret that changes meanwhile is left for the next call.
	ResealSecrets(ctx context.Context, limit int, clearOnly bool) (int, error)

	// PurgeIdempotency deletes keys expired at now, and quota and rate
	// counters whose window started more than IdempotencyTTL before it
	// (their windows are at most that long); it returns how many keys went.
	PurgeIdempotency(ctx context.Context, now time.Time) (int64, error)
}

// CommitChecks is a Tx that checks the debits of a merchant's available
// money when the transaction commits, not when they are posted: its
// Update fails with insufficient_balance (context currency, available,
// required) when one would leave the balance below zero. PostgreSQL does:
// a merchant's balance is a hot row, and a lock taken at the debit would
// be held, and make every other payout of the merchant wait, until the
// commit; taken at the commit, it is held for the commit's own round trip.
type CommitChecks interface {
	ChecksAtCommit() bool
}

// Tx is one write transaction.
type Tx interface {
	WebhookTx
	MarketTx
	OpsTx

	// Wake asks for the background work w once the transaction commits.
	Wake(w Wakeup)

	// InsertSettingOnce records a named setting unless it exists, and
	// reports whether this call inserted it. Concurrent callers in other
	// processes wait for each other, so exactly one gets true.
	InsertSettingOnce(ctx context.Context, name string, value []byte) (bool, error)
	// ClaimSetting sets the named setting to value when it is absent or
	// its value sorts before below (byte order), and reports whether this
	// call set it. Concurrent callers in other processes wait for each
	// other, so that of those that pass the same below exactly one gets
	// true.
	ClaimSetting(ctx context.Context, name string, value, below []byte) (bool, error)
	// AnyMerchant reports whether at least one merchant exists.
	AnyMerchant(ctx context.Context) (bool, error)

	CreateMerchant(ctx context.Context, m *Merchant) error
	// MerchantForUpdate reads and locks a merchant for this transaction.
	MerchantForUpdate(ctx context.Context, id string) (*Merchant, error)
	UpdateMerchant(ctx context.Context, m *Merchant) error

	CreateKey(ctx context.Context, k *Key) error
	KeyForUpdate(ctx context.Context, id string) (*Key, error)
	RevokeKey(ctx context.Context, id string, at time.Time) error

	CreatePlan(ctx context.Context, p *Plan) error
	PlanForUpdate(ctx context.Context, merchantID, id string) (*Plan, error)
	UpdatePlan(ctx context.Context, p *Plan) error

	// InsertTransaction stores a new transaction. It returns
	// ErrDuplicateMerchantRef when the merchant_ref is taken in that mode.
	InsertTransaction(ctx context.Context, t *Transaction) error
	// TransactionForUpdate reads and locks a transaction.
	TransactionForUpdate(ctx context.Context, id string) (*Transaction, error)
	// TransactionByMerchantRefForUpdate reads and locks a payment or payout
	// by merchant_ref, among those created by one kind of key: merchant_ref
	// is unique per merchant, mode and key type.
	TransactionByMerchantRefForUpdate(ctx context.Context, merchantID string, mode Mode, kt KeyType, ref string) (*Transaction, error)
	// TransactionByMerchantRefAndPayer is TransactionByMerchantRefForUpdate
	// (nil, not ErrNotFound, when there is none) and, when payer is not
	// nil, UpsertCustomer(payer), in one round trip where the store has
	// round trips: a payment's creation needs both before it writes.
	TransactionByMerchantRefAndPayer(ctx context.Context, merchantID string, mode Mode, kt KeyType, ref string, payer *Customer) (*Transaction, *Customer, error)
	UpdateTransaction(ctx context.Context, t *Transaction) error
	// UpsertCustomer returns the merchant's customer with c's phone in c's
	// mode, creating it (with c's id) when there is none; a given name
	// replaces a missing one.
	UpsertCustomer(ctx context.Context, c *Customer) (*Customer, error)
	// InsertEvent stores an event, numbering it after the object's last.
	InsertEvent(ctx context.Context, e *Event) error
	// AddVolume adds delta (minor units, may be negative) to the volume
	// counters of scopes for one day (VolumeDay).
	AddVolume(ctx context.Context, scopes []string, day int64, delta int64) error
	// NotificationFirstSeen records a provider's notification id and
	// reports whether it is new.
	NotificationFirstSeen(ctx context.Context, provider, eventID string, at time.Time) (bool, error)

	// PostEntry writes a journal entry and updates the cached balances of
	// its accounts. It returns ledger.ErrUnbalanced for an entry that does
	// not sum to zero and ledger.ErrNegative when a non-negative account
	// (ledger.NonNegative) would go below zero, or a merchant's available
	// money without the entry's leave (ledger.Entry.Overdrawn); the caller
	// rolls back. A store may make that check when the transaction commits
	// (CommitChecks): its Update then fails with insufficient_balance,
	// whose cause is ledger.ErrNegative.
	PostEntry(ctx context.Context, e *ledger.Entry) error
	// LockBalance locks an account's cached balance for this transaction
	// (creating it at zero) and returns it: concurrent transactions that
	// lock the same account wait for each other.
	LockBalance(ctx context.Context, account string, currency Currency) (int64, error)
	// RefundedAmount sums the amounts of a payment's refunds that are not
	// failed (initiated, pending, success).
	RefundedAmount(ctx context.Context, paymentID string) (int64, error)
	// SucceededRefundAmount sums the amounts of a payment's refunds that
	// succeeded: what the payer got back.
	SucceededRefundAmount(ctx context.Context, paymentID string) (int64, error)
	// TransactionByIdempotencyKey finds a payout or refund created under an
	// Idempotency-Key, locked.
	TransactionByIdempotencyKey(ctx context.Context, merchantID string, mode Mode, key string) (*Transaction, error)
	// ForgetTransactionKey lets a transaction's Idempotency-Key go (sets it
	// to none), so that a new record may take the key once it is past its
	// IdempotencyTTL. not_found for an unknown id.
	ForgetTransactionKey(ctx context.Context, id string) error
	// SetLatePoll sets when reconciliation next asks the provider about a
	// payment cancelled or expired after a provider was asked to collect
	// it (DueQuery.LatePoll); the zero time stops asking.
	SetLatePoll(ctx context.Context, id string, at time.Time) error
	// TransactionByIdempotencyKeyAndMerchantRef is TransactionByIdempotencyKey
	// (skipped when key is "") and TransactionByMerchantRefForUpdate, each
	// nil, not ErrNotFound, when there is none, in one round trip where the
	// store has round trips: a payout's creation needs both before it
	// writes.
	TransactionByIdempotencyKeyAndMerchantRef(ctx context.Context, merchantID string, mode Mode, key string, kt KeyType, ref string) (byKey, byRef *Transaction, err error)

	InsertPayoutRequest(ctx context.Context, r *PayoutRequest) error
	PayoutRequestForUpdate(ctx context.Context, id string) (*PayoutRequest, error)
	UpdatePayoutRequest(ctx context.Context, r *PayoutRequest) error
	// PayoutRequestsSince counts a merchant's payout requests of one mode
	// created at or after since and returns the oldest one's time; the
	// merchant's row is locked first so that concurrent submissions count
	// each other. ErrNotFound: no such merchant.
	PayoutRequestsSince(ctx context.Context, merchantID string, mode Mode, since time.Time) (int, time.Time, error)

	// InsertOperatorToken stores an operator token (its hash only).
	InsertOperatorToken(ctx context.Context, t *OperatorToken) error
	// OperatorTokenForUpdate reads and locks an operator token.
	OperatorTokenForUpdate(ctx context.Context, id string) (*OperatorToken, error)
	// RevokeOperatorToken marks a token revoked at a time.
	RevokeOperatorToken(ctx context.Context, id string, at time.Time) error
	// InsertAudit appends an operator action to the audit log, which
	// refuses updates and deletes.
	InsertAudit(ctx context.Context, e *AuditEntry) error
	// CountRate adds one to a rate counter's fixed window and returns the
	// count, this one included. Counters of concurrent transactions in any
	// process add up, so a limit read from them holds across processes.
	CountRate(ctx context.Context, scope string, window time.Time) (int, error)

	// ClaimIdempotency claims a key inside this transaction (the claim
	// commits with the command), counting a new key against the quota. On
	// ClaimQuotaExceeded the count was taken: the caller rolls back. An
	// Unseen claim may be written at the end of the command instead; the
	// command then fails with ErrClaimRace if another request took the key
	// meanwhile.
	ClaimIdempotency(ctx context.Context, c Claim) (ClaimResult, error)
	// CompleteIdempotency stores the response of the claim held by token.
	// It returns ErrClaimLost when the claim is no longer the caller's, and
	// the transaction must then roll back (ErrClaimRace for an Unseen
	// claim that another request took).
	CompleteIdempotency(ctx context.Context, s IdempotencyScope, token string, r StoredResponse) error
}

// DueQuery asks for background work.
type DueQuery struct {
	Now   time.Time
	Limit int
	// Expired: open payments whose expires_at passed.
	Expired bool
	// Reconcile: pending payments last polled (or created) before Before.
	Reconcile bool
	// LatePoll: payments whose late poll (Tx.SetLatePoll) is due at Now.
	LatePoll bool
	// Dispatch: payouts and refunds still initiated or pending whose last
	// provider call (dispatched_at, or created_at) was before Before.
	Dispatch bool
	Before   time.Time
}

// VolumeQuery selects payments counted against a limit: success, refunded
// and disputed ones, and pending ones for PendingHold after their
// creation, created on or after Since's UTC day, in one scope: the payer's (PayerPhone), the merchant's on one provider
// (MerchantID and Provider), or the merchant's (MerchantID).
type VolumeQuery struct {
	Mode       Mode
	MerchantID string
	Provider   string
	PayerPhone string
	Since      time.Time
	// HoldSince: pending payments created at or after it (and on or
	// after Since's day) hold room too; older pending payments no longer
	// do. Settled payments are read from the counters.
	HoldSince time.Time
}

// PendingHold is how long a pending payment holds room against the
// merchant, provider and payer limits: after it, only success counts, so
// that nobody can fill another's ceiling with payments never paid.
const PendingHold = 30 * time.Minute

// volumeQueryKey identifies what a volume query reads, at the counters'
// granularity.
type volumeQueryKey struct {
	scope       string
	day, minute int64
}

func (q VolumeQuery) key() volumeQueryKey {
	return volumeQueryKey{q.Scope(), VolumeDay(q.Since), q.FirstHoldMinute()}
}

// Scope names the volume counter the query reads.
func (q VolumeQuery) Scope() string {
	switch {
	case q.PayerPhone != "":
		return "p:" + string(q.Mode) + ":" + q.PayerPhone
	case q.Provider != "":
		return "mp:" + q.MerchantID + ":" + string(q.Mode) + ":" + q.Provider
	}
	return "m:" + q.MerchantID + ":" + string(q.Mode)
}

// VolumeDay is a time's UTC day: days since 1970-01-01.
func VolumeDay(t time.Time) int64 {
	sec := t.UTC().Unix()
	d := sec / 86400
	if sec < 0 && sec%86400 != 0 {
		d--
	}
	return d
}

// HoldScope is the hold counter of a volume scope: pending payments by the
// UTC minute of their creation (in the volume counters' day column).
func HoldScope(scope string) string { return "h:" + scope }

// HoldScopes are the hold counters a pending payment counts in.
func HoldScopes(t *Transaction) []string {
	out := VolumeScopes(t)
	for i, s := range out {
		out[i] = HoldScope(s)
	}
	return out
}

// HoldMinute is a time's UTC minute: minutes since 1970-01-01.
func HoldMinute(t time.Time) int64 {
	sec := t.UTC().Unix()
	m := sec / 60
	if sec < 0 && sec%60 != 0 {
		m--
	}
	return m
}

// FirstHoldMinute is the first minute whose pending payments still hold
// room at q: minutes that started at or after HoldSince (so a payment
// holds room for PendingHold at most) and within Since's day or later.
func (q VolumeQuery) FirstHoldMinute() int64 {
	m := HoldMinute(q.HoldSince)
	if q.HoldSince.UTC().Unix()%60 != 0 {
		m++
	}
	if d := VolumeDay(q.Since) * 1440; d > m {
		m = d
	}
	return m
}

// VolumeScopes are the counters a payment counts in.
func VolumeScopes(t *Transaction) []string {
	out := []string{VolumeQuery{Mode: t.Mode, MerchantID: t.MerchantID}.Scope()}
	if t.Provider != "" {
		out = append(out, VolumeQuery{Mode: t.Mode, MerchantID: t.MerchantID, Provider: t.Provider}.Scope())
	}
	if t.PayerPhone != "" {
		out = append(out, VolumeQuery{Mode: t.Mode, PayerPhone: t.PayerPhone}.Scope())
	}
	return out
}

// counted reports whether a payment in this status is in the volume
// counters. Pending payments are not: they are in the hold counters, read
// for PendingHold only.
func counted(s Status) bool {
	return s == StatusSuccess || s == StatusRefunded || s == StatusDisputed
}

// ErrDuplicateMerchantRef: another payment or payout has this merchant_ref.
var ErrDuplicateMerchantRef = errors.New("merchant_ref already used")

// PageRequest asks for one page of a list; pages count from 1.
type PageRequest struct {
	Page    int
	PerPage int
}

// Offset is the number of rows before the page.
func (p PageRequest) Offset() int { return (p.Page - 1) * p.PerPage }

// Pagination defaults. A page past the last answers an empty list; past
// MaxPage it is a validation_error, so no offset can overflow.
const (
	DefaultPerPage = 20
	MaxPerPage     = 100
	MaxPage        = 1_000_000
)

// Pagination describes a page of a list, as every list answers it.
type Pagination struct {
	Total       int `json:"total"`
	PerPage     int `json:"per_page"`
	CurrentPage int `json:"current_page"`
	LastPage    int `json:"last_page"`
}

// NewPagination computes the pagination object of a page.
func NewPagination(p PageRequest, total int) Pagination {
	last := (total + p.PerPage - 1) / p.PerPage
	if last < 1 {
		last = 1
	}
	return Pagination{Total: total, PerPage: p.PerPage, CurrentPage: p.Page, LastPage: last}
}

type rerunnableKey struct{}

// Rerunnable marks the commands of ctx as safe to run more than once: a
// command's fn (Store.Update) keeps no effect of a run but its
// transaction's writes, so that a run rolled back leaves nothing and the
// next one starts afresh. PostgreSQL then writes such commands that arrive
// together in one transaction, each table's rows of them in one statement
// (group commit); when that transaction fails it runs each again alone, so
// that only the command at fault gets the error. A command that calls out
// to the network, or that does anything outside the transaction that a
// second run would not find already done, must not be marked (test mode's
// simulators answer a payment's second initiation with its first).
//
// The commands of such a transaction run at the same time, each on its
// own goroutine, their statements sent together (PostgreSQL's
// groupmux.go). A command must therefore neither share mutable state with
// another nor wait for one. It sees none of the others' writes that the
// store holds until the commit (rows, balance changes, counters), and may
// or may not see those the store sent at once, as of a transaction that
// ran just before or just after its own.
func Rerunnable(ctx context.Context) context.Context {
	return context.WithValue(ctx, rerunnableKey{}, true)
}

// IsRerunnable reports whether ctx was marked Rerunnable.
func IsRerunnable(ctx context.Context) bool {
	v, _ := ctx.Value(rerunnableKey{}).(bool)
	return v
}
