package http

import (
	"net/http"

	"github.com/xaalis/xaalis/internal/checkout"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// routes lists every route of the API in one place. docs/security.md's
// table of routes and scopes is generated from it (Routes).
func (s *Server) routes() {
	read := secretKey(xaalis.ScopeReadTransactions)
	initiate := secretKey(xaalis.ScopeInitiatePayment)
	payout := secretKey(xaalis.ScopePayout)
	// Webhook endpoints receive every event, payouts included: reading or
	// managing them needs the read scope, and changing them the initiate
	// scope too (DECISIONS.md: Keys and modes).
	hooksRead := secretKey(xaalis.ScopeReadTransactions)
	hooksWrite := secretKey(xaalis.ScopeReadTransactions, xaalis.ScopeInitiatePayment)
	// Publishable keys may create payments and read their status only.
	checkoutCreate := routeAuth{scopes: []xaalis.Scope{xaalis.ScopeInitiatePayment}, publishable: true}
	statusRead := routeAuth{scopes: []xaalis.Scope{xaalis.ScopeReadTransactions}, publishable: true}
	// The precheck creates nothing, so it needs no Idempotency-Key; it
	// tells a payer's BCEAO room, so publishable keys may not call it.
	precheck := routeAuth{scopes: []xaalis.Scope{xaalis.ScopeInitiatePayment}, changesNothing: true}

	s.open("GET /healthz", accessNone, s.handleHealthz)
	s.open("GET /readyz", accessNone, s.handleReadyz)
	s.open("GET /v1/openapi.yaml", accessNone, s.handleOpenAPI)

	s.handle("POST /v1/payments", checkoutCreate, s.handlePaymentCreate)
	// A merchant's web page calls the publishable routes from its own
	// origin: their preflights (cors.go).
	s.open("OPTIONS /v1/payments", accessNone, preflight(http.MethodPost, "GET, HEAD, OPTIONS, POST"))
	s.open("OPTIONS /v1/status/{reference}", accessNone, preflight(http.MethodGet, "GET, HEAD, OPTIONS"))
	s.handle("POST /v1/payments/precheck", precheck, s.handlePaymentPrecheck)
	// A concrete path wins over a templated one in the contract (OpenAPI's
	// rule), so GET here is 405, not the payment whose merchant_ref is
	// "precheck": that one is read by id, reference or /v1/status/precheck.
	onlyPost(s.mux, "/v1/payments/precheck")
	s.handle("GET /v1/payments", read, s.handlePaymentList)
	s.handle("GET /v1/payments/{id}", read, s.handlePaymentGet)
	s.handle("POST /v1/payments/{id}/verify", initiate, s.handlePaymentVerify)
	s.handle("POST /v1/test-helpers/payments/{id}/simulate", initiate, s.handlePaymentSimulate)
	s.handle("GET /v1/status/{reference}", statusRead, s.handleStatus)
	s.handle("GET /v1/providers", read, s.handleProviders)
	s.open("POST /v1/providers/{provider}/notifications", accessProvider, s.throttled(&s.notifyLimits, s.handleProviderNotification))

	// The hosted payment page: the payment URL is the payer's credential;
	// browser form posts carry no API key and no Idempotency-Key. Every
	// route is rate-limited per client address.
	pages := &checkout.Pages{App: s.App, Logger: s.Logger}
	s.open("GET /checkout/{id}", accessPaymentURL, s.throttled(&s.pageLimits, pages.Show))
	s.open("POST /checkout/{id}/provider", accessPaymentURL, s.throttled(&s.pageLimits, pages.Choose))
	s.open("POST /checkout/{id}/otp", accessPaymentURL, s.throttled(&s.pageLimits, pages.OTP))
	s.open("POST /checkout/{id}/simulate", accessPaymentURL, s.throttled(&s.pageLimits, pages.Simulate))
	s.open("POST /checkout/{id}/cancel", accessPaymentURL, s.throttled(&s.pageLimits, pages.Cancel))
	s.open("GET /checkout/{id}/status", accessPaymentURL, s.throttled(&s.pageLimits, pages.StatusJSON))
	s.open("GET /checkout-assets/{name}", accessNone, s.throttled(&s.pageLimits, pages.Asset))
	s.open("GET /v1/checkout.js", accessNone, s.throttled(&s.pageLimits, pages.Script))

	s.handle("GET /v1/balance", read, s.handleBalance)
	s.handle("POST /v1/payouts", payout, s.handlePayoutCreate)
	s.handle("GET /v1/payouts", read, s.handlePayoutList)
	s.handle("GET /v1/payouts/{id}", read, s.handlePayoutGet)
	s.handle("POST /v1/refunds", initiate, s.handleRefundCreate)
	s.handle("GET /v1/refunds/{id}", read, s.handleRefundGet)
	s.handle("POST /v1/payout-requests", payout, s.handlePayoutRequestCreate)
	s.handle("GET /v1/payout-requests", read, s.handlePayoutRequestList)
	s.handle("GET /v1/payout-requests/{id}", read, s.handlePayoutRequestGet)
	s.handle("GET /v1/settlements", read, s.handleSettlements)

	s.handle("POST /v1/webhook-endpoints", hooksWrite, s.handleWebhookEndpointCreate)
	s.handle("GET /v1/webhook-endpoints", hooksRead, s.handleWebhookEndpointList)
	s.handle("GET /v1/webhook-endpoints/{id}", hooksRead, s.handleWebhookEndpointGet)
	s.handle("DELETE /v1/webhook-endpoints/{id}", hooksWrite, s.handleWebhookEndpointDelete)
	s.handle("POST /v1/webhook-endpoints/{id}/rotate-secret", hooksWrite, s.handleWebhookEndpointRotate)
	s.handle("POST /v1/webhooks/test", hooksWrite, s.handleWebhookTest)
	s.handle("GET /v1/webhooks/callback-secret", hooksWrite, s.handleCallbackSecret)
	s.handle("GET /v1/webhooks/listen-secret", hooksRead, s.handleListenSecret)
	s.handle("GET /v1/events", read, s.handleEventList)
	s.handle("GET /v1/events/stream", read, s.handleEventStream)
	s.handle("POST /v1/events/redeliver", hooksWrite, s.handleEventsRedeliver)
	onlyPost(s.mux, "/v1/events/redeliver") // not the event "redeliver"
	s.handle("GET /v1/events/{id}", read, s.handleEventGet)
	s.handle("POST /v1/events/{id}/redeliver", hooksWrite, s.handleEventRedeliver)

	s.handle("GET /v1/disputes", read, s.handleDisputeList)
	s.handle("GET /v1/disputes/{id}", read, s.handleDisputeGet)
	s.handle("POST /v1/disputes/{id}/respond", initiate, s.handleDisputeRespond)
	s.handle("POST /v1/payments/{id}/splits", initiate, s.handleSplitCreate)
	s.handle("GET /v1/payments/{id}/splits", read, s.handleSplitList)
	s.handle("POST /v1/subscriptions", initiate, s.handleSubscriptionCreate)
	s.handle("GET /v1/subscriptions", read, s.handleSubscriptionList)
	s.handle("GET /v1/subscriptions/{id}", read, s.handleSubscriptionGet)
	s.handle("POST /v1/subscriptions/{id}/cancel", initiate, s.subscriptionCancel(false))
	s.handle("POST /v1/subscriptions/{id}/cancel-at-period-end", initiate, s.subscriptionCancel(true))
	s.handle("GET /v1/customers", read, s.handleCustomerList)
	s.handle("GET /v1/customers/{id}", read, s.handleCustomerGet)

	s.handle("POST /v1/plans", initiate, s.handlePlanCreate)
	s.handle("GET /v1/plans", read, s.handlePlanList)
	s.handle("GET /v1/plans/{id}", read, s.handlePlanGet)
	s.handle("POST /v1/plans/{id}/deactivate", initiate, s.handlePlanDeactivate)
}

// routes lists every route of the operator API (the admin listener).
func (a *Admin) routes() {
	a.open("GET /healthz", a.API.handleHealthz)
	a.open("GET /readyz", a.API.handleReadyz)
	if a.Metrics != nil {
		a.open("GET /metrics", a.Metrics.ServeHTTP)
	}
	if a.pprof {
		a.routesPprof()
	}
	a.handle("POST /admin/v1/payout-requests/{id}/{action}", a.handlePayoutRequestMove)
	a.handle("POST /admin/v1/payments/{id}/mark-refunded", a.handleMarkRefunded)
	a.handle("POST /admin/v1/payouts/{id}/settle", a.handleSettle(xaalis.TypePayout))
	a.handle("POST /admin/v1/refunds/{id}/settle", a.handleSettle(xaalis.TypeRefund))
	a.handle("GET /admin/v1/ledger/check", a.handleLedgerCheck)
	a.handle("POST /admin/v1/disputes", a.handleDisputeOpen)
	a.handle("POST /admin/v1/disputes/{id}/decide", a.handleDisputeDecide)
	a.handle("GET /admin/v1/audit-log", a.handleAuditLog)
	a.handle("GET /admin/v1/merchants/{id}", a.handleMerchantGet)
	a.handle("POST /admin/v1/merchants/{id}", a.handleMerchantUpdate)
	// The operator console: pages behind a session cookie, on the same
	// App commands as the routes above (internal/console lists them).
	session, open := a.Console.Register(a.mux)
	for _, p := range open {
		a.registry = append(a.registry, Route{Pattern: p, Access: "none (the console's sign-in, its assets and language)"})
	}
	for _, p := range session {
		a.registry = append(a.registry, Route{Pattern: p, Access: "operator console session (signed in with an operator token)"})
	}
}

// handle registers an operator action behind its token.
func (a *Admin) handle(pattern string, h http.HandlerFunc) {
	a.registry = append(a.registry, Route{Pattern: pattern, Access: "operator token"})
	a.mux.HandleFunc(pattern, a.operator(h))
}

// open registers an admin route without a token (health, metrics: the
// listener is on loopback by default).
func (a *Admin) open(pattern string, h http.HandlerFunc) {
	a.registry = append(a.registry, Route{Pattern: pattern, Access: "none (admin listener)"})
	a.mux.HandleFunc(pattern, h)
}

// Routes lists the admin listener's routes in registration order.
func (a *Admin) Routes() []Route { return append([]Route(nil), a.registry...) }

// Route is one route of the API as docs/security.md lists it.
type Route struct {
	// Pattern is the method and path, as registered.
	Pattern string
	// Access is who may call it: "secret", "publishable or secret", or for
	// routes without an API key, what authenticates them.
	Access string
	// Scopes a secret key must carry, all of them.
	Scopes []xaalis.Scope
}

// Routes lists the API's routes in registration order, for the docs.
func (s *Server) Routes() []Route { return append([]Route(nil), s.registry...) }

// onlyPost answers 405 with Allow: POST to every other method on a
// concrete path that a templated one also matches (/v1/payments/{id},
// /v1/events/{id}): the mux's own Allow merged the template's methods
// (GET, HEAD) into it.
func onlyPost(mux *http.ServeMux, path string) {
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodTrace, http.MethodConnect} {
		mux.HandleFunc(m+" "+path, onlyMethods(http.MethodPost))
	}
}

