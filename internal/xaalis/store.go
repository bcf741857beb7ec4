package xaalis

import (
	"context"
	"time"
)

// Store is the persistence the domain needs. Two adapters implement it,
// internal/sqlite and internal/postgres, and internal/storetest holds the
// conformance suite both must pass.
//
// Reads return ErrNotFound (not_found) for a missing row. Every write
// happens inside Update, so one command is one database transaction.
type Store interface {
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
	Close() error

	// Pepper returns the installation's key-hashing secret, made on first
	// use and never changed.
	Pepper(ctx context.Context) ([]byte, error)

	// Update runs fn in one write transaction, committed when fn returns
	// nil and rolled back otherwise.
	Update(ctx context.Context, fn func(tx Tx) error) error

	Merchant(ctx context.Context, id string) (*Merchant, error)
	// Key returns a key by id.
	Key(ctx context.Context, id string) (*Key, error)
	// KeyByHash returns a key and its merchant in one read: the hot path of
	// every request.
	KeyByHash(ctx context.Context, hash []byte) (*Key, *Merchant, error)

	// Plan returns a plan of the merchant in either mode; callers compare
	// its mode with the key's.
	Plan(ctx context.Context, merchantID, id string) (*Plan, error)
	Plans(ctx context.Context, f PlanFilter, page PageRequest) ([]*Plan, int, error)

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
	// PurgeIdempotency deletes keys expired at now and quota counters whose
	// window started more than IdempotencyTTL before it (quota windows are
	// at most that long); it returns how many keys went.
	PurgeIdempotency(ctx context.Context, now time.Time) (int64, error)
}

// Tx is one write transaction.
type Tx interface {
	// InsertSettingOnce records a named setting unless it exists, and
	// reports whether this call inserted it. Concurrent callers in other
	// processes wait for each other, so exactly one gets true.
	InsertSettingOnce(ctx context.Context, name string, value []byte) (bool, error)
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

	// CompleteIdempotency stores the response of the claim held by token.
	// It returns ErrClaimLost when the claim is no longer the caller's, and
	// the transaction must then roll back.
	CompleteIdempotency(ctx context.Context, s IdempotencyScope, token string, r StoredResponse) error
}

// PageRequest asks for one page of a list; pages count from 1.
type PageRequest struct {
	Page    int
	PerPage int
}

// Offset is the number of rows before the page.
func (p PageRequest) Offset() int { return (p.Page - 1) * p.PerPage }

// Pagination defaults.
const (
	DefaultPerPage = 20
	MaxPerPage     = 100
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
