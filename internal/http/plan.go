package http

import (
	"net/http"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func (s *Server) handlePlanCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.PlanInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	p, err := s.App.CreatePlan(s.committing(r, http.StatusCreated), principal(r), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, p)
}

func (s *Server) handlePlanList(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	var active *bool
	if v := r.URL.Query().Get("active"); v != "" {
		// The contract's words only: strconv.ParseBool also took 1, t,
		// TRUE, 0, which the message below rules out.
		b := v == "true"
		if v != "true" && v != "false" {
			Error(w, r, &xaalis.Error{Code: xaalis.EValidation, Fields: map[string][]string{"active": {"must be true or false"}}})
			return
		}
		active = &b
	}
	plans, pg, err := s.App.Plans(r.Context(), principal(r), active, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, plans, pg)
}

func (s *Server) handlePlanGet(w http.ResponseWriter, r *http.Request) {
	p, err := s.App.Plan(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, p)
}

func (s *Server) handlePlanDeactivate(w http.ResponseWriter, r *http.Request) {
	p, err := s.App.DeactivatePlan(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, p)
}