// onlyMethods answers 405 method_not_allowed with Allow: methods.
func onlyMethods(methods ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, &xaalis.Error{Code: xaalis.EMethodNotAllowed, Allow: methods})
	}
}

// What authenticates a route without an API key.
const (
	accessNone       = "none (public)"
	accessPaymentURL = "none: the payment URL is the payer's credential; rate-limited per client address"
	accessProvider   = "the provider's signature; rate-limited per client address"
)

// handle registers an API route behind its key, scopes and, for mutating
// methods unless it changes nothing, Idempotency-Key.
func (s *Server) handle(pattern string, ra routeAuth, h http.HandlerFunc) {
	access := "secret key"
	if ra.publishable {
		access = "publishable or secret key"
	}
	if ra.changesNothing {
		access += "; no Idempotency-Key (it changes nothing)"
	}
	s.registry = append(s.registry, Route{Pattern: pattern, Access: access, Scopes: ra.scopes})
	var handler http.Handler = s.api(ra, h)
	if ra.publishable {
		handler = browserCORS(handler)
	}
	s.mux.Handle(pattern, handler)
}

// open registers a route that takes no API key.
func (s *Server) open(pattern, access string, h http.HandlerFunc) {
	s.registry = append(s.registry, Route{Pattern: pattern, Access: access})
	s.mux.HandleFunc(pattern, h)
}
