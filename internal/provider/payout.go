package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Reasons of payouts and refunds.
const (
	// ReasonRecipientRejected: the recipient's wallet refused the money
	// (magic suffix 0002 of the recipient's number).
	ReasonRecipientRejected = "recipient_wallet_rejected"
	// ReasonPayoutCancelled: the provider cancelled the payout (0003).
	ReasonPayoutCancelled = "payout_cancelled"
)

// checkPayouts returns an error unless the provider is configured, makes
// payouts (provider_payout_unsupported), is enabled and serves the country
// (gateway_error).
func (g *Gateway) checkPayouts(provider string, country xaalis.Country) (xaalis.ProviderSpec, error) {
	p, ok := g.spec(provider)
	switch {
	case !ok:
		return p, refuse(provider, "The provider %q is not configured.", provider)
	case !p.Payouts:
		return p, xaalis.E(xaalis.EProviderPayoutUnsupported, "provider", provider)
	case !p.Enabled:
		return p, refuse(provider, "The provider %s is disabled.", provider)
	case !p.Serves(country):
		return p, refuse(provider, "The provider %s does not serve country %q.", provider, country)
	}
	return p, nil
}

// Payout sends money to a wallet: in test mode on the provider's
// simulator, which settles it at once by the recipient's magic number, in
// live mode over the provider's routes. The Reference is the provider's
// idempotency key: the same Reference answers the first payout.
//
// In live mode a payout is passed to the next route only when it
// provably never left Xaalis (see the package documentation); when its
// outcome is unknown (a timeout or a 5xx after the body was sent), Payout
// returns gateway_unavailable at once and the caller asks PayoutStatus.
func (g *Gateway) Payout(ctx context.Context, r xaalis.PayoutOrder) (xaalis.PayoutResult, error) {
	if r.Reference == "" {
		return xaalis.PayoutResult{}, fmt.Errorf("provider: payout %q without a reference", r.TransactionID)
	}
	spec, err := g.checkPayouts(r.Provider, r.Country)
	if err != nil {
		return xaalis.PayoutResult{}, err
	}
	if r.Amount.Minor <= 0 {
		return xaalis.PayoutResult{}, refuse(r.Provider, "The payout amount must be positive.")
	}
	switch r.Mode {
	case xaalis.ModeTest:
		return g.simulate(r.Provider, "payout", func(sim *simulator) (xaalis.PayoutResult, error) { return sim.payout(r) })
	case xaalis.ModeLive:
		return g.livePayout(ctx, spec, r)
	}
	return xaalis.PayoutResult{}, fmt.Errorf("provider: payout: unknown mode %q", r.Mode)
}

// PayoutStatus asks about a payout by its Reference: xaalis.ErrNotFound
// when the provider never received it. In live mode it asks the routes in
// order and answers not_found only when every route answered that it does
// not know the reference; a route that could not be asked may be the one
// that has it, so that is gateway_unavailable.
func (g *Gateway) PayoutStatus(ctx context.Context, mode xaalis.Mode, provider, reference string) (xaalis.PayoutResult, error) {
	p, ok := g.spec(provider)
	switch {
	case !ok:
		return xaalis.PayoutResult{}, refuse(provider, "The provider %q is not configured.", provider)
	case !p.Payouts:
		return xaalis.PayoutResult{}, xaalis.E(xaalis.EProviderPayoutUnsupported, "provider", provider)
	case reference == "":
		return xaalis.PayoutResult{}, fmt.Errorf("provider: payout status without a reference")
	}
	switch mode {
	case xaalis.ModeTest:
		return g.simulate(provider, "payout_status", func(sim *simulator) (xaalis.PayoutResult, error) { return sim.payoutStatus(reference) })
	case xaalis.ModeLive:
		return g.livePayoutStatus(ctx, p, provider, reference)
	}
	return xaalis.PayoutResult{}, fmt.Errorf("provider: payout status: unknown mode %q", mode)
}

// Refund gives back part or all of a payment: refund_not_supported for a
// provider whose configuration has refunds false. The Reference is the
// provider's idempotency key. In live mode it goes to the payment's route
// first, and to another route only when it provably never left Xaalis.
// An attempt whose outcome is unknown returns gateway_unavailable with
// the route it went to (PayoutResult.Route): the caller sends it again
// there only (RefundRequest.Pinned), since nothing says that another
// route shares the first one's idempotency.
func (g *Gateway) Refund(ctx context.Context, r xaalis.RefundRequest) (xaalis.PayoutResult, error) {
	p, ok := g.spec(r.Provider)
	switch {
	case !ok:
		return xaalis.PayoutResult{}, refuse(r.Provider, "The provider %q is not configured.", r.Provider)
	case !p.Refunds:
		return xaalis.PayoutResult{}, xaalis.E(xaalis.ERefundNotSupported, "provider", r.Provider)
	case r.Reference == "" || r.PaymentProviderRef == "":
		return xaalis.PayoutResult{}, fmt.Errorf("provider: refund %q of payment %q: reference and payment provider ref are required", r.Reference, r.PaymentProviderRef)
	case r.Amount.Minor <= 0:
		return xaalis.PayoutResult{}, refuse(r.Provider, "The refund amount must be positive.")
	}
	switch r.Mode {
	case xaalis.ModeTest:
		return g.simulate(r.Provider, "refund", func(sim *simulator) (xaalis.PayoutResult, error) { return sim.refund(r) })
	case xaalis.ModeLive:
		return g.liveRefund(ctx, p, r)
	}
	return xaalis.PayoutResult{}, fmt.Errorf("provider: refund: unknown mode %q", r.Mode)
}

