package http

import (
	"net/http"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func (s *Server) handleBalance(w http.ResponseWriter, r *http.Request) {
	b, err := s.App.Balance(r.Context(), principal(r))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, b)
}

func (s *Server) handlePayoutCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.PayoutInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	t, err := s.App.CreatePayout(s.committing(r, http.StatusCreated), principal(r), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, t)
}

func (s *Server) handlePayoutList(w http.ResponseWriter, r *http.Request) {
	page, f, err := txListQuery(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Payouts(r.Context(), principal(r), f, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handlePayoutGet(w http.ResponseWriter, r *http.Request) {
	t, err := s.App.Payout(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, t)
}

func (s *Server) handleRefundCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.RefundInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	view := actedOn(r)
	t, err := s.App.CreateRefund(s.committingAs(r, http.StatusCreated, view), principal(r), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, view(t))
}

func (s *Server) handleRefundGet(w http.ResponseWriter, r *http.Request) {
	t, err := s.App.Refund(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, t)
}

func (s *Server) handlePayoutRequestCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.PayoutRequestInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	pr, err := s.App.SubmitPayoutRequest(s.committing(r, http.StatusCreated), principal(r), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, pr)
}

// handlePayoutRequestList answers the last 50 requests (spec: Limits), one
// page of 50. `page` is checked as on every list (422 past 1,000,000); a
// page past the first is empty, with its true current_page.
func (s *Server) handlePayoutRequestList(w http.ResponseWriter, r *http.Request) {
	v := xaalis.ValidationErrors{}
	page := pageNumber(r.URL.Query(), v)
	if err := v.Err(); err != nil {
		Error(w, r, err)
		return
	}
	list, err := s.App.PayoutRequests(r.Context(), principal(r))
	if err != nil {
		Error(w, r, err)
		return
	}
	pg := xaalis.NewPagination(xaalis.PageRequest{Page: page, PerPage: xaalis.PayoutRequestListSize}, len(list))
	if page > 1 {
		list = list[:0]
	}
	s.list(w, r, list, pg)
}

func (s *Server) handlePayoutRequestGet(w http.ResponseWriter, r *http.Request) {
	pr, err := s.App.PayoutRequest(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, pr)
}

func (s *Server) handleSettlements(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Settlements(r.Context(), principal(r), page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}
