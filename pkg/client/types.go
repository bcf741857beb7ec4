package client

import (
	"encoding/json"
	"time"
)

// The records and parameters of api/openapi.yaml, field for field:
// TestContractSchemas fails when a field is missing on either side.
// Nullable fields are pointers; decimal-string amounts are strings
// ("5000.00"); timestamps are time.Time (UTC).

// Metadata is free key-value strings: at most 20 keys.
type Metadata map[string]string

// Pagination describes the page a list answer holds.
type Pagination struct {
	Total       int `json:"total"`
	PerPage     int `json:"per_page"`
	CurrentPage int `json:"current_page"`
	LastPage    int `json:"last_page"`
}

// Plan is a recurring price subscriptions follow.
type Plan struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	Name          string   `json:"name"`
	Amount        string   `json:"amount"`
	Currency      Currency `json:"currency"`
	Interval      Interval `json:"interval"`
	IntervalCount int      `json:"interval_count"`
	// TermCount is the plan's term in billing periods, after which a
	// subscription expires; nil without a term.
	TermCount *int      `json:"term_count"`
	Active    bool      `json:"active"`
	Metadata  Metadata  `json:"metadata"`
	Livemode  bool      `json:"livemode"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PlanParams creates a plan. Amount is in whole units of Currency.
type PlanParams struct {
	Name          string   `json:"name"`
	Amount        int64    `json:"amount"`
	Currency      Currency `json:"currency,omitempty"`
	Interval      Interval `json:"interval"`
	IntervalCount int      `json:"interval_count,omitempty"`
	// TermCount, when above 0, is the plan's term in billing periods.
	TermCount int      `json:"term_count,omitempty"`
	Metadata  Metadata `json:"metadata,omitempty"`
}

// Subscription is a customer paying a plan each period.
type Subscription struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	PlanID             string             `json:"plan_id"`
	CustomerID         string             `json:"customer_id"`
	Status             SubscriptionStatus `json:"status"`
	Provider           *Provider          `json:"provider"`
	CancelAtPeriodEnd  bool               `json:"cancel_at_period_end"`
	CurrentPeriodStart time.Time          `json:"current_period_start"`
	CurrentPeriodEnd   time.Time          `json:"current_period_end"`
	NextPaymentAt      *time.Time         `json:"next_payment_at"`
	FailedAttempts     int                `json:"failed_attempts"`
	LatestPaymentID    *string            `json:"latest_payment_id"`
	CancelledAt        *time.Time         `json:"cancelled_at"`
	Metadata           Metadata           `json:"metadata"`
	Livemode           bool               `json:"livemode"`
	CreatedAt          time.Time          `json:"created_at"`
	UpdatedAt          time.Time          `json:"updated_at"`
}

// SubscriptionParams subscribes a customer to a plan. Without Provider,
// each period's payment is a hosted link.
type SubscriptionParams struct {
	PlanID     string   `json:"plan_id"`
	CustomerID string   `json:"customer_id"`
	Provider   Provider `json:"provider,omitempty"`
	Metadata   Metadata `json:"metadata,omitempty"`
}

// Customer is a payer the merchant knows, by phone number.
type Customer struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Phone     string    `json:"phone"`
	Name      *string   `json:"name"`
	Livemode  bool      `json:"livemode"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NextAction is what the payer must do to finish a payment.
type NextAction struct {
	Type         NextActionType `json:"type"`
	RedirectURL  string         `json:"redirect_url,omitempty"`
	USSDCode     string         `json:"ussd_code,omitempty"`
	Instructions string         `json:"instructions,omitempty"`
}

// Route is which route to the provider served a payment, and why.
type Route struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// TransactionPayer is the payer of a payment or refund, the recipient of a
// payout.
type TransactionPayer struct {
	Phone *string `json:"phone"`
	Name  *string `json:"name"`
}

