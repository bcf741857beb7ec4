package http

import (
	"github.com/xaalis/xaalis/internal/checkout"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// routes lists every route of the API in one place.
func (s *Server) routes() {
	read := routeAuth{scope: xaalis.ScopeReadTransactions}
	initiate := routeAuth{scope: xaalis.ScopeInitiatePayment}
	payout := routeAuth{scope: xaalis.ScopePayout}
	// Publishable keys may create payments and read their status only.
	checkoutCreate := routeAuth{scope: xaalis.ScopeInitiatePayment, publishable: true}
	statusRead := routeAuth{scope: xaalis.ScopeReadTransactions, publishable: true}

	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.HandleFunc("GET /v1/openapi.yaml", s.handleOpenAPI)

	s.mux.Handle("POST /v1/payments", s.api(checkoutCreate, s.handlePaymentCreate))
	s.mux.Handle("GET /v1/payments", s.api(read, s.handlePaymentList))
	s.mux.Handle("GET /v1/payments/{id}", s.api(read, s.handlePaymentGet))
	s.mux.Handle("POST /v1/payments/{id}/verify", s.api(initiate, s.handlePaymentVerify))
	s.mux.Handle("POST /v1/test-helpers/payments/{id}/simulate", s.api(initiate, s.handlePaymentSimulate))
	s.mux.Handle("GET /v1/status/{reference}", s.api(statusRead, s.handleStatus))
	s.mux.Handle("GET /v1/providers", s.api(read, s.handleProviders))
	s.mux.HandleFunc("POST /v1/providers/{provider}/notifications", s.handleProviderNotification)

	// The hosted payment page: the payment URL is the payer's credential;
	// browser form posts carry no API key and no Idempotency-Key.
	pages := &checkout.Pages{App: s.App, Logger: s.Logger}
	s.mux.HandleFunc("GET /checkout/{id}", pages.Show)
	s.mux.HandleFunc("POST /checkout/{id}/provider", pages.Choose)
	s.mux.HandleFunc("POST /checkout/{id}/otp", pages.OTP)
	s.mux.HandleFunc("POST /checkout/{id}/simulate", pages.Simulate)
	s.mux.HandleFunc("POST /checkout/{id}/cancel", pages.Cancel)
	s.mux.HandleFunc("GET /checkout/{id}/status", pages.StatusJSON)
	s.mux.HandleFunc("GET /checkout-assets/{name}", pages.Asset)
	s.mux.HandleFunc("GET /v1/checkout.js", pages.Script)

	s.mux.Handle("GET /v1/balance", s.api(read, s.handleBalance))
	s.mux.Handle("POST /v1/payouts", s.api(payout, s.handlePayoutCreate))
	s.mux.Handle("GET /v1/payouts", s.api(read, s.handlePayoutList))
	s.mux.Handle("GET /v1/payouts/{id}", s.api(read, s.handlePayoutGet))
	s.mux.Handle("POST /v1/refunds", s.api(initiate, s.handleRefundCreate))
	s.mux.Handle("GET /v1/refunds/{id}", s.api(read, s.handleRefundGet))
	s.mux.Handle("POST /v1/payout-requests", s.api(payout, s.handlePayoutRequestCreate))
	s.mux.Handle("GET /v1/payout-requests", s.api(read, s.handlePayoutRequestList))
	s.mux.Handle("GET /v1/payout-requests/{id}", s.api(read, s.handlePayoutRequestGet))
	s.mux.Handle("GET /v1/settlements", s.api(read, s.handleSettlements))

	s.mux.Handle("POST /v1/webhook-endpoints", s.api(initiate, s.handleWebhookEndpointCreate))
	s.mux.Handle("GET /v1/webhook-endpoints", s.api(read, s.handleWebhookEndpointList))
	s.mux.Handle("GET /v1/webhook-endpoints/{id}", s.api(read, s.handleWebhookEndpointGet))
	s.mux.Handle("DELETE /v1/webhook-endpoints/{id}", s.api(initiate, s.handleWebhookEndpointDelete))
	s.mux.Handle("POST /v1/webhook-endpoints/{id}/rotate-secret", s.api(initiate, s.handleWebhookEndpointRotate))
	s.mux.Handle("POST /v1/webhooks/test", s.api(initiate, s.handleWebhookTest))
	s.mux.Handle("GET /v1/webhooks/callback-secret", s.api(initiate, s.handleCallbackSecret))
	s.mux.Handle("GET /v1/events", s.api(read, s.handleEventList))
	s.mux.Handle("GET /v1/events/{id}", s.api(read, s.handleEventGet))
	s.mux.Handle("POST /v1/events/{id}/redeliver", s.api(initiate, s.handleEventRedeliver))

	s.mux.Handle("GET /v1/disputes", s.api(read, s.handleDisputeList))
	s.mux.Handle("GET /v1/disputes/{id}", s.api(read, s.handleDisputeGet))
	s.mux.Handle("POST /v1/disputes/{id}/respond", s.api(initiate, s.handleDisputeRespond))
	s.mux.Handle("POST /v1/payments/{id}/splits", s.api(initiate, s.handleSplitCreate))
	s.mux.Handle("GET /v1/payments/{id}/splits", s.api(read, s.handleSplitList))
	s.mux.Handle("POST /v1/subscriptions", s.api(initiate, s.handleSubscriptionCreate))
	s.mux.Handle("GET /v1/subscriptions", s.api(read, s.handleSubscriptionList))
	s.mux.Handle("GET /v1/subscriptions/{id}", s.api(read, s.handleSubscriptionGet))
	s.mux.Handle("POST /v1/subscriptions/{id}/cancel", s.api(initiate, s.subscriptionCancel(false)))
	s.mux.Handle("POST /v1/subscriptions/{id}/cancel-at-period-end", s.api(initiate, s.subscriptionCancel(true)))
	s.mux.Handle("GET /v1/customers", s.api(read, s.handleCustomerList))
	s.mux.Handle("GET /v1/customers/{id}", s.api(read, s.handleCustomerGet))

	s.mux.Handle("POST /v1/plans", s.api(initiate, s.handlePlanCreate))
	s.mux.Handle("GET /v1/plans", s.api(read, s.handlePlanList))
	s.mux.Handle("GET /v1/plans/{id}", s.api(read, s.handlePlanGet))
	s.mux.Handle("POST /v1/plans/{id}/deactivate", s.api(initiate, s.handlePlanDeactivate))
}

// routes lists every route of the operator API (the admin listener).
func (a *Admin) routes() {
	a.mux.HandleFunc("GET /healthz", a.API.handleHealthz)
	a.mux.HandleFunc("GET /readyz", a.API.handleReadyz)
	if a.Metrics != nil {
		a.mux.Handle("GET /metrics", a.Metrics)
	}
	a.mux.HandleFunc("POST /admin/v1/payout-requests/{id}/{action}", a.operator(a.handlePayoutRequestMove))
	a.mux.HandleFunc("POST /admin/v1/payments/{id}/mark-refunded", a.operator(a.handleMarkRefunded))
	a.mux.HandleFunc("GET /admin/v1/ledger/check", a.operator(a.handleLedgerCheck))
	a.mux.HandleFunc("POST /admin/v1/disputes", a.operator(a.handleDisputeOpen))
	a.mux.HandleFunc("POST /admin/v1/disputes/{id}/decide", a.operator(a.handleDisputeDecide))
}
