package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// TransactionListParams filters payments or payouts. From and To are dates
// (2026-11-21) or RFC 3339 times.
type TransactionListParams struct {
	ListParams
	Status      TransactionStatus
	Provider    Provider
	From, To    string
	MerchantRef string
}

func (p *TransactionListParams) values() url.Values {
	if p == nil {
		return url.Values{}
	}
	q := p.ListParams.values()
	set(q, "status", string(p.Status))
	set(q, "provider", string(p.Provider))
	set(q, "from", p.From)
	set(q, "to", p.To)
	set(q, "merchant_ref", p.MerchantRef)
	return q
}

func set(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func listParams(p *ListParams) ListParams {
	if p == nil {
		return ListParams{}
	}
	return *p
}

// PaymentService collects money from payers' wallets.
type PaymentService struct{ c *Client }

// Create makes a payment (POST /v1/payments).
func (s *PaymentService) Create(ctx context.Context, p *PaymentParams, opts ...RequestOption) (*Transaction, error) {
	return post[Transaction](ctx, s.c, http.MethodPost, "/v1/payments", p, opts)
}

// Precheck asks whether a payment with these parameters would be
// accepted now, provider by provider, and how much the payer may still
// pay under the BCEAO ceiling, creating nothing (POST
// /v1/payments/precheck). MerchantRef, SuccessURL and FailedURL may be
// left empty. It needs a secret key. No Idempotency-Key is sent: nothing
// is created, so every retry is safe.
func (s *PaymentService) Precheck(ctx context.Context, p *PaymentParams, opts ...RequestOption) (*PaymentPrecheck, error) {
	var env envelope[*PaymentPrecheck]
	r := &request{method: http.MethodPost, path: "/v1/payments/precheck", body: p, changesNothing: true}
	if err := s.c.call(ctx, r, &env, opts); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// Get reads a payment by id.
func (s *PaymentService) Get(ctx context.Context, id string, opts ...RequestOption) (*Transaction, error) {
	return get[Transaction](ctx, s.c, pathf("/v1/payments/%s", id), opts)
}

// Status reads a payment or payout by TXN- reference, merchant_ref or id
// (GET /v1/status/{reference}) with a secret key.
func (s *PaymentService) Status(ctx context.Context, reference string, opts ...RequestOption) (*Transaction, error) {
	return get[Transaction](ctx, s.c, pathf("/v1/status/%s", reference), opts)
}

// PublicStatus reads a payment by id or TXN- reference with a publishable
// key: the reduced view.
func (s *PaymentService) PublicStatus(ctx context.Context, reference string, opts ...RequestOption) (*PaymentStatus, error) {
	return get[PaymentStatus](ctx, s.c, pathf("/v1/status/%s", reference), opts)
}

// List iterates over the payments, newest first.
func (s *PaymentService) List(ctx context.Context, p *TransactionListParams, opts ...RequestOption) iter.Seq2[*Transaction, error] {
	var lp ListParams
	if p != nil {
		lp = p.ListParams
	}
	return pages[Transaction](ctx, s.c, "/v1/payments", p.values(), lp, opts)
}

// Verify asks the provider about an open payment and syncs its status.
func (s *PaymentService) Verify(ctx context.Context, id string, opts ...RequestOption) (*Transaction, error) {
	return post[Transaction](ctx, s.c, http.MethodPost, pathf("/v1/payments/%s/verify", id), nil, opts)
}

// Simulate settles a test payment (test keys only): outcome success,
// failed or cancelled.
func (s *PaymentService) Simulate(ctx context.Context, id, outcome string, opts ...RequestOption) (*Transaction, error) {
	return post[Transaction](ctx, s.c, http.MethodPost, pathf("/v1/test-helpers/payments/%s/simulate", id), &SimulateParams{Outcome: outcome}, opts)
}

// PayoutService sends money from the balance to wallets.
type PayoutService struct{ c *Client }

// Create makes a payout (POST /v1/payouts).
func (s *PayoutService) Create(ctx context.Context, p *PayoutParams, opts ...RequestOption) (*Transaction, error) {
	return post[Transaction](ctx, s.c, http.MethodPost, "/v1/payouts", p, opts)
}

// Get reads a payout by id or merchant_ref.
func (s *PayoutService) Get(ctx context.Context, id string, opts ...RequestOption) (*Transaction, error) {
	return get[Transaction](ctx, s.c, pathf("/v1/payouts/%s", id), opts)
}

// List iterates over the payouts, newest first.
func (s *PayoutService) List(ctx context.Context, p *TransactionListParams, opts ...RequestOption) iter.Seq2[*Transaction, error] {
	var lp ListParams
	if p != nil {
		lp = p.ListParams
	}
	return pages[Transaction](ctx, s.c, "/v1/payouts", p.values(), lp, opts)
}

// RefundService gives back successful payments.
type RefundService struct{ c *Client }

// Create refunds a payment (POST /v1/refunds).
func (s *RefundService) Create(ctx context.Context, p *RefundParams, opts ...RequestOption) (*Transaction, error) {
	return post[Transaction](ctx, s.c, http.MethodPost, "/v1/refunds", p, opts)
}

// Get reads a refund.
func (s *RefundService) Get(ctx context.Context, id string, opts ...RequestOption) (*Transaction, error) {
	return get[Transaction](ctx, s.c, pathf("/v1/refunds/%s", id), opts)
}

// PayoutRequestService withdraws the balance to the merchant's account.
type PayoutRequestService struct{ c *Client }

// Create submits a payout request.
func (s *PayoutRequestService) Create(ctx context.Context, p *PayoutRequestParams, opts ...RequestOption) (*PayoutRequest, error) {
	return post[PayoutRequest](ctx, s.c, http.MethodPost, "/v1/payout-requests", p, opts)
}

// Get reads a payout request by id or PR- reference.
func (s *PayoutRequestService) Get(ctx context.Context, id string, opts ...RequestOption) (*PayoutRequest, error) {
	return get[PayoutRequest](ctx, s.c, pathf("/v1/payout-requests/%s", id), opts)
}

// List returns the last 50 payout requests, newest first.
func (s *PayoutRequestService) List(ctx context.Context, opts ...RequestOption) ([]*PayoutRequest, error) {
	return all[PayoutRequest](ctx, s.c, "/v1/payout-requests", nil, opts)
}

// BalanceService reads the balance.
type BalanceService struct{ c *Client }

// Get reads the balance.
func (s *BalanceService) Get(ctx context.Context, opts ...RequestOption) (*Balance, error) {
	return get[Balance](ctx, s.c, "/v1/balance", opts)
}

// SettlementService lists the money paid out to the merchant.
type SettlementService struct{ c *Client }

// List iterates over the settlements, newest first.
func (s *SettlementService) List(ctx context.Context, p *ListParams, opts ...RequestOption) iter.Seq2[*Settlement, error] {
	lp := listParams(p)
	return pages[Settlement](ctx, s.c, "/v1/settlements", lp.values(), lp, opts)
}

// DisputeService answers payers' disputes.
type DisputeService struct{ c *Client }

// DisputeListParams filters disputes by status.
type DisputeListParams struct {
	ListParams
	Status DisputeStatus
}

// List iterates over the disputes, newest first.
func (s *DisputeService) List(ctx context.Context, p *DisputeListParams, opts ...RequestOption) iter.Seq2[*Dispute, error] {
	var lp ListParams
	q := url.Values{}
	if p != nil {
		lp, q = p.ListParams, p.ListParams.values()
		set(q, "status", string(p.Status))
	}
	return pages[Dispute](ctx, s.c, "/v1/disputes", q, lp, opts)
}

// Get reads a dispute by id or DSP- reference.
func (s *DisputeService) Get(ctx context.Context, id string, opts ...RequestOption) (*Dispute, error) {
	return get[Dispute](ctx, s.c, pathf("/v1/disputes/%s", id), opts)
}

// Respond answers a dispute still needs_response.
func (s *DisputeService) Respond(ctx context.Context, id string, p *DisputeResponseParams, opts ...RequestOption) (*Dispute, error) {
	return post[Dispute](ctx, s.c, http.MethodPost, pathf("/v1/disputes/%s/respond", id), p, opts)
}

// SplitService divides payments among marketplace beneficiaries.
type SplitService struct{ c *Client }

// Create adds shares to a payment's splits and returns them.
func (s *SplitService) Create(ctx context.Context, paymentID string, p *SplitParams, opts ...RequestOption) ([]*SplitItem, error) {
	var env envelope[[]*SplitItem]
	err := s.c.call(ctx, &request{method: http.MethodPost, path: pathf("/v1/payments/%s/splits", paymentID), body: p}, &env, opts)
	return env.Data, err
}

// List returns all of a payment's split items, oldest first.
func (s *SplitService) List(ctx context.Context, paymentID string, opts ...RequestOption) ([]*SplitItem, error) {
	return all[SplitItem](ctx, s.c, pathf("/v1/payments/%s/splits", paymentID), nil, opts)
}

// SubscriptionService bills customers each period.
type SubscriptionService struct{ c *Client }

// SubscriptionListParams filters subscriptions by status.
type SubscriptionListParams struct {
	ListParams
	Status SubscriptionStatus
}

// Create subscribes a customer to a plan.
func (s *SubscriptionService) Create(ctx context.Context, p *SubscriptionParams, opts ...RequestOption) (*Subscription, error) {
	return post[Subscription](ctx, s.c, http.MethodPost, "/v1/subscriptions", p, opts)
}

// Get reads a subscription.
func (s *SubscriptionService) Get(ctx context.Context, id string, opts ...RequestOption) (*Subscription, error) {
	return get[Subscription](ctx, s.c, pathf("/v1/subscriptions/%s", id), opts)
}

// List iterates over the subscriptions, newest first.
func (s *SubscriptionService) List(ctx context.Context, p *SubscriptionListParams, opts ...RequestOption) iter.Seq2[*Subscription, error] {
	var lp ListParams
	q := url.Values{}
	if p != nil {
		lp, q = p.ListParams, p.ListParams.values()
		set(q, "status", string(p.Status))
	}
	return pages[Subscription](ctx, s.c, "/v1/subscriptions", q, lp, opts)
}

// Cancel ends a subscription at once.
func (s *SubscriptionService) Cancel(ctx context.Context, id string, opts ...RequestOption) (*Subscription, error) {
	return post[Subscription](ctx, s.c, http.MethodPost, pathf("/v1/subscriptions/%s/cancel", id), nil, opts)
}

// CancelAtPeriodEnd ends a subscription when its current period ends.
func (s *SubscriptionService) CancelAtPeriodEnd(ctx context.Context, id string, opts ...RequestOption) (*Subscription, error) {
	return post[Subscription](ctx, s.c, http.MethodPost, pathf("/v1/subscriptions/%s/cancel-at-period-end", id), nil, opts)
}

// PlanService manages the prices subscriptions follow.
type PlanService struct{ c *Client }

// PlanListParams filters plans; Active nil lists all.
type PlanListParams struct {
	ListParams
	Active *bool
}

// Create makes a plan.
func (s *PlanService) Create(ctx context.Context, p *PlanParams, opts ...RequestOption) (*Plan, error) {
	return post[Plan](ctx, s.c, http.MethodPost, "/v1/plans", p, opts)
}

// Get reads a plan.
func (s *PlanService) Get(ctx context.Context, id string, opts ...RequestOption) (*Plan, error) {
	return get[Plan](ctx, s.c, pathf("/v1/plans/%s", id), opts)
}

// List iterates over the plans, newest first.
func (s *PlanService) List(ctx context.Context, p *PlanListParams, opts ...RequestOption) iter.Seq2[*Plan, error] {
	var lp ListParams
	q := url.Values{}
	if p != nil {
		lp, q = p.ListParams, p.ListParams.values()
		if p.Active != nil {
			q.Set("active", strconv.FormatBool(*p.Active))
		}
	}
	return pages[Plan](ctx, s.c, "/v1/plans", q, lp, opts)
}

// Deactivate stops a plan taking new subscriptions.
func (s *PlanService) Deactivate(ctx context.Context, id string, opts ...RequestOption) (*Plan, error) {
	return post[Plan](ctx, s.c, http.MethodPost, pathf("/v1/plans/%s/deactivate", id), nil, opts)
}

// CustomerService reads the payers the merchant knows.
type CustomerService struct{ c *Client }

// Get reads a customer.
func (s *CustomerService) Get(ctx context.Context, id string, opts ...RequestOption) (*Customer, error) {
	return get[Customer](ctx, s.c, pathf("/v1/customers/%s", id), opts)
}

// List iterates over the customers, newest first.
func (s *CustomerService) List(ctx context.Context, p *ListParams, opts ...RequestOption) iter.Seq2[*Customer, error] {
	lp := listParams(p)
	return pages[Customer](ctx, s.c, "/v1/customers", lp.values(), lp, opts)
}

// WebhookEndpointService manages the URLs that receive events, and the
// signing secrets.
type WebhookEndpointService struct{ c *Client }

// Create registers an endpoint; its Secret is in this answer only.
func (s *WebhookEndpointService) Create(ctx context.Context, p *WebhookEndpointParams, opts ...RequestOption) (*WebhookEndpoint, error) {
	return post[WebhookEndpoint](ctx, s.c, http.MethodPost, "/v1/webhook-endpoints", p, opts)
}

// Get reads an endpoint.
func (s *WebhookEndpointService) Get(ctx context.Context, id string, opts ...RequestOption) (*WebhookEndpoint, error) {
	return get[WebhookEndpoint](ctx, s.c, pathf("/v1/webhook-endpoints/%s", id), opts)
}

// List returns the endpoints (at most 16), oldest first.
func (s *WebhookEndpointService) List(ctx context.Context, opts ...RequestOption) ([]*WebhookEndpoint, error) {
	return all[WebhookEndpoint](ctx, s.c, "/v1/webhook-endpoints", nil, opts)
}

// Delete stops an endpoint's deliveries.
func (s *WebhookEndpointService) Delete(ctx context.Context, id string, opts ...RequestOption) (*WebhookEndpoint, error) {
	return post[WebhookEndpoint](ctx, s.c, http.MethodDelete, pathf("/v1/webhook-endpoints/%s", id), nil, opts)
}

// RotateSecret gives an endpoint a new secret (in the answer).
func (s *WebhookEndpointService) RotateSecret(ctx context.Context, id string, p *RotateSecretParams, opts ...RequestOption) (*WebhookEndpoint, error) {
	if p == nil {
		p = &RotateSecretParams{}
	}
	return post[WebhookEndpoint](ctx, s.c, http.MethodPost, pathf("/v1/webhook-endpoints/%s/rotate-secret", id), p, opts)
}

// SendTest sends a webhook.test event and returns it with its deliveries.
func (s *WebhookEndpointService) SendTest(ctx context.Context, p *WebhookTestParams, opts ...RequestOption) (*Event, error) {
	if p == nil {
		p = &WebhookTestParams{}
	}
	return post[Event](ctx, s.c, http.MethodPost, "/v1/webhooks/test", p, opts)
}

// CallbackSecret returns the secret that signs callback_url deliveries.
func (s *WebhookEndpointService) CallbackSecret(ctx context.Context, opts ...RequestOption) (*WebhookSecret, error) {
	return get[WebhookSecret](ctx, s.c, "/v1/webhooks/callback-secret", opts)
}

// ListenSecret returns the secret `xaalis listen` signs forwarded events
// with.
func (s *WebhookEndpointService) ListenSecret(ctx context.Context, opts ...RequestOption) (*WebhookSecret, error) {
	return get[WebhookSecret](ctx, s.c, "/v1/webhooks/listen-secret", opts)
}

// EventService reads events and sends them again.
type EventService struct{ c *Client }

// EventListParams filters events. From and To are dates or RFC 3339 times.
type EventListParams struct {
	ListParams
	Type           string
	From, To       string
	DeliveryStatus DeliveryStatus
}

// Get reads an event with its deliveries.
func (s *EventService) Get(ctx context.Context, id string, opts ...RequestOption) (*Event, error) {
	return get[Event](ctx, s.c, pathf("/v1/events/%s", id), opts)
}

// List iterates over the events, newest first.
func (s *EventService) List(ctx context.Context, p *EventListParams, opts ...RequestOption) iter.Seq2[*Event, error] {
	var lp ListParams
	q := url.Values{}
	if p != nil {
		lp, q = p.ListParams, p.ListParams.values()
		set(q, "type", p.Type)
		set(q, "from", p.From)
		set(q, "to", p.To)
		set(q, "delivery_status", string(p.DeliveryStatus))
	}
	return pages[Event](ctx, s.c, "/v1/events", q, lp, opts)
}

// Redeliver sends one event again to every URL it went to.
func (s *EventService) Redeliver(ctx context.Context, id string, opts ...RequestOption) (*Event, error) {
	return post[Event](ctx, s.c, http.MethodPost, pathf("/v1/events/%s/redeliver", id), nil, opts)
}

// RedeliverMatching sends again the events matching p (at most 10,000).
func (s *EventService) RedeliverMatching(ctx context.Context, p *RedeliverParams, opts ...RequestOption) (*Redelivery, error) {
	if p == nil {
		p = &RedeliverParams{}
	}
	return post[Redelivery](ctx, s.c, http.MethodPost, "/v1/events/redeliver", p, opts)
}

// ProviderService lists the providers the account can use.
type ProviderService struct{ c *Client }

// List returns the providers, for one country when country is not empty.
func (s *ProviderService) List(ctx context.Context, country Country, opts ...RequestOption) ([]*ProviderInfo, error) {
	q := url.Values{}
	set(q, "country", string(country))
	return all[ProviderInfo](ctx, s.c, "/v1/providers", q, opts)
}
