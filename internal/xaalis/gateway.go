package xaalis

import (
	"context"
	"net/http"
	"time"
)

// NextActionType is the payer step a provider needs.
type NextActionType string

// Next action types (DECISIONS.md: Providers).
const (
	NextRedirect NextActionType = "redirect" // channel_a: open the wallet app
	NextOTP      NextActionType = "otp"      // channel_b: dial a USSD code, enter the one-time code
	NextUSSD     NextActionType = "ussd"     // channel_c: confirm the push on the handset
)

// NextAction is what the payer must do to finish a payment.
type NextAction struct {
	Type NextActionType `json:"type"`
	// RedirectURL is set for redirect.
	RedirectURL string `json:"redirect_url,omitempty"`
	// USSDCode is the code to dial: for otp to obtain the one-time code,
	// for ussd to find a push that did not arrive.
	USSDCode string `json:"ussd_code,omitempty"`
	// Instructions tell the payer, in English, what to do.
	Instructions string `json:"instructions,omitempty"`
}

// ProviderState is a payment's state as the provider reports it.
type ProviderState string

// Provider states.
const (
	ProviderPending   ProviderState = "pending"
	ProviderSuccess   ProviderState = "success"
	ProviderFailed    ProviderState = "failed"
	ProviderCancelled ProviderState = "cancelled"
)

// InitiateRequest asks a provider to start collecting a payment.
type InitiateRequest struct {
	Mode          Mode
	TransactionID string
	Reference     string // TXN-...
	Provider      string
	Country       Country
	Amount        Amount
	PayerPhone    string // E.164
	PayerName     string
	// SubMerchant is metadata.aggregated_merchant_id, passed to channel_a.
	SubMerchant string
	// NotifyURL is where the provider posts its notifications.
	NotifyURL string
	ExpiresAt time.Time
}

// Initiation is the provider's answer to InitiateRequest.
type Initiation struct {
	ProviderRef string
	NextAction  *NextAction
	// State is usually pending; a provider may settle at once, with
	// Reason saying why when it failed or was cancelled.
	State  ProviderState
	Reason string
	// Route names the route that served the call and RouteReason why it
	// was chosen (for example "primary" or "failover: direct timed out").
	Route       string
	RouteReason string
}

// ProviderStatus is a provider's view of one payment.
type ProviderStatus struct {
	State  ProviderState
	Reason string // failure or cancellation reason, when any
}

// Notification is an inbound provider notification, verified.
type Notification struct {
	// EventID is the provider's own id of the notification: the same id
	// twice is a duplicate.
	EventID     string
	Provider    string
	Country     Country
	ProviderRef string
	// Reference is the payment's TXN- reference, when the provider
	// echoes it: it names a payment whose initiation the provider took
	// but whose answer never came back, so that it has no ProviderRef.
	Reference string
	State     ProviderState
	Reason    string
	// Dispute, when set, reports a dispute on the payment (issue 6).
	Dispute *DisputeNotice
}

// DisputeNotice is a dispute a provider reports.
type DisputeNotice struct {
	Amount Amount
	Reason string
}

// PayoutOrder asks a provider to send money to a wallet. Reference (the
// payout's TXN- reference) is the provider's idempotency key: sending the
// same payout again returns the first one.
type PayoutOrder struct {
	Mode           Mode
	TransactionID  string
	Reference      string
	Provider       string
	Country        Country
	Amount         Amount
	RecipientPhone string
	RecipientName  string
	NotifyURL      string
}

// PayoutResult is a provider's answer about a payout.
type PayoutResult struct {
	ProviderRef string
	State       ProviderState // success, failed or pending
	Reason      string
	Route       string
	RouteReason string
}

// RefundRequest asks a provider to give back part or all of a payment.
type RefundRequest struct {
	Mode      Mode
	Reference string // the refund's TXN- reference: the idempotency key
	Provider  string
	// Route is the payment's route, tried first; with Pinned the only
	// one: an earlier attempt of this refund there has an unknown
	// outcome, and another route might refund it a second time.
	Route              string
	Pinned             bool
	PaymentProviderRef string
	Amount             Amount
}

