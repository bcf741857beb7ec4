package http

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/xaalis/xaalis/internal/console"
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
	// Console is the operator console (internal/console), served at
	// /console/.
	Console  *console.Console
	pprof    bool
	mux      *http.ServeMux
	registry []Route
}

// AdminOptions tune the admin listener.
type AdminOptions struct {
	// Console tunes the operator console.
	Console console.Options
	// Pprof serves the runtime's profiles at /debug/pprof/ (pprof.go).
	Pprof bool
}

// NewAdmin builds the operator API and the operator console.
func NewAdmin(app *xaalis.App, logger *slog.Logger, api *Server, metrics http.Handler, opts ...AdminOptions) *Admin {
	var o AdminOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Console.ClientIP == nil {
		o.Console.ClientIP = func(r *http.Request) string { return clientIP(r).String() }
	}
	if o.Console.SignedIn == nil {
		o.Console.SignedIn = func(r *http.Request, tokenID string) {
			if acc, ok := r.Context().Value(ctxAccess).(*access); ok {
				acc.operatorTokenID = tokenID
			}
		}
	}
	a := &Admin{App: app, Logger: logger, API: api, Metrics: metrics, mux: http.NewServeMux(),
		Console: console.New(app, logger, o.Console), pprof: o.Pprof}
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
		t, err := a.App.AuthenticateOperator(r.Context(), strings.TrimSpace(token))
		if err != nil {
			Error(w, r, a.API.authFailed(r, err))
			return
		}
		if acc, ok := r.Context().Value(ctxAccess).(*access); ok {
			acc.operatorTokenID = t.ID
		}
		// Every action run for this request is audited under the token.
		ctx := xaalis.WithActor(r.Context(), xaalis.Actor{Name: t.Name, TokenID: t.ID, RequestID: requestID(r.Context()),
			ClientIP: clientIP(r).String()})
		r = r.WithContext(ctx)
		if err := checkQuery(r.URL.RawQuery); err != nil {
			Error(w, r, err)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, a.API.Config.MaxBodyBytes)
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

// handleSettle records the outcome of a payout or refund (typ) the
// operator learned from its provider: {"outcome": "success"|"failed",
// "note": "…"} (xaalis.App.SettleByHand).
func (a *Admin) handleSettle(typ xaalis.TxType) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Outcome xaalis.ProviderState `json:"outcome"`
			Note    string               `json:"note"`
		}
		if err := decode(r, &in); err != nil {
			Error(w, r, err)
			return
		}
		t, err := a.App.SettleByHand(r.Context(), typ, r.PathValue("id"), in.Outcome, in.Note)
		if err != nil {
			Error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, recordEnvelope{Data: t, Livemode: t.Mode.Live()})
	}
}

func (a *Admin) handleLedgerCheck(w http.ResponseWriter, r *http.Request) {
	// Recorded (the console and xaalis_ledger_check_problems show the last
	// check) and audited, as from the console and the CLI.
	_, ps, err := a.App.RunLedgerCheck(r.Context(), false)
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

func (a *Admin) handleAuditLog(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := a.App.AuditLog(r.Context(), page)
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Data       []*xaalis.AuditEntry `json:"data"`
		Pagination xaalis.Pagination    `json:"pagination"`
	}{append([]*xaalis.AuditEntry{}, list...), pg})
}

func (a *Admin) handleMerchantGet(w http.ResponseWriter, r *http.Request) {
	m, err := a.App.Store.Merchant(r.Context(), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": xaalis.MerchantJSON(m)})
}

// handleMerchantUpdate changes a merchant as `xaalis merchant update`
// does: its KYC, status, provider whitelist, IP allowlist, return hosts,
// name or payouts; the fields left out stay as they are.
func (a *Admin) handleMerchantUpdate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.MerchantChange
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	u, err := in.Update()
	if err != nil {
		Error(w, r, err)
		return
	}
	m, err := a.App.UpdateMerchant(r.Context(), r.PathValue("id"), u)
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": xaalis.MerchantJSON(m)})
}
