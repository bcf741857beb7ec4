package http

import (
	"context"
	"net/http"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// handleHealthz answers while the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 200 when the database answers, else 503.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.App.Store.Ping(ctx); err != nil {
		logger(ctx).Error("readiness", "error", err)
		Error(w, r, &xaalis.Error{Code: xaalis.EGatewayUnavailable, Message: "The database does not answer.", RetryAfter: 5 * time.Second})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleOpenAPI serves the contract.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.OpenAPI)
}
