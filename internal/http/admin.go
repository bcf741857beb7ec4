package http

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Admin is the operator API, served on its own listener (loopback by
// default): health, metrics, and the operator's actions, each
// authenticated by an operator token (`xaalis operator token create`).
type Admin struct {
	App     *xaalis.App
	Logger  *slog.Logger
	API     *Server      // answers /healthz and /readyz
	Metrics http.Handler // GET /metrics; nil: not served
	mux     *http.ServeMux
}

// NewAdmin builds the operator API.
func NewAdmin(app *xaalis.App, logger *slog.Logger, api *Server, metrics http.Handler) *Admin {
	a := &Admin{App: app, Logger: logger, API: api, Metrics: metrics, mux: http.NewServeMux()}
	a.routes()
	return a
}

// ServeHTTP gives admin requests the API's request ids, logs and JSON 404s.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.API.serveWith(a.mux, w, r)
}

// operator wraps an operator action: a valid token is required.
func (a *Admin) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			Error(w, r, xaalis.Errorf(xaalis.ECredentialsMissing, "Send an operator token as `Authorization: Bearer xop_...`."))
			return
		}
		if _, err := a.App.AuthenticateOperator(r.Context(), strings.TrimSpace(token)); err != nil {
			Error(w, r, err)
			return
		}
		h(w, r)
	}
}

func (a *Admin) handlePayoutRequestMove(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Reason string `json:"reason"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	pr, err := a.App.MovePayoutRequest(r.Context(), r.PathValue("id"), xaalis.PayoutRequestAction(r.PathValue("action")), in.Reason)
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, recordEnvelope{Data: pr, Livemode: pr.Mode.Live()})
}

func (a *Admin) handleMarkRefunded(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Note string `json:"note"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	t, err := a.App.MarkRefunded(r.Context(), r.PathValue("id"), in.Note)
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, recordEnvelope{Data: t, Livemode: t.Mode.Live()})
}

func (a *Admin) handleLedgerCheck(w http.ResponseWriter, r *http.Request) {
	ps, err := a.App.LedgerCheck(r.Context())
	if err != nil {
		Error(w, r, err)
		return
	}
	out := struct {
		OK       bool     `json:"ok"`
		Problems []string `json:"problems"`
	}{OK: len(ps) == 0, Problems: []string{}}
	for _, p := range ps {
		out.Problems = append(out.Problems, p.String())
	}
	status := http.StatusOK
	if !out.OK {
		status = http.StatusConflict
	}
	writeJSON(w, status, out)
}
