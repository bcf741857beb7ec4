package xaalis

import (
	"encoding/json"
	"time"
)

// PayoutRequestStatus is the state of a merchant withdrawal.
type PayoutRequestStatus string

// Payout request statuses (spec: Payout request statuses).
const (
	PRSubmitted PayoutRequestStatus = "submitted"
	PRApproved  PayoutRequestStatus = "approved"
	PRCompleted PayoutRequestStatus = "completed"
	PRRejected  PayoutRequestStatus = "rejected"
	PRFailed    PayoutRequestStatus = "failed"
)

// PayoutRequest is a merchant's request to withdraw its balance.
type PayoutRequest struct {
	ID              string
	MerchantID      string
	Mode            Mode
	Reference       string // PR-...
	Status          PayoutRequestStatus
	Amount          Amount
	Fee             Amount
	Net             Amount
	DestPhone       string
	DestIBAN        string
	DestBank        string
	MerchantNote    string
	RejectionReason string
	FailureReason   string
	SubmittedAt     time.Time
	ApprovedAt      *time.Time
	CompletedAt     *time.Time
	UpdatedAt       time.Time
}

// NewPayoutRequestReference makes a PR- reference.
func NewPayoutRequestReference() string { return "PR-" + RandomString(16, referenceAlphabet) }

// MarshalJSON renders the payout request record of the specification.
func (r *PayoutRequest) MarshalJSON() ([]byte, error) {
	j := struct {
		ID              string              `json:"id"`
		Object          string              `json:"object"`
		Reference       string              `json:"reference"`
		Status          PayoutRequestStatus `json:"status"`
		Amount          string              `json:"amount"`
		FeeAmount       string              `json:"fee_amount"`
		NetAmount       string              `json:"net_amount"`
		Currency        Currency            `json:"currency"`
		Destination     destination         `json:"destination"`
		MerchantNote    *string             `json:"merchant_note"`
		SubmittedAt     string              `json:"submitted_at"`
		ApprovedAt      *string             `json:"approved_at"`
		CompletedAt     *string             `json:"completed_at"`
		RejectionReason *string             `json:"rejection_reason,omitempty"`
		FailureReason   *string             `json:"failure_reason,omitempty"`
		Livemode        bool                `json:"livemode"`
		UpdatedAt       string              `json:"updated_at"`
	}{
		ID: r.ID, Object: "payout_request", Reference: r.Reference, Status: r.Status, Amount: r.Amount.Decimal(),
		FeeAmount: r.Fee.Decimal(), NetAmount: r.Net.Decimal(), Currency: r.Amount.Currency,
		Destination:  destination{Phone: strPtr(r.DestPhone), IBAN: strPtr(r.DestIBAN), Bank: strPtr(r.DestBank)},
		MerchantNote: strPtr(r.MerchantNote), SubmittedAt: Timestamp(r.SubmittedAt), ApprovedAt: tsPtr(r.ApprovedAt),
		CompletedAt: tsPtr(r.CompletedAt), RejectionReason: strPtr(r.RejectionReason), FailureReason: strPtr(r.FailureReason),
		Livemode: r.Mode.Live(), UpdatedAt: Timestamp(r.UpdatedAt),
	}
	return json.Marshal(j)
}

type destination struct {
	Phone *string `json:"phone"`
	IBAN  *string `json:"iban"`
	Bank  *string `json:"bank"`
}

func tsPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Timestamp(*t)
	return &s
}

// Settlement is a completed payout request as GET /v1/settlements shows it.
type Settlement struct{ *PayoutRequest }

// MarshalJSON renders the settlement record.
func (s Settlement) MarshalJSON() ([]byte, error) {
	r := s.PayoutRequest
	settled := ""
	if r.CompletedAt != nil {
		settled = Timestamp(*r.CompletedAt)
	}
	return json.Marshal(struct {
		ID              string      `json:"id"`
		Object          string      `json:"object"`
		PayoutRequestID string      `json:"payout_request_id"`
		Reference       string      `json:"reference"`
		Status          string      `json:"status"`
		Amount          string      `json:"amount"`
		FeeAmount       string      `json:"fee_amount"`
		NetAmount       string      `json:"net_amount"`
		Currency        Currency    `json:"currency"`
		Destination     destination `json:"destination"`
		SettledAt       string      `json:"settled_at"`
		Livemode        bool        `json:"livemode"`
	}{r.ID, "settlement", r.ID, r.Reference, "paid", r.Amount.Decimal(), r.Fee.Decimal(), r.Net.Decimal(),
		r.Amount.Currency, destination{Phone: strPtr(r.DestPhone), IBAN: strPtr(r.DestIBAN), Bank: strPtr(r.DestBank)},
		settled, r.Mode.Live()})
}
