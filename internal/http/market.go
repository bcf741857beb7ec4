package http

import (
	"net/http"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// disputePage reads per_page (default 20, at most 100) and page.
func disputePage(r *http.Request) (xaalis.PageRequest, error) {
	return pageRequest(r)
}

func (s *Server) handleDisputeList(w http.ResponseWriter, r *http.Request) {
	page, err := disputePage(r)
	v := xaalis.ValidationErrors{}
	if e, ok := err.(*xaalis.Error); ok {
		for k, m := range e.Fields {
			v[k] = m
		}
	}
	st := xaalis.DisputeStatus(r.URL.Query().Get("status"))
	switch st {
	case "", xaalis.DisputeNeedsResponse, xaalis.DisputeUnderReview, xaalis.DisputeWon, xaalis.DisputeLost:
	default:
		v.Add("status", "must be needs_response, under_review, won or lost")
	}
	if err := v.Err(); err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Disputes(r.Context(), principal(r), st, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handleDisputeGet(w http.ResponseWriter, r *http.Request) {
	d, err := s.App.Dispute(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, d)
}

func (s *Server) handleDisputeRespond(w http.ResponseWriter, r *http.Request) {
	var in xaalis.DisputeResponse
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	d, err := s.App.RespondDispute(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, d)
}

func (s *Server) handleSplitCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.SplitInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	items, err := s.App.CreateSplits(s.committing(r, http.StatusCreated), principal(r), r.PathValue("id"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, items)
}

func (s *Server) handleSplitList(w http.ResponseWriter, r *http.Request) {
	items, err := s.App.Splits(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, items, xaalis.NewPagination(xaalis.PageRequest{Page: 1, PerPage: max(1, len(items))}, len(items)))
}

func (s *Server) handleSubscriptionCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.SubscriptionInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	sub, err := s.App.CreateSubscription(s.committing(r, http.StatusCreated), principal(r), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, sub)
}

func (s *Server) handleSubscriptionList(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	st := xaalis.SubscriptionStatus(r.URL.Query().Get("status"))
	switch st {
	case "", xaalis.SubscriptionActive, xaalis.SubscriptionCancelled, xaalis.SubscriptionExpired:
	default:
		Error(w, r, &xaalis.Error{Code: xaalis.EValidation, Fields: map[string][]string{"status": {"must be active, cancelled or expired"}}})
		return
	}
	list, pg, err := s.App.Subscriptions(r.Context(), principal(r), st, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handleSubscriptionGet(w http.ResponseWriter, r *http.Request) {
	sub, err := s.App.Subscription(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, sub)
}

func (s *Server) subscriptionCancel(atPeriodEnd bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sub, err := s.App.CancelSubscription(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"), atPeriodEnd)
		if err != nil {
			Error(w, r, err)
			return
		}
		s.record(w, r, http.StatusOK, sub)
	}
}

func (s *Server) handleCustomerList(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Customers(r.Context(), principal(r), page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handleCustomerGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.App.Customer(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, c)
}

func (a *Admin) handleDisputeOpen(w http.ResponseWriter, r *http.Request) {
	var in struct {
		TransactionID string         `json:"transaction_id"`
		Amount        *xaalis.Number `json:"amount"`
		Reason        string         `json:"reason"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	var amount int64
	if in.Amount != nil {
		v := xaalis.ValidationErrors{}
		a, err := xaalis.WholeUnits(v, "amount", in.Amount, xaalis.XOF)
		if err == nil {
			err = v.Err()
		}
		if err != nil {
			Error(w, r, err)
			return
		}
		amount = a.Minor
	}
	d, err := a.App.OpenDispute(r.Context(), xaalis.DisputeOpen{TransactionID: in.TransactionID, Amount: amount, Reason: in.Reason})
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, recordEnvelope{Data: d, Livemode: d.Mode.Live()})
}

func (a *Admin) handleDisputeDecide(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Outcome string `json:"outcome"`
		Note    string `json:"note"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	d, err := a.App.DecideDispute(r.Context(), r.PathValue("id"), xaalis.DisputeStatus(in.Outcome), in.Note)
	if err != nil {
		Error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, recordEnvelope{Data: d, Livemode: d.Mode.Live()})
}