// RefundStatus asks about a refund by its Reference: xaalis.ErrNotFound
// when the provider never received it, so that sending it, on any route,
// cannot refund twice. In live mode it asks the routes in order, route
// (the payment's) first, and answers not_found only when every route
// answered that it does not know the reference; a route that could not be
// asked, or that refused to say (refund_unsupported included), may be the
// one that has it, so that is gateway_unavailable. It asks whatever the
// configuration now says of the provider's refunds: a refund sent before
// it changed may have been made.
func (g *Gateway) RefundStatus(ctx context.Context, mode xaalis.Mode, provider, route, reference string) (xaalis.PayoutResult, error) {
	p, ok := g.spec(provider)
	switch {
	case !ok:
		return xaalis.PayoutResult{}, refuse(provider, "The provider %q is not configured.", provider)
	case reference == "":
		return xaalis.PayoutResult{}, fmt.Errorf("provider: refund status without a reference")
	}
	switch mode {
	case xaalis.ModeTest:
		return g.simulate(provider, "refund_status", func(sim *simulator) (xaalis.PayoutResult, error) { return sim.refundStatus(reference) })
	case xaalis.ModeLive:
		return g.liveRefundStatus(ctx, p, provider, route, reference)
	}
	return xaalis.PayoutResult{}, fmt.Errorf("provider: refund status: unknown mode %q", mode)
}

// simulate runs a payout or refund operation (op, as the Observer names
// it) on the test-mode simulator of provider, observed as its request.
func (g *Gateway) simulate(provider, op string, f func(*simulator) (xaalis.PayoutResult, error)) (xaalis.PayoutResult, error) {
	sim, err := g.sim(provider)
	if err != nil {
		return xaalis.PayoutResult{}, err
	}
	start := time.Now()
	res, err := f(sim)
	g.observeSim(provider, op, start, err)
	return res, err
}

// RouteOutcomeUnknown is the route reason of a refund sent to a route
// that gave no answer: it is sent again there only.
const RouteOutcomeUnknown = "outcome unknown: sent again on this route only"

// unsupported maps the provider API's payout_unsupported and
// refund_unsupported refusals to their Xaalis codes.
func unsupported(provider string, be *businessError) error {
	switch be.code {
	case CodePayoutUnsupported:
		return xaalis.E(xaalis.EProviderPayoutUnsupported, "provider", provider)
	case CodeRefundUnsupported:
		return xaalis.E(xaalis.ERefundNotSupported, "provider", provider)
	}
	return nil
}

// checkAnswer checks a provider's answer about a payout or refund.
func checkAnswer(kind, id, reference, status, want string) (xaalis.ProviderState, error) {
	st, ok := state(status)
	if !ok || id == "" || (reference != "" && reference != want) {
		return "", &routeFailure{cause: "bad response", err: fmt.Errorf("%s %q reference %q status %q", kind, id, reference, status)}
	}
	return st, nil
}

func (g *Gateway) livePayout(ctx context.Context, spec xaalis.ProviderSpec, r xaalis.PayoutOrder) (xaalis.PayoutResult, error) {
	body := PayoutRequest{
		Reference:     r.Reference,
		Amount:        r.Amount.Minor,
		Currency:      string(r.Amount.Currency),
		Phone:         r.RecipientPhone,
		Country:       string(r.Country),
		RecipientName: r.RecipientName,
		NotifyURL:     r.NotifyURL,
	}
	var out xaalis.PayoutResult
	pol := policy{unsentOnly: true, refusal: unsupported, unknown: "ask the provider for its status before sending it again"}
	route, reason, err := g.tryRoutesWith(ctx, r.Provider, "payout", spec.Routes, pol, func(ctx context.Context, rt xaalis.RouteSpec) error {
		var p Payout
		if err := g.call(ctx, rt, http.MethodPost, "/payouts", r.Reference, true, body, &p); err != nil {
			return err
		}
		st, err := checkAnswer("payout", p.ID, p.Reference, p.Status, r.Reference)
		if err != nil {
			return err
		}
		out = xaalis.PayoutResult{ProviderRef: p.ID, State: st, Reason: p.Reason}
		return nil
	})
	if err != nil {
		return xaalis.PayoutResult{}, err
	}
	out.Route, out.RouteReason = route, reason
	if reason != "primary" {
		g.log.Warn("provider failover", "provider", r.Provider, "reference", r.Reference, "op", "payout", "route", route, "reason", reason)
	}
	return out, nil
}

