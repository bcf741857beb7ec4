package xaalis

import (
	"encoding/json"
	"strings"
	"time"
)

// TxType is the kind of a transaction.
type TxType string

// Transaction types.
const (
	TypePayment TxType = "payment"
	TypePayout  TxType = "payout"
	TypeRefund  TxType = "refund"
)

// Status is a transaction's state (spec: States and transitions).
type Status string

// Transaction statuses.
const (
	StatusInitiated Status = "initiated"
	StatusPending   Status = "pending"
	StatusSuccess   Status = "success"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
	StatusRefunded  Status = "refunded"
	StatusDisputed  Status = "disputed"
)

// AllStatuses lists every status, for filters.
var AllStatuses = []Status{StatusInitiated, StatusPending, StatusSuccess, StatusFailed, StatusCancelled,
	StatusExpired, StatusRefunded, StatusDisputed}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, k := range AllStatuses {
		if k == s {
			return true
		}
	}
	return false
}

// Open reports whether the payment still awaits an outcome.
func (s Status) Open() bool { return s == StatusInitiated || s == StatusPending }

// referenceAlphabet has no 0/O, 1/I/L: references are read aloud and typed.
const referenceAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"

// NewReference makes a TXN- reference of 16 random characters.
func NewReference() string { return "TXN-" + RandomString(16, referenceAlphabet) }

