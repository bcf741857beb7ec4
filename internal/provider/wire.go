package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// The provider HTTP API (see the package documentation), spoken by the
// adapters and served by the Emulator.

// CollectionRequest is the body of POST {base}/collections.
type CollectionRequest struct {
	Reference string `json:"reference"`
	// Amount is in minor units (hundredths of the currency unit).
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	Phone       string    `json:"phone"`
	Country     string    `json:"country"`
	PayerName   string    `json:"payer_name,omitempty"`
	SubMerchant string    `json:"sub_merchant,omitempty"`
	NotifyURL   string    `json:"notify_url,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
}

// Collection is a provider's answer about one collection.
type Collection struct {
	ID string `json:"id"`
	// Reference echoes the collection request's (GET {base}/collections?
	// reference= finds a collection by it).
	Reference  string             `json:"reference,omitempty"`
	Status     string             `json:"status"`
	NextAction *xaalis.NextAction `json:"next_action,omitempty"`
	Reason     string             `json:"reason,omitempty"`
}

// OTPRequest is the body of POST {base}/collections/{id}/otp.
type OTPRequest struct {
	OTP string `json:"otp"`
}

// PayoutRequest is the body of POST {base}/payouts.
type PayoutRequest struct {
	Reference string `json:"reference"`
	// Amount is in minor units.
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	Phone         string `json:"phone"` // the recipient's E.164 number
	Country       string `json:"country"`
	RecipientName string `json:"recipient_name,omitempty"`
	NotifyURL     string `json:"notify_url,omitempty"`
}

// Payout is a provider's answer about one payout.
type Payout struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// RefundRequest is the body of POST {base}/refunds.
type RefundRequest struct {
	Reference    string `json:"reference"`
	CollectionID string `json:"collection_id"`
	// Amount is in minor units.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Refund is a provider's answer about one refund.
type Refund struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// Error codes of the provider API that the adapters act upon.
const (
	// CodeNotFound, with HTTP 404, answers GET {base}/payouts?reference=
	// and GET {base}/refunds?reference= for a reference the provider
	// never received.
	CodeNotFound = "not_found"
	// CodePayoutUnsupported and CodeRefundUnsupported (HTTP 422) answer a
	// provider that makes no payouts or no refunds; the adapters map them
	// to provider_payout_unsupported and refund_not_supported.
	CodePayoutUnsupported = "payout_unsupported"
	CodeRefundUnsupported = "refund_unsupported"
)

// APIError is the body of every 4xx and 5xx answer.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Event types of provider notifications.
const (
	EventCollectionUpdated = "collection.updated"
	EventDisputeOpened     = "dispute.opened"
	EventPayoutUpdated     = "payout.updated"
)

// Event is a notification a provider POSTs to a collection's or a
// payout's notify_url. Collection events (collection.updated,
// dispute.opened) carry Collection; payout.updated carries Payout.
type Event struct {
	EventID    string          `json:"event_id"`
	Type       string          `json:"type"`
	Country    string          `json:"country,omitempty"`
	Collection EventCollection `json:"collection,omitzero"`
	Dispute    *EventDispute   `json:"dispute,omitempty"`
	Payout     *EventPayout    `json:"payout,omitempty"`
}

// EventCollection is the collection an Event is about. Reference echoes
// the collection request's: it names the payment when the answer giving
// ID never came back (a timeout, a crash).
type EventCollection struct {
	ID        string `json:"id"`
	Reference string `json:"reference,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// EventPayout is the payout of a payout.updated Event.
type EventPayout struct {
	ID        string `json:"id"`
	Reference string `json:"reference,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// EventDispute is the dispute of a dispute.opened Event.
type EventDispute struct {
	// Amount is in minor units; Currency defaults to XOF.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// SignatureHeader carries a notification's signature.
const SignatureHeader = "X-Provider-Signature"

// SignatureTolerance is how far a notification's timestamp may be from now.
const SignatureTolerance = 300 * time.Second

// Sign returns the X-Provider-Signature value of a body sent at t:
// "t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// signature is a parsed X-Provider-Signature header.
type signature struct {
	ts  string // as sent: the signed text
	t   int64
	v1s [][]byte
}

// parseSignature parses "t=<unix>,v1=<hex>[,v1=<hex>...]"; unknown keys
// are ignored, one t and at least one well-formed v1 are required.
func parseSignature(h string) (signature, bool) {
	var s signature
	seenT := false
	for part := range strings.SplitSeq(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return signature{}, false
		}
		switch k {
		case "t":
			if seenT || v == "" || len(v) > 19 {
				return signature{}, false
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || strconv.FormatInt(n, 10) != v {
				return signature{}, false
			}
			s.ts, s.t, seenT = v, n, true
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				continue
			}
			if len(s.v1s) < 8 {
				s.v1s = append(s.v1s, b)
			}
		}
	}
	return s, seenT && len(s.v1s) > 0
}

// state parses a provider status.
func state(s string) (xaalis.ProviderState, bool) {
	switch p := xaalis.ProviderState(s); p {
	case xaalis.ProviderPending, xaalis.ProviderSuccess, xaalis.ProviderFailed, xaalis.ProviderCancelled:
		return p, true
	}
	return "", false
}
