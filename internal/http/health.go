package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// handleHealthz answers while the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 200 when the database answers reads and takes
// writes, else 503 service_unavailable: PostgreSQL unreachable or
// restarting, SQLite's disk full. It turns ready again by itself.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.App.Store.Ping(ctx); err != nil {
		logger(ctx).Error("readiness", "error", err)
		msg := "The database does not answer."
		var e *xaalis.Error
		if errors.As(err, &e) && e.Code == xaalis.EServiceUnavailable && e.Message != "" {
			msg = e.Message
		}
		Error(w, r, &xaalis.Error{Code: xaalis.EServiceUnavailable, Message: msg, RetryAfter: 5 * time.Second, Cause: err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleOpenAPI serves the contract.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.OpenAPI)
}
