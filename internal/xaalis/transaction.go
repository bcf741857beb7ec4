package xaalis

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
// current (16 characters after TXN-) or older: the spec's "older
// references, 14 characters" may count the prefix or not, so both 14
// characters after it and 14 in all are taken.
func LooksLikeReference(s string) bool {
	if !strings.HasPrefix(s, "TXN-") {
		return false
	}
	n := len(s) - 4
	if n != 16 && n != 14 && n != 10 {
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
	// CreationKey is the Idempotency-Key of the last request that created
	// or resumed a payment sent to a provider, "" otherwise: that request,
	// retried after a 5xx, is answered the payment whatever it became
	// meanwhile (createdBy).
	CreationKey string
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

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalJSON renders the canonical transaction record (DECISIONS.md:
// Records and shapes), written by AppendJSON: the bytes json.Marshal gave
// of the record's struct, compact and HTML-escaped, which the tests keep
// as the reference (TestTransactionJSONAsMarshal). Every payment's record
// is written twice on the writer's path (its event, its stored answer) and
// a list writes up to a hundred: by reflection a record took 3.5 µs, and
// 11 µs inside a list, whose envelope scanned its bytes again.
func (t *Transaction) MarshalJSON() ([]byte, error) {
	return t.AppendJSON(make([]byte, 0, 2048)), nil
}

// AppendJSON appends the record MarshalJSON returns to b: an answer's
// envelope is written around it in one buffer.
func (t *Transaction) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, t.ID)
	b = append(b, `,"object":"transaction","type":`...)
	b = appendJSONString(b, string(t.Type))
	b = append(b, `,"reference":`...)
	b = appendJSONString(b, t.Reference)
	b = append(b, `,"merchant_ref":`...)
	b = appendJSONOptional(b, t.MerchantRef)
	b = append(b, `,"merchant_reference":`...)
	b = appendJSONOptional(b, t.MerchantRef)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(t.Status))
	b = append(b, `,"amount":`...)
	b = appendJSONString(b, t.Amount.Decimal())
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, string(t.Amount.Currency))
	b = append(b, `,"country":`...)
	b = appendJSONString(b, string(t.Country))
	b = append(b, `,"provider":`...)
	b = appendJSONOptional(b, t.Provider)
	b = append(b, `,"route":`...)
	if t.Route == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"name":`...)
		b = appendJSONString(b, t.Route)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, t.RouteReason)
		b = append(b, '}')
	}
	b = append(b, `,"payment_url":`...)
	b = appendJSONOptional(b, t.PaymentURL)
	b = append(b, `,"checkout_url":`...)
	b = appendJSONOptional(b, t.PaymentURL)
	b = append(b, `,"next_action":`...)
	if na := t.NextAction; na == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"type":`...)
		b = appendJSONString(b, string(na.Type))
		for _, f := range [...]struct{ name, v string }{
			{`,"redirect_url":`, na.RedirectURL}, {`,"ussd_code":`, na.USSDCode}, {`,"instructions":`, na.Instructions},
		} {
			if f.v != "" { // omitempty
				b = appendJSONString(append(b, f.name...), f.v)
			}
		}
		b = append(b, '}')
	}
	b = append(b, `,"payer":{"phone":`...)
	b = appendJSONOptional(b, t.PayerPhone)
	b = append(b, `,"name":`...)
	b = appendJSONOptional(b, t.PayerName)
	b = append(b, `},"customer_id":`...)
	b = appendJSONOptional(b, t.CustomerID)
	b = append(b, `,"metadata":{`...)
	keys := make([]string, 0, len(t.Metadata))
	for k := range t.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys) // json.Marshal's order: the keys' bytes
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, t.Metadata[k])
	}
	b = append(b, `},"success_url":`...)
	b = appendJSONOptional(b, t.SuccessURL)
	b = append(b, `,"failed_url":`...)
	b = appendJSONOptional(b, t.FailedURL)
	b = append(b, `,"callback_url":`...)
	b = appendJSONOptional(b, t.CallbackURL)
	b = append(b, `,"failure_reason":`...)
	b = appendJSONOptional(b, t.FailureReason)
	b = append(b, `,"fee_amount":`...)
	if t.Fee.Currency == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONOptional(b, t.Fee.Decimal())
	}
	b = append(b, `,"payment_id":`...)
	b = appendJSONOptional(b, t.ParentID)
	b = append(b, `,"description":`...)
	b = appendJSONOptional(b, t.Description)
	if s := t.SettlementAmount; s != nil { // omitempty: absent without one
		if t.ExchangeRate != "" {
			b = appendJSONString(append(b, `,"exchange_rate":`...), t.ExchangeRate)
		}
		if d := s.Decimal(); d != "" {
			b = appendJSONString(append(b, `,"settlement_amount":`...), d)
		}
		b = appendJSONString(append(b, `,"settlement_currency":`...), string(s.Currency))
	}
	b = strconv.AppendBool(append(b, `,"livemode":`...), t.Mode.Live())
	b = append(b, `,"expires_at":`...)
	b = appendJSONString(b, Timestamp(t.ExpiresAt))
	b = append(b, `,"created_at":`...)
	b = appendJSONString(b, Timestamp(t.CreatedAt))
	b = append(b, `,"updated_at":`...)
	b = appendJSONString(b, Timestamp(t.UpdatedAt))
	return append(b, '}')
}

// appendJSONOptional appends s as a JSON string, or null when it is
// empty: the *string fields strPtr fills.
func appendJSONOptional(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping (json.Marshal's): ", \\ and the control characters escaped
// (\b, \f, \n, \r and \t by name), <, > and & as \u003c, \u003e and
// \u0026, U+2028 and U+2029 escaped, and each byte of invalid UTF-8 as
// \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
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