// Transaction is a payment, a payout or a refund.
type Transaction struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Type               string            `json:"type"` // payment, payout, refund
	Reference          string            `json:"reference"`
	MerchantRef        *string           `json:"merchant_ref"`
	MerchantReference  *string           `json:"merchant_reference"`
	Status             TransactionStatus `json:"status"`
	Amount             string            `json:"amount"`
	Currency           Currency          `json:"currency"`
	Country            Country           `json:"country"`
	Provider           *Provider         `json:"provider"`
	Route              *Route            `json:"route"`
	PaymentURL         *string           `json:"payment_url"`
	CheckoutURL        *string           `json:"checkout_url"`
	NextAction         *NextAction       `json:"next_action"`
	Payer              TransactionPayer  `json:"payer"`
	CustomerID         *string           `json:"customer_id"`
	Metadata           Metadata          `json:"metadata"`
	SuccessURL         *string           `json:"success_url"`
	FailedURL          *string           `json:"failed_url"`
	CallbackURL        *string           `json:"callback_url"`
	FailureReason      *string           `json:"failure_reason"`
	FeeAmount          *string           `json:"fee_amount"`
	PaymentID          *string           `json:"payment_id"`
	Description        *string           `json:"description"`
	ExchangeRate       string            `json:"exchange_rate,omitempty"`
	SettlementAmount   string            `json:"settlement_amount,omitempty"`
	SettlementCurrency Currency          `json:"settlement_currency,omitempty"`
	Livemode           bool              `json:"livemode"`
	ExpiresAt          time.Time         `json:"expires_at"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
}

// Payer is the payer of a payment creation (the preferred form).
type Payer struct {
	Phone string `json:"phone,omitempty"`
	Name  string `json:"name,omitempty"`
}

// PaymentCustomer is the customer form of the payer.
type PaymentCustomer struct {
	Msisdn string `json:"msisdn,omitempty"`
	Phone  string `json:"phone,omitempty"`
	Name   string `json:"name,omitempty"`
}

// PaymentParams creates a payment. Amount is in whole units of Currency.
// Give the payer in one form: Payer (preferred), Phone and Name,
// PayerPhone and PayerName, or Customer. Without Provider the payer
// chooses on the hosted page (PaymentURL).
type PaymentParams struct {
	// MerchantRef, SuccessURL and FailedURL are required to create a
	// payment; a precheck checks them only when given (empty: not sent).
	MerchantRef string           `json:"merchant_ref,omitempty"`
	Amount      int64            `json:"amount"`
	Currency    Currency         `json:"currency,omitempty"`
	Provider    Provider         `json:"provider,omitempty"`
	Country     Country          `json:"country,omitempty"`
	Payer       *Payer           `json:"payer,omitempty"`
	Phone       string           `json:"phone,omitempty"`
	Name        string           `json:"name,omitempty"`
	PayerPhone  string           `json:"payer_phone,omitempty"`
	PayerName   string           `json:"payer_name,omitempty"`
	Customer    *PaymentCustomer `json:"customer,omitempty"`
	SuccessURL  string           `json:"success_url,omitempty"`
	FailedURL   string           `json:"failed_url,omitempty"`
	CallbackURL string           `json:"callback_url,omitempty"`
	// Metadata values may be strings, numbers or booleans (kept as text).
	Metadata  map[string]any `json:"metadata,omitempty"`
	ExpiresIn int            `json:"expires_in,omitempty"`
}

// PaymentPrecheck says whether a payment would be accepted now: Allowed
// when at least one provider may take it (with Provider named, exactly
// whether Payments.Create would).
type PaymentPrecheck struct {
	Object    string                    `json:"object"`
	Allowed   bool                      `json:"allowed"`
	Providers []PaymentPrecheckProvider `json:"providers"`
	// Payer is nil when no payer phone was given.
	Payer *PaymentPrecheckPayer `json:"payer"`
}

// PaymentPrecheckProvider is one provider's verdict: the errors creation
// would answer, in its order (it answers the first).
type PaymentPrecheckProvider struct {
	Provider Provider               `json:"provider"`
	Allowed  bool                   `json:"allowed"`
	Errors   []PaymentPrecheckError `json:"errors"`
}

// PaymentPrecheckError is one refusal, as creation's error carries it.
type PaymentPrecheckError struct {
	Code    ErrorCode      `json:"code"`
	Message string         `json:"message"`
	Context map[string]any `json:"context"`
}

// PaymentPrecheckPayer is the payer's BCEAO tier and room over a rolling
// 30 days, before the payment; decimal strings in Currency (XOF), nil for
// a tier without a ceiling.
type PaymentPrecheckPayer struct {
	Phone            string   `json:"phone"`
	Country          Country  `json:"country"`
	Tier             int      `json:"tier"`
	Ceiling          *string  `json:"ceiling"`
	CeilingRemaining *string  `json:"ceiling_remaining"`
	Currency         Currency `json:"currency"`
}

// SimulateParams settles a test payment: Outcome success, failed or
// cancelled.
type SimulateParams struct {
	Outcome string `json:"outcome"`
}

// SplitItem is one beneficiary's share of a marketplace payment.
type SplitItem struct {
	ID                    string          `json:"id"`
	Object                string          `json:"object"`
	PaymentID             string          `json:"payment_id"`
	MerchantReference     *string         `json:"merchant_reference"`
	BeneficiaryMerchantID string          `json:"beneficiary_merchant_id"`
	Amount                string          `json:"amount"`
	Currency              Currency        `json:"currency"`
	Description           *string         `json:"description"`
	Status                SplitItemStatus `json:"status"`
	CreditedAt            *time.Time      `json:"credited_at"`
	// CreditedAmount is what reached the beneficiary's balance, in
	// CreditedCurrency: Amount net of the payment's fee pro rata.
	CreditedAmount   *string   `json:"credited_amount"`
	CreditedCurrency *Currency `json:"credited_currency"`
	Livemode         bool      `json:"livemode"`
	CreatedAt        time.Time `json:"created_at"`
}

// SplitParams adds shares to a payment's splits.
type SplitParams struct {
	Items []SplitItemParams `json:"items"`
}

// SplitItemParams is one share: Amount in whole units of the payment's
// currency.
type SplitItemParams struct {
	BeneficiaryMerchantID string `json:"beneficiary_merchant_id"`
	Amount                int64  `json:"amount"`
	Description           string `json:"description,omitempty"`
}

// Balance is the merchant's balance in its settlement currency. Its
// amounts are exact JSON numbers of whole units that may carry decimals.
type Balance struct {
	Object      string      `json:"object"`
	Currency    Currency    `json:"currency"`
	Available   json.Number `json:"available"`
	Pending     json.Number `json:"pending"`
	Reserved    json.Number `json:"reserved"`
	Accounting  json.Number `json:"accounting"`
	LastUpdated time.Time   `json:"last_updated"`
	Livemode    bool        `json:"livemode"`
}

// PayoutRecipient is who receives a payout.
type PayoutRecipient struct {
	Phone string `json:"phone"`
	Name  string `json:"name,omitempty"`
}

// PayoutParams sends money to a wallet. Amount is in whole units; the
// provider's fee is reserved on top of it.
type PayoutParams struct {
	MerchantRef string          `json:"merchant_ref"`
	Amount      int64           `json:"amount"`
	Currency    Currency        `json:"currency,omitempty"`
	Provider    Provider        `json:"provider"`
	Country     Country         `json:"country,omitempty"`
	Recipient   PayoutRecipient `json:"recipient"`
	Description string          `json:"description,omitempty"`
	CallbackURL string          `json:"callback_url,omitempty"`
}

// RefundParams refunds part or all of a successful payment (by id or
// TXN- reference). Amount is in whole units.
type RefundParams struct {
	TransactionID string `json:"transaction_id"`
	Amount        int64  `json:"amount"`
	Reason        string `json:"reason,omitempty"`
}

// Dispute is a payer contesting a payment.
type Dispute struct {
	ID            string `json:"id"`
	Object        string `json:"object"`
	Reference     string `json:"reference"`
	TransactionID string `json:"transaction_id"`
	// MerchantReference is the disputed payment's merchant_ref.
	MerchantReference *string       `json:"merchant_reference"`
	Amount            string        `json:"amount"`
	Currency          Currency      `json:"currency"`
	Reason            *string       `json:"reason"`
	Status            DisputeStatus `json:"status"`
	Evidence          []string      `json:"evidence"`
	MerchantResponse  *string       `json:"merchant_response"`
	DueBy             time.Time     `json:"due_by"`
	RespondedAt       *time.Time    `json:"responded_at"`
	ClosedAt          *time.Time    `json:"closed_at"`
	Livemode          bool          `json:"livemode"`
	CreatedAt         time.Time     `json:"created_at"`
	UpdatedAt         time.Time     `json:"updated_at"`
}

// DisputeResponseParams answers a dispute: evidence URLs, a written
// answer, or both.
type DisputeResponseParams struct {
	Evidence         []string `json:"evidence,omitempty"`
	MerchantResponse string   `json:"merchant_response,omitempty"`
}

// PayoutDestination is where a withdrawal is paid.
type PayoutDestination struct {
	Phone *string `json:"phone"`
	IBAN  *string `json:"iban"`
	Bank  *string `json:"bank"`
}

// PayoutRequest is a request to withdraw part of the balance.
type PayoutRequest struct {
	ID              string              `json:"id"`
	Object          string              `json:"object"`
	Reference       string              `json:"reference"`
	Status          PayoutRequestStatus `json:"status"`
	Amount          string              `json:"amount"`
	FeeAmount       string              `json:"fee_amount"`
	NetAmount       string              `json:"net_amount"`
	Currency        Currency            `json:"currency"`
	Destination     PayoutDestination   `json:"destination"`
	MerchantNote    *string             `json:"merchant_note"`
	SubmittedAt     time.Time           `json:"submitted_at"`
	ApprovedAt      *time.Time          `json:"approved_at"`
	CompletedAt     *time.Time          `json:"completed_at"`
	RejectionReason string              `json:"rejection_reason,omitempty"`
	FailureReason   string              `json:"failure_reason,omitempty"`
	Livemode        bool                `json:"livemode"`
	UpdatedAt       time.Time           `json:"updated_at"`
}

// PayoutRequestParams asks for a withdrawal to the merchant's phone
// (DestinationPhone) or bank account (DestinationIBAN). Amount is in
// whole units.
type PayoutRequestParams struct {
	Amount           int64    `json:"amount"`
	Currency         Currency `json:"currency,omitempty"`
	DestinationPhone string   `json:"destination_phone,omitempty"`
	DestinationIBAN  string   `json:"destination_iban,omitempty"`
	DestinationBank  string   `json:"destination_bank,omitempty"`
	MerchantNote     string   `json:"merchant_note,omitempty"`
}

// Settlement is a completed payout request.
type Settlement struct {
	ID              string            `json:"id"`
	Object          string            `json:"object"`
	PayoutRequestID string            `json:"payout_request_id"`
	Reference       string            `json:"reference"`
	Status          string            `json:"status"`
	Amount          string            `json:"amount"`
	FeeAmount       string            `json:"fee_amount"`
	NetAmount       string            `json:"net_amount"`
	Currency        Currency          `json:"currency"`
	Destination     PayoutDestination `json:"destination"`
	SettledAt       time.Time         `json:"settled_at"`
	Livemode        bool              `json:"livemode"`
}

// WebhookEndpoint is a URL that receives the account's events.
type WebhookEndpoint struct {
	ID            string        `json:"id"`
	Object        string        `json:"object"`
	URL           string        `json:"url"`
	Description   *string       `json:"description"`
	Events        []string      `json:"events"`
	PayloadFormat PayloadFormat `json:"payload_format"`
	Status        string        `json:"status"`
	// Secret is set only in the answers to Create and RotateSecret.
	Secret                  string     `json:"secret,omitempty"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	Livemode                bool       `json:"livemode"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

// WebhookEndpointParams registers an endpoint. Events empty: every event.
type WebhookEndpointParams struct {
	URL           string        `json:"url"`
	Events        []string      `json:"events,omitempty"`
	PayloadFormat PayloadFormat `json:"payload_format,omitempty"`
	Description   string        `json:"description,omitempty"`
}

// RotateSecretParams rotates an endpoint's secret; GracePeriod (seconds)
// is how long the old one keeps signing: nil is 24 hours.
type RotateSecretParams struct {
	GracePeriod *int64 `json:"grace_period,omitempty"`
}

// WebhookTestParams sends a test event to one endpoint, or every one when
// EndpointID is empty.
type WebhookTestParams struct {
	EndpointID string `json:"endpoint_id,omitempty"`
}

// WebhookSecret is a signing secret kept per merchant and mode.
type WebhookSecret struct {
	Object   string `json:"object"`
	Secret   string `json:"secret"`
	Livemode bool   `json:"livemode"`
}

// WebhookAttempt is one try of a delivery.
type WebhookAttempt struct {
	ID           string    `json:"id"`
	AttemptedAt  time.Time `json:"attempted_at"`
	DurationMS   int64     `json:"duration_ms"`
	HTTPStatus   *int      `json:"http_status"`
	ErrorMessage *string   `json:"error_message"`
}

// WebhookDelivery is an event on its way to one URL.
type WebhookDelivery struct {
	ID            string           `json:"id"`
	EndpointID    *string          `json:"endpoint_id"`
	URL           string           `json:"url"`
	PayloadFormat PayloadFormat    `json:"payload_format"`
	Status        DeliveryStatus   `json:"status"`
	AttemptCount  int              `json:"attempt_count"`
	NextAttemptAt *time.Time       `json:"next_attempt_at"`
	LastAttemptAt *time.Time       `json:"last_attempt_at"`
	Attempts      []WebhookAttempt `json:"attempts"`
}

// Event is something that happened to one of the account's objects.
type Event struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Type       string `json:"type"`
	ObjectType string `json:"object_type"`
	ObjectID   string `json:"object_id"`
	Sequence   int64  `json:"sequence"`
	// Data is the object's record as it was after the change.
	Data      json.RawMessage `json:"data"`
	Livemode  bool            `json:"livemode"`
	CreatedAt time.Time       `json:"created_at"`
	// Deliveries is set when one event is read (not in lists).
	Deliveries []WebhookDelivery `json:"deliveries,omitempty"`
}

// RedeliverParams selects the events Events.RedeliverMatching sends again;
// every field is optional. From and To are dates (2026-11-21) or RFC 3339
// times.
type RedeliverParams struct {
	Type           string         `json:"type,omitempty"`
	From           string         `json:"from,omitempty"`
	To             string         `json:"to,omitempty"`
	DeliveryStatus DeliveryStatus `json:"delivery_status,omitempty"`
	EndpointID     string         `json:"endpoint_id,omitempty"`
}

// Redelivery is what a redelivery by filter did.
type Redelivery struct {
	Object string `json:"object"`
	// Events is how many events are sent again.
	Events int `json:"events"`
}

// RouteHealth is the health of one route to a provider.
type RouteHealth struct {
	Route   string `json:"route"`
	Healthy bool   `json:"healthy"`
	State   string `json:"state"`
}

// ProviderInfo is a provider the account can use.
type ProviderInfo struct {
	ID         Provider       `json:"id"`
	Object     string         `json:"object"`
	Countries  []Country      `json:"countries"`
	Payments   bool           `json:"payments"`
	Payouts    bool           `json:"payouts"`
	Refunds    bool           `json:"refunds"`
	NextAction NextActionType `json:"next_action"`
	MinAmount  int64          `json:"min_amount"`
	Currency   Currency       `json:"currency"`
	Healthy    bool           `json:"healthy"`
	Routes     []RouteHealth  `json:"routes"`
	Allowed    bool           `json:"allowed"`
	Livemode   bool           `json:"livemode"`
}

// PaymentStatus is the reduced view of a payment that a publishable key
// reads from GET /v1/status/{reference}: nothing of the payer, the
// metadata, the URLs or the fees.
type PaymentStatus struct {
	ID        string  `json:"id"`
	Object    string  `json:"object"`
	Reference string  `json:"reference"`
	Status    string  `json:"status"`
	Amount    string  `json:"amount"`
	Currency  string  `json:"currency"`
	Provider  *string `json:"provider"`
	ExpiresAt string  `json:"expires_at"`
	Livemode  bool    `json:"livemode"`
}