func (g *Gateway) livePayoutStatus(ctx context.Context, spec xaalis.ProviderSpec, provider, reference string) (xaalis.PayoutResult, error) {
	return g.lookup(ctx, provider, "payout", spec.Routes, unsupported, reference)
}

// lookup asks the routes in order about a payout or refund (kind) by its
// reference (GET {base}/{kind}s?reference=): the first that knows it
// answers, not_found when every route said it does not (policy notFound).
// refusal maps the refusals that end the lookup (payout_unsupported).
func (g *Gateway) lookup(ctx context.Context, provider, kind string, routes []xaalis.RouteSpec, refusal func(string, *businessError) error, reference string) (xaalis.PayoutResult, error) {
	var out xaalis.PayoutResult
	pol := policy{notFound: true, refusal: refusal}
	found, reason, err := g.tryRoutesWith(ctx, provider, kind+" status", routes, pol, func(ctx context.Context, rt xaalis.RouteSpec) error {
		var a Payout // a Refund has the same fields
		if err := g.call(ctx, rt, http.MethodGet, "/"+kind+"s?reference="+url.QueryEscape(reference), "", false, nil, &a); err != nil {
			return err
		}
		st, err := checkAnswer(kind, a.ID, a.Reference, a.Status, reference)
		if err != nil {
			return err
		}
		out = xaalis.PayoutResult{ProviderRef: a.ID, State: st, Reason: a.Reason}
		return nil
	})
	if err != nil {
		return xaalis.PayoutResult{}, err
	}
	out.Route, out.RouteReason = found, foundReason(reason)
	return out, nil
}

// foundReason is the route reason of a payout or refund found by its
// reference (a lookup's route reason is "primary" or "failover: ..."):
// the route that knows it, after a call whose answer was lost.
func foundReason(reason string) string {
	if reason == "primary" {
		return "found by its reference"
	}
	return "found by its reference (" + reason + ")"
}

func (g *Gateway) liveRefund(ctx context.Context, spec xaalis.ProviderSpec, r xaalis.RefundRequest) (xaalis.PayoutResult, error) {
	body := RefundRequest{
		Reference:    r.Reference,
		CollectionID: r.PaymentProviderRef,
		Amount:       r.Amount.Minor,
		Currency:     string(r.Amount.Currency),
	}
	var out xaalis.PayoutResult
	pol := policy{unsentOnly: true, refusal: unsupported, unknown: "send it again with the same reference, on that route only: the provider does not refund twice"}
	routes := orderFrom(spec.Routes, r.Route)
	if r.Pinned {
		if len(routes) == 0 || routes[0].Name != r.Route {
			return xaalis.PayoutResult{Route: r.Route, RouteReason: RouteOutcomeUnknown}, unavailable(r.Provider, 5*time.Second,
				"The refund %s went to the route %s of the provider %s with an unknown outcome, and that route is no longer configured: it is sent to no other.",
				r.Reference, r.Route, r.Provider)
		}
		routes = routes[:1]
	}
	route, reason, err := g.tryRoutesWith(ctx, r.Provider, "refund", routes, pol, func(ctx context.Context, rt xaalis.RouteSpec) error {
		var f Refund
		if err := g.call(ctx, rt, http.MethodPost, "/refunds", r.Reference, true, body, &f); err != nil {
			return err
		}
		st, err := checkAnswer("refund", f.ID, f.Reference, f.Status, r.Reference)
		if err != nil {
			return err
		}
		out = xaalis.PayoutResult{ProviderRef: f.ID, State: st, Reason: f.Reason}
		return nil
	})
	if err != nil {
		if route != "" && xaalis.ErrorCode(err) == xaalis.EGatewayUnavailable {
			return xaalis.PayoutResult{Route: route, RouteReason: RouteOutcomeUnknown}, err
		}
		return xaalis.PayoutResult{}, err
	}
	out.Route, out.RouteReason = route, reason
	if reason != "primary" {
		g.log.Warn("provider failover", "provider", r.Provider, "reference", r.Reference, "op", "refund", "route", route, "reason", reason)
	}
	return out, nil
}

func (g *Gateway) liveRefundStatus(ctx context.Context, spec xaalis.ProviderSpec, provider, route, reference string) (xaalis.PayoutResult, error) {
	// No refusal ends it: refund_unsupported says nothing of a refund
	// sent before (RefundStatus).
	return g.lookup(ctx, provider, "refund", orderFrom(spec.Routes, route), nil, reference)
}
