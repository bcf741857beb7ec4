package xaalis

import (
	"context"
	"time"
)

// OpsStore is the part of the Store the operator console and the metrics
// read: business counters, the webhook backlog, the jobs' backlog, the
// ledger checks, operator sessions, and lists across merchants.
type OpsStore interface {
	// StatTotals sums the stat counters of the days from fromDay on (0:
	// every day, the folded ones included), by metric and key.
	StatTotals(ctx context.Context, fromDay int64) ([]StatTotal, error)
	// CompactStats folds the counters of the days before beforeDay (but
	// after StatDayFolded) into StatDayFolded, in one transaction; it
	// returns how many rows it folded. Concurrent calls never count a row
	// twice.
	CompactStats(ctx context.Context, beforeDay int64) (int64, error)
	// WebhookBacklog counts pending deliveries (at most capAt: the count
	// saturates there), finds the oldest one's creation, and lists up to
	// limit endpoints with pending deliveries that failed at least once,
	// most pending first.
	WebhookBacklog(ctx context.Context, capAt, limit int) (WebhookBacklog, error)
	// JobsDue returns, for each background job, when the oldest item
	// waiting for it became due: the zero time when nothing is due.
	JobsDue(ctx context.Context, q JobsDueQuery) (map[string]time.Time, error)
	// LastLedgerCheck returns the newest recorded ledger check, or
	// not_found when none ran.
	LastLedgerCheck(ctx context.Context) (*LedgerCheckRun, error)
	// RateCount reads a rate counter's window without adding to it.
	RateCount(ctx context.Context, scope string, window time.Time) (int, error)
	// OperatorSessionByHash finds a console session and its token.
	OperatorSessionByHash(ctx context.Context, hash []byte) (*OperatorSession, *OperatorToken, error)

	// Merchants lists merchants whose id starts with, or whose name
	// contains, Query (any case), newest first, and the total.
	Merchants(ctx context.Context, f MerchantFilter, page PageRequest) ([]*Merchant, int, error)
	// Keys lists a merchant's keys, newest first, never their hashes'
	// secrets (they are not stored).
	Keys(ctx context.Context, merchantID string) ([]*Key, error)
	// PayoutRequestByID returns a payout request of any merchant.
	PayoutRequestByID(ctx context.Context, id string) (*PayoutRequest, error)
	// PayoutRequestQueue lists payout requests of any merchant in the
	// statuses, oldest first, and the total.
	PayoutRequestQueue(ctx context.Context, statuses []PayoutRequestStatus, page PageRequest) ([]*PayoutRequest, int, error)
	// DisputeByID returns a dispute of any merchant.
	DisputeByID(ctx context.Context, id string) (*Dispute, error)
	// OpenDisputes lists the disputes still open (needs_response or
	// under_review) of any merchant, nearest deadline first, and the total.
	OpenDisputes(ctx context.Context, page PageRequest) ([]*Dispute, int, error)
	// DisputesOf lists a payment's disputes, oldest first.
	DisputesOf(ctx context.Context, transactionID string) ([]*Dispute, error)
	// FindTransactions returns up to limit transactions of any merchant
	// whose id, reference, merchant_ref or payer phone is key, newest
	// first.
	FindTransactions(ctx context.Context, key string, limit int) ([]*Transaction, error)
	// ChildTransactions returns the refunds of a payment, oldest first.
	ChildTransactions(ctx context.Context, parentID string) ([]*Transaction, error)
}

// OpsTx is the part of Tx they write with.
type OpsTx interface {
	// AddStats adds deltas to the stat counters of one day. shard is the
	// row a counter's delta should go to among its shards; a store may
	// choose another (PostgreSQL uses the connection's), the totals being
	// the sum of every shard.
	AddStats(ctx context.Context, day int64, shard int, deltas ...StatDelta) error
	// InsertLedgerCheck records a ledger check's outcome.
	InsertLedgerCheck(ctx context.Context, c *LedgerCheckRun) error
	// InsertOperatorSession stores a console session (its hash only).
	InsertOperatorSession(ctx context.Context, s *OperatorSession) error
	// TouchOperatorSession moves a session's last activity to at.
	TouchOperatorSession(ctx context.Context, id string, at time.Time) error
	// DeleteOperatorSession ends a session; deleting a missing one is not
	// an error.
	DeleteOperatorSession(ctx context.Context, id string) error
	// PurgeOperatorSessions deletes the sessions idle since before idle,
	// and returns how many.
	PurgeOperatorSessions(ctx context.Context, idle time.Time) (int64, error)
}

// MerchantFilter selects merchants for the console.
type MerchantFilter struct {
	// Query matches an id prefix or a part of the name, any case.
	Query string
}

// JobsDueQuery says when items become due for each job.
type JobsDueQuery struct {
	Now time.Time
	// ReconcileBefore: pending payments last polled before it are due.
	ReconcileBefore time.Time
	// DispatchBefore: payouts and refunds last sent before it are due.
	DispatchBefore time.Time
}

// The background jobs whose lag is measured (JobsDue's keys).
const (
	JobExpire        = "expire"
	JobReconcile     = "reconcile"
	JobDisputes      = "disputes"
	JobSubscriptions = "subscriptions"
	JobDispatch      = "dispatch"
	JobWebhooks      = "webhooks"
)

// Jobs lists the background jobs, in a stable order.
var Jobs = []string{JobExpire, JobReconcile, JobDisputes, JobSubscriptions, JobDispatch, JobWebhooks}

// WebhookBacklog is the state of the delivery outbox.
type WebhookBacklog struct {
	// Pending counts pending deliveries, up to the cap asked for.
	Pending int
	// Saturated is set when Pending reached the cap.
	Saturated bool
	// OldestPending is the creation of the oldest pending delivery; zero
	// when none is pending.
	OldestPending time.Time
	// Failing are the endpoints (or callback URLs) with pending deliveries
	// that failed at least once.
	Failing []FailingEndpoint
}

// FailingEndpoint is a URL whose deliveries are being retried.
type FailingEndpoint struct {
	MerchantID string
	Mode       Mode
	EndpointID string // "" for a transaction's callback_url
	URL        string
	Pending    int
	// Oldest is the creation of its oldest pending delivery.
	Oldest time.Time
	// LastAttemptAt is its most recent attempt.
	LastAttemptAt time.Time
}

// OperatorSession is a signed-in console session. Only the hash of its
// secret (the cookie) is stored.
type OperatorSession struct {
	ID         string
	Hash       []byte
	TokenID    string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ClientIP   string
}

// LedgerCheckRun is the recorded outcome of a ledger check.
type LedgerCheckRun struct {
	ID       string
	At       time.Time
	Duration time.Duration
	// Problems counts the differences found; Detail lists the first
	// MaxLedgerCheckDetail of them.
	Problems int
	Detail   []string
	// Actor is who asked for it: an operator, the command line, or
	// "schedule" for the periodic check.
	Actor string
}

// MaxLedgerCheckDetail bounds the problems a recorded check lists.
const MaxLedgerCheckDetail = 100
