package http

import "github.com/xaalis/xaalis/internal/xaalis"

// routes lists every route of the API in one place.
func (s *Server) routes() {
	read := routeAuth{scope: xaalis.ScopeReadTransactions}
	initiate := routeAuth{scope: xaalis.ScopeInitiatePayment}

	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.HandleFunc("GET /v1/openapi.yaml", s.handleOpenAPI)

	s.mux.Handle("POST /v1/plans", s.api(initiate, s.handlePlanCreate))
	s.mux.Handle("GET /v1/plans", s.api(read, s.handlePlanList))
	s.mux.Handle("GET /v1/plans/{id}", s.api(read, s.handlePlanGet))
	s.mux.Handle("POST /v1/plans/{id}/deactivate", s.api(initiate, s.handlePlanDeactivate))
}
