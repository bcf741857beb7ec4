package http

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func (s *Server) handlePaymentCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.PaymentInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	t, err := s.App.CreatePayment(s.committing(r, http.StatusCreated), principal(r), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, t)
}

// handlePaymentPrecheck answers whether a creation with this body would
// be accepted now; it writes nothing, and takes no Idempotency-Key.
func (s *Server) handlePaymentPrecheck(w http.ResponseWriter, r *http.Request) {
	var in xaalis.PaymentInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	v, err := s.App.PrecheckPayment(r.Context(), principal(r), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, v)
}

func (s *Server) handlePaymentGet(w http.ResponseWriter, r *http.Request) {
	t, err := s.App.Payment(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, t)
}

func (s *Server) handlePaymentList(w http.ResponseWriter, r *http.Request) {
	page, f, err := txListQuery(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Payments(r.Context(), principal(r), f, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handlePaymentVerify(w http.ResponseWriter, r *http.Request) {
	view := actedOn(r)
	t, err := s.App.Verify(s.committingAs(r, http.StatusOK, view), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, view(t))
}

// actedOnRoutes are the routes whose answers actedOn shows (their
// patterns in routes.go; TestInitiateOnlyKeyReadsNothing replays each).
var actedOnRoutes = map[string]bool{
	"POST /v1/payments/{id}/verify": true, "POST /v1/test-helpers/payments/{id}/simulate": true, "POST /v1/refunds": true,
}

// replayView is a stored answer as the replaying request may see it. An
// Idempotency-Key is the merchant's, mode's and key type's, not one API
// key's: a key without can_read_transactions that replays another key's
// request read its whole stored record. Such a key gets the reduced view
// of a record actedOn shows, whoever stored it.
func replayView(r *http.Request, body []byte) []byte {
	if !actedOnRoutes[r.Pattern] || principal(r).Key.HasScope(xaalis.ScopeReadTransactions) {
		return body
	}
	var env struct {
		Data     json.RawMessage `json:"data"`
		Livemode bool            `json:"livemode"`
	}
	var rec struct {
		xaalis.StatusView
		Payer json.RawMessage `json:"payer"`
	}
	if json.Unmarshal(body, &env) != nil || json.Unmarshal(env.Data, &rec) != nil || rec.Object != "transaction" || rec.Payer == nil {
		return body // an error, or the reduced view already
	}
	out, err := encodeRecord(rec.StatusView, env.Livemode)
	if err != nil {
		return body
	}
	return out
}

// actedOn is how the answer to an action on an existing payment (verify,
// simulate, a refund, whose record copies the payment's payer and
// metadata) is shown: the record, or, to a key without
// can_read_transactions, its reduced view. Reading anything needs that
// scope (DECISIONS), and the actions name a payment by its guessable
// merchant_ref: a narrow key read every payer's phone, name and metadata
// through them.
func actedOn(r *http.Request) func(any) any {
	read := principal(r).Key.HasScope(xaalis.ScopeReadTransactions)
	return func(v any) any {
		if t, ok := v.(*xaalis.Transaction); ok && !read {
			return xaalis.PaymentStatus{T: t}
		}
		return v
	}
}

func (s *Server) handlePaymentSimulate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Outcome string `json:"outcome"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	view := actedOn(r)
	t, err := s.App.Simulate(s.committingAs(r, http.StatusOK, view), principal(r), r.PathValue("id"), in.Outcome)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, view(t))
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if p := principal(r); p.Key.Type == xaalis.KeyPublishable {
		v, err := s.App.PublicStatus(r.Context(), p, r.PathValue("reference"))
		if err != nil {
			Error(w, r, err)
			return
		}
		s.record(w, r, http.StatusOK, v)
		return
	}
	t, err := s.App.LookupTransaction(r.Context(), principal(r), r.PathValue("reference"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, t)
}

func (s *Server) handleProviders(w http.ResponseWriter, r *http.Request) {
	country := xaalis.Country(strings.ToUpper(r.URL.Query().Get("country")))
	if country != "" && !country.Valid() {
		Error(w, r, &xaalis.Error{Code: xaalis.EValidation, Fields: map[string][]string{"country": {"must be one of SN, CI, ML, BF, TG, BJ, NE, GW"}}})
		return
	}
	list := s.App.ProvidersFor(principal(r), country)
	s.list(w, r, list, xaalis.NewPagination(xaalis.PageRequest{Page: 1, PerPage: max(1, len(list))}, len(list)))
}

// handleProviderNotification receives a provider's signed notification.
// It is authenticated by the provider's signature, not an API key, and
// carries no Idempotency-Key: the provider's event id deduplicates it.
func (s *Server) handleProviderNotification(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.Config.MaxBodyBytes))
	if err != nil {
		Error(w, r, xaalis.E(xaalis.ERequestTooLarge, "max_bytes", s.Config.MaxBodyBytes))
		return
	}
	err = s.App.HandleNotification(r.Context(), r.PathValue("provider"), xaalis.NotificationRequest{Request: r, Body: body, Check: checkBody})
	if xaalis.ErrorCode(err) == xaalis.EDuplicate {
		writeJSON(w, http.StatusOK, map[string]string{"status": "duplicate"})
		return
	}
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// txListQuery reads the filters of a transaction list: status, provider,
// from and to (a date, 2026-11-21, or an RFC 3339 time; to is exclusive,
// a date meaning the end of that day), merchant_ref, page and per_page.
func txListQuery(r *http.Request) (xaalis.PageRequest, xaalis.TxFilter, error) {
	page, perr := pageRequest(r)
	v := xaalis.ValidationErrors{}
	if e, ok := perr.(*xaalis.Error); ok {
		for k, m := range e.Fields {
			v[k] = m
		}
	}
	q := r.URL.Query()
	var f xaalis.TxFilter
	if st := q.Get("status"); st != "" {
		if f.Status = xaalis.Status(st); !f.Status.Valid() {
			v.Add("status", "is not a transaction status")
		}
	}
	if p := q.Get("provider"); p != "" {
		if !xaalis.ValidProvider(p) {
			v.Add("provider", "must be channel_a, channel_b or channel_c")
		}
		f.Provider = p
	}
	f.MerchantRef = q.Get("merchant_ref")
	for _, b := range []struct {
		name string
		dst  **time.Time
		end  bool
	}{{"from", &f.From, false}, {"to", &f.To, true}} {
		if t, ok := parseTimeParam(v, q.Get(b.name), b.name, b.end); ok {
			*b.dst = &t
		}
	}
	return page, f, v.Err()
}

// parseTimeParam reads a from/to query value: a date (2026-11-21; as an
// end, the end of that day) or an RFC 3339 time. An empty value is absent.
func parseTimeParam(v xaalis.ValidationErrors, s, name string, end bool) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	// RFC 3339 (5.6) lets T and Z be written in lower case; Go's layout
	// takes them upper case only.
	t, err := time.Parse(time.RFC3339, strings.ToUpper(s))
	if err != nil {
		d, derr := time.Parse("2006-01-02", s)
		if derr != nil {
			v.Add(name, "must be a date (2026-11-21) or an RFC 3339 time")
			return time.Time{}, false
		}
		if t = d; end {
			t = d.Add(24 * time.Hour)
		}
	}
	return t.UTC(), true
}