// RouteHealth is the health of one route to a provider.
type RouteHealth struct {
	Route   string `json:"route"`
	Healthy bool   `json:"healthy"`
	// State is the circuit breaker's: closed, open or half_open.
	State string `json:"state"`
}

// Gateway reaches the providers: the in-process simulators for test mode,
// the HTTP adapters for live mode, through routing and failover.
//
// Initiate returns gateway_unavailable (with RetryAfter) when no route to
// the provider is healthy or every route failed before any money moved, and
// gateway_error when the provider refused with a business error.
type Gateway interface {
	// InProcess reports whether the providers of a mode answer in this
	// process, without network I/O (test mode's simulators): a command
	// may then call them inside its transaction and commit once.
	InProcess(mode Mode) bool
	Initiate(ctx context.Context, r InitiateRequest) (Initiation, error)
	// Status polls the provider about a payment it initiated.
	Status(ctx context.Context, mode Mode, provider, route, providerRef string) (ProviderStatus, error)
	// Collection asks about a payment by its reference, for one whose
	// initiation's answer never came back (a timeout after the provider
	// recorded it): ErrNotFound when the provider never received it.
	Collection(ctx context.Context, mode Mode, provider, reference string) (Initiation, error)
	// SubmitOTP forwards the one-time code the payer typed (channel_b).
	SubmitOTP(ctx context.Context, mode Mode, provider, route, providerRef, otp string) (ProviderStatus, error)
	// PayerAction records, in test mode only, what the simulated payer did
	// (the hosted page's test buttons and the simulate test helper): the
	// simulator's state changes and its notification follows.
	PayerAction(ctx context.Context, provider, providerRef string, outcome ProviderState) error
	// VerifyNotification checks and parses an inbound notification. It
	// returns invalid_signature, or provider_unavailable_webhook for a
	// provider disabled for that slug or country.
	VerifyNotification(ctx context.Context, provider string, r *http.Request, body []byte) (Notification, error)
	// Health reports every route of a provider in a mode.
	Health(mode Mode, provider string) []RouteHealth

	// Payout sends money to a wallet. An error means the outcome is
	// unknown or the call never got through; the caller asks again with
	// PayoutStatus, or sends again with the same Reference.
	Payout(ctx context.Context, r PayoutOrder) (PayoutResult, error)
	// PayoutStatus asks about a payout by its Reference. It returns
	// not_found when the provider never received it (safe to send).
	PayoutStatus(ctx context.Context, mode Mode, provider, reference string) (PayoutResult, error)
	// Refund gives back part or all of a payment. It returns
	// refund_not_supported for providers without automatic refunds.
	Refund(ctx context.Context, r RefundRequest) (PayoutResult, error)
	// RefundStatus asks about a refund by its Reference, on the route
	// given first (the payment's). It returns not_found when the provider
	// never received it (safe to send, on any route).
	RefundStatus(ctx context.Context, mode Mode, provider, route, reference string) (PayoutResult, error)
}

// ProviderCallBudget bounds one call to a provider, its failovers
// included, once the request that asked no longer can (providerContext):
// below the API's write timeout (60 s) and the Idempotency-Key's lease.
const ProviderCallBudget = 45 * time.Second

// providerContext is ctx for a call to a provider: not cancelled when the
// client hangs up (cut off, a call that reached the provider left an
// unknown outcome, settled only later), but bounded by
// ProviderCallBudget.
//
// A context already so bounded (and not since freed of its deadline by
// context.WithoutCancel) keeps its budget: a lookup by reference
// and the call that follows it share one (together they stay below the
// write timeout and DispatchAfter, past which another dispatcher may take
// the same payout or refund).
func providerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, bounded := ctx.Deadline(); bounded && ctx.Value(budgetKey{}) != nil {
		return context.WithCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ProviderCallBudget)
	return context.WithValue(ctx, budgetKey{}, true), cancel
}

// budgetKey marks a context bounded by providerContext.
type budgetKey struct{}