// LooksLikeReference reports whether s has the shape of a TXN- reference,
// current (16 characters) or older (14).
func LooksLikeReference(s string) bool {
	if !strings.HasPrefix(s, "TXN-") {
		return false
	}
	n := len(s) - 4
	if n != 16 && n != 14 {
		return false
	}
	for _, c := range s[4:] {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Transaction is a payment, payout or refund.
type Transaction struct {
	ID          string
	MerchantID  string
	Mode        Mode
	Type        TxType
	Reference   string
	MerchantRef string
	Status      Status
	Amount      Amount
	Country     Country
	Provider    string // "" until chosen
	// Route and RouteReason say which provider route served the payment.
	Route       string
	RouteReason string
	ProviderRef string
	NextAction  *NextAction
	PayerPhone  string // E.164, "" until known
	PayerName   string
	CustomerID  string
	SuccessURL  string
	FailedURL   string
	CallbackURL string
	Metadata    map[string]string
	// FailureReason says why a payment failed, was cancelled or expired.
	FailureReason string
	// LimitAmount is the amount's worth in XOF minor units, summed by the
	// volume limits.
	LimitAmount int64
	// ParentID is the payment a refund gives back.
	ParentID string
	// Fee is the provider fee of a payment, payout or refund, in the
	// ledger's currency (the merchant's settlement currency).
	Fee Amount
	// IdempotencyKey is the key a payout or refund was created under.
	IdempotencyKey string
	// Description is a payout's or refund's free text (the refund reason).
	Description string
	// DispatchedAt is when the provider was last called about a payout or
	// refund.
	DispatchedAt *time.Time
	// FX, when the payment currency is not the settlement currency.
	ExchangeRate     string
	SettlementAmount *Amount
	ExpiresAt        time.Time
	// ReconciledAt is when the provider was last polled about it.
	ReconciledAt *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// PaymentURL is the hosted page; set by the App from its base URL.
	PaymentURL string
	// KeyType is the kind of key that created the transaction: payments
	// made with a publishable key are held apart (their merchant_ref
	// namespace, the hosted page's return URLs, the payer's rate limit).
	KeyType KeyType

	// fresh: created in the transaction at hand, so nothing refers to it
	// yet (no marketplace split can exist).
	fresh bool
}

// Publishable reports whether a publishable key created the transaction.
func (t *Transaction) Publishable() bool { return t.KeyType == KeyPublishable }

// Payer is the payer block of a record.
type Payer struct {
	Phone *string `json:"phone"`
	Name  *string `json:"name"`
}

// RouteInfo says which route served a payment and why.
type RouteInfo struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// transactionJSON is the public record (DECISIONS.md: Records and shapes).
type transactionJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Type               TxType            `json:"type"`
	Reference          string            `json:"reference"`
	MerchantRef        *string           `json:"merchant_ref"`
	MerchantReference  *string           `json:"merchant_reference"`
	Status             Status            `json:"status"`
	Amount             string            `json:"amount"`
	Currency           Currency          `json:"currency"`
	Country            Country           `json:"country"`
	Provider           *string           `json:"provider"`
	Route              *RouteInfo        `json:"route"`
	PaymentURL         *string           `json:"payment_url"`
	CheckoutURL        *string           `json:"checkout_url"`
	NextAction         *NextAction       `json:"next_action"`
	Payer              Payer             `json:"payer"`
	CustomerID         *string           `json:"customer_id"`
	Metadata           map[string]string `json:"metadata"`
	SuccessURL         *string           `json:"success_url"`
	FailedURL          *string           `json:"failed_url"`
	CallbackURL        *string           `json:"callback_url"`
	FailureReason      *string           `json:"failure_reason"`
	FeeAmount          *string           `json:"fee_amount"`
	PaymentID          *string           `json:"payment_id"`
	Description        *string           `json:"description"`
	ExchangeRate       *string           `json:"exchange_rate,omitempty"`
	SettlementAmount   *string           `json:"settlement_amount,omitempty"`
	SettlementCurrency *Currency         `json:"settlement_currency,omitempty"`
	Livemode           bool              `json:"livemode"`
	ExpiresAt          string            `json:"expires_at"`
	CreatedAt          string            `json:"created_at"`
	UpdatedAt          string            `json:"updated_at"`
}

// MarshalJSON renders the canonical transaction record.
func (t *Transaction) MarshalJSON() ([]byte, error) {
	md := t.Metadata
	if md == nil {
		md = map[string]string{}
	}
	j := transactionJSON{
		ID: t.ID, Object: "transaction", Type: t.Type, Reference: t.Reference,
		MerchantRef: strPtr(t.MerchantRef), MerchantReference: strPtr(t.MerchantRef),
		Status: t.Status, Amount: t.Amount.Decimal(), Currency: t.Amount.Currency, Country: t.Country,
		Provider: strPtr(t.Provider), PaymentURL: strPtr(t.PaymentURL), CheckoutURL: strPtr(t.PaymentURL),
		NextAction: t.NextAction, Payer: Payer{Phone: strPtr(t.PayerPhone), Name: strPtr(t.PayerName)},
		CustomerID: strPtr(t.CustomerID), Metadata: md, SuccessURL: strPtr(t.SuccessURL),
		FailedURL: strPtr(t.FailedURL), CallbackURL: strPtr(t.CallbackURL), FailureReason: strPtr(t.FailureReason),
		Livemode: t.Mode.Live(), ExpiresAt: Timestamp(t.ExpiresAt), CreatedAt: Timestamp(t.CreatedAt),
		UpdatedAt: Timestamp(t.UpdatedAt),
	}
	if t.Route != "" {
		j.Route = &RouteInfo{Name: t.Route, Reason: t.RouteReason}
	}
	if t.Fee.Currency != "" {
		j.FeeAmount = strPtr(t.Fee.Decimal())
	}
	j.PaymentID, j.Description = strPtr(t.ParentID), strPtr(t.Description)
	if t.SettlementAmount != nil {
		j.ExchangeRate = strPtr(t.ExchangeRate)
		j.SettlementAmount = strPtr(t.SettlementAmount.Decimal())
		j.SettlementCurrency = &t.SettlementAmount.Currency
	}
	return json.Marshal(j)
}

// Customer is a payer known to a merchant, by phone number.
type Customer struct {
	ID         string
	MerchantID string
	Mode       Mode
	Phone      string
	Name       string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// MarshalJSON renders the public customer record.
func (c *Customer) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID        string  `json:"id"`
		Object    string  `json:"object"`
		Phone     string  `json:"phone"`
		Name      *string `json:"name"`
		Livemode  bool    `json:"livemode"`
		CreatedAt string  `json:"created_at"`
		UpdatedAt string  `json:"updated_at"`
	}{c.ID, "customer", c.Phone, strPtr(c.Name), c.Mode.Live(), Timestamp(c.CreatedAt), Timestamp(c.UpdatedAt)})
}

// Event is a committed state change, written in the same transaction as
// the change: the outbox webhooks are delivered from.
type Event struct {
	ID         string
	MerchantID string
	Mode       Mode
	Type       string // payment.success, ...
	ObjectType string // transaction, ...
	ObjectID   string
	// Seq orders the events of one object: 1, 2, ...
	Seq       int64
	Data      json.RawMessage // the record as it was after the change
	CreatedAt time.Time
	// First: the object was created in the transaction that inserts the
	// event, so no other event of it exists or can be written meanwhile.
	// The store then numbers it 1 without reading or locking the object's
	// events (on PostgreSQL the insert goes with the next statement, no
	// round trip of its own). An object that has events already makes
	// the insert, and so the transaction, fail: (object_id, seq) is unique.
	First bool
}

// Event types of the specification.
const (
	EventPaymentSuccess   = "payment.success"
	EventPaymentFailed    = "payment.failed"
	EventPaymentCancelled = "payment.cancelled"
	EventPaymentExpired   = "payment.expired"
)

// TxFilter selects transactions of one merchant and mode.
type TxFilter struct {
	MerchantID  string
	Mode        Mode
	Type        TxType
	Status      Status
	Provider    string
	MerchantRef string
	From, To    *time.Time // created_at in [From, To)
}
