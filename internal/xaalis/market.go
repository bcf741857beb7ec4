package xaalis

// The marketplace records: disputes, split items, subscriptions and
// customers' filter, and the part of the Store they need (MarketStore,
// MarketTx), implemented in internal/sqlite/market.go and
// internal/postgres/market.go.

import (
	"context"
	"time"
)

// DisputeStatus is where a dispute stands (DECISIONS.md: States not shown).
type DisputeStatus string

// Dispute statuses.
const (
	DisputeNeedsResponse DisputeStatus = "needs_response"
	DisputeUnderReview   DisputeStatus = "under_review"
	DisputeWon           DisputeStatus = "won"
	DisputeLost          DisputeStatus = "lost"
)

// Dispute is a payer contesting a payment with their provider.
type Dispute struct {
	ID            string
	MerchantID    string
	Mode          Mode
	Reference     string // DSP-...
	TransactionID string
	// MerchantRef is the disputed payment's merchant_ref ("" when none).
	MerchantRef string
	// Amount is disputed, in the payment's currency; LedgerAmount is its
	// worth in the merchant's ledger, reserved while the dispute is open.
	Amount       Amount
	LedgerAmount Amount
	// Shortfall is the part of LedgerAmount that available could not
	// cover when the dispute opened (owed by the merchant meanwhile).
	Shortfall        int64
	Reason           string
	Status           DisputeStatus
	Evidence         []string
	MerchantResponse string
	DueBy            time.Time
	RespondedAt      *time.Time
	ClosedAt         *time.Time
	// ProviderEventID is the provider notification that opened it, if any.
	ProviderEventID string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// SplitItem is one beneficiary's share of a marketplace payment.
type SplitItem struct {
	ID            string
	PaymentID     string
	MerchantID    string // the payment's merchant
	Mode          Mode
	BeneficiaryID string
	Amount        Amount // in the payment's currency
	// LedgerAmount is the share in the ledger's currency.
	LedgerAmount Amount
	Description  string
	// Credited is when the share reached the beneficiary's balance (when
	// the payment succeeded, or at once if it already had).
	CreditedAt *time.Time
	CreatedAt  time.Time
	// Credited is what reached the beneficiary's balance, in the ledger's
	// currency: the share net of the payment's fee pro rata (netShares).
	// Not stored: set where the payment is at hand (credit, lists).
	Credited *Amount
	// MerchantRef is the payment's merchant_ref, for its events and lists.
	MerchantRef string
}

// SubscriptionStatus is where a subscription stands.
type SubscriptionStatus string

// Subscription statuses.
const (
	SubscriptionActive    SubscriptionStatus = "active"
	SubscriptionCancelled SubscriptionStatus = "cancelled"
	SubscriptionExpired   SubscriptionStatus = "expired"
)

// Subscription is a customer paying a plan each period.
type Subscription struct {
	ID string
	// CreationKey is the Idempotency-Key it was created under, written
	// with it (and not read back): a retry of that creation finds it.
	CreationKey        string
	MerchantID         string
	Mode               Mode
	PlanID             string
	CustomerID         string
	Status             SubscriptionStatus
	Provider           string // "" : hosted checkout each period
	CancelAtPeriodEnd  bool
	CurrentPeriodStart time.Time
	CurrentPeriodEnd   time.Time
	// NextActionAt is when the job looks at it next: the period's end, or a
	// retry of a failed period payment.
	NextActionAt    time.Time
	FailedAttempts  int
	LatestPaymentID string
	CancelledAt     *time.Time
	Metadata        map[string]string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// CustomerFilter selects a merchant's customers.
type CustomerFilter struct {
	MerchantID string
	Mode       Mode
}

// MarketStore is the part of the Store disputes, splits, subscriptions and
// customers need.
type MarketStore interface {
	// Dispute returns one of the merchant's disputes by id or reference;
	// an empty merchantID matches any merchant (the operator's commands).
	Dispute(ctx context.Context, merchantID, key string) (*Dispute, error)
	// Disputes lists a merchant's disputes in a mode, newest first;
	// status "" is all.
	Disputes(ctx context.Context, merchantID string, mode Mode, status DisputeStatus, page PageRequest) ([]*Dispute, int, error)
	// DueDisputes returns disputes still needs_response whose due_by passed.
	DueDisputes(ctx context.Context, now time.Time, limit int) ([]*Dispute, error)
	// Splits returns a payment's split items, oldest first.
	Splits(ctx context.Context, paymentID string) ([]*SplitItem, error)
	Subscription(ctx context.Context, merchantID, id string) (*Subscription, error)
	Subscriptions(ctx context.Context, merchantID string, mode Mode, status SubscriptionStatus, page PageRequest) ([]*Subscription, int, error)
	// DueSubscriptions returns active subscriptions whose next_action_at
	// passed, oldest first.
	DueSubscriptions(ctx context.Context, now time.Time, limit int) ([]*Subscription, error)
	// Customers lists a merchant's customers in a mode, newest first.
	Customers(ctx context.Context, f CustomerFilter, page PageRequest) ([]*Customer, int, error)
}

// MarketTx is the part of Tx they need.
type MarketTx interface {
	InsertDispute(ctx context.Context, d *Dispute) error
	DisputeForUpdate(ctx context.Context, id string) (*Dispute, error)
	UpdateDispute(ctx context.Context, d *Dispute) error
	// OpenDisputeOf returns a payment's dispute still open
	// (needs_response or under_review), or not_found.
	OpenDisputeOf(ctx context.Context, transactionID string) (*Dispute, error)
	// DisputeByProviderEvent finds the dispute a provider notification
	// opened, or not_found.
	DisputeByProviderEvent(ctx context.Context, eventID string) (*Dispute, error)

	InsertSplitItem(ctx context.Context, s *SplitItem) error
	// SplitItemsForUpdate returns a payment's split items, locked.
	SplitItemsForUpdate(ctx context.Context, paymentID string) ([]*SplitItem, error)
	// MarkSplitCredited records when an item reached its beneficiary.
	MarkSplitCredited(ctx context.Context, id string, at time.Time) error

	InsertSubscription(ctx context.Context, s *Subscription) error
	SubscriptionForUpdate(ctx context.Context, id string) (*Subscription, error)
	// SubscriptionByCreationKey finds the subscription created under an
	// Idempotency-Key (Subscription.CreationKey) in a merchant's mode,
	// locked; not_found when there is none.
	SubscriptionByCreationKey(ctx context.Context, merchantID string, mode Mode, key string) (*Subscription, error)
	UpdateSubscription(ctx context.Context, s *Subscription) error
	// CustomerForUpdate reads one of the merchant's customers in the tx.
	CustomerForUpdate(ctx context.Context, merchantID, id string) (*Customer, error)
	// PlanByID returns a plan of any merchant (to tell a missing plan from
	// another merchant's), or not_found.
	PlanByID(ctx context.Context, id string) (*Plan, error)
}
