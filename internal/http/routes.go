package http

import (
	"github.com/xaalis/xaalis/internal/checkout"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// routes lists every route of the API in one place.
func (s *Server) routes() {
	read := routeAuth{scope: xaalis.ScopeReadTransactions}
	initiate := routeAuth{scope: xaalis.ScopeInitiatePayment}
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

	s.mux.Handle("POST /v1/plans", s.api(initiate, s.handlePlanCreate))
	s.mux.Handle("GET /v1/plans", s.api(read, s.handlePlanList))
	s.mux.Handle("GET /v1/plans/{id}", s.api(read, s.handlePlanGet))
	s.mux.Handle("POST /v1/plans/{id}/deactivate", s.api(initiate, s.handlePlanDeactivate))
}
