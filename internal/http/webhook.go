package http

import (
	"net/http"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func (s *Server) handleWebhookEndpointCreate(w http.ResponseWriter, r *http.Request) {
	var in xaalis.WebhookEndpointInput
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	ep, err := s.App.CreateWebhookEndpoint(s.committing(r, http.StatusCreated), principal(r), in)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, ep)
}

func (s *Server) handleWebhookEndpointList(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	if r.URL.Query().Get("per_page") == "" {
		page.PerPage = xaalis.MaxWebhookEndpoints // all of them on one page
	}
	list, err := s.App.WebhookEndpoints(r.Context(), principal(r))
	if err != nil {
		Error(w, r, err)
		return
	}
	pg := xaalis.NewPagination(page, len(list))
	list = list[min(len(list), page.Offset()):min(len(list), page.Offset()+page.PerPage)]
	s.list(w, r, list, pg)
}

func (s *Server) handleWebhookEndpointGet(w http.ResponseWriter, r *http.Request) {
	ep, err := s.App.WebhookEndpoint(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, ep)
}

func (s *Server) handleWebhookEndpointDelete(w http.ResponseWriter, r *http.Request) {
	ep, err := s.App.DeleteWebhookEndpoint(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, ep)
}

func (s *Server) handleWebhookEndpointRotate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		GracePeriod *int64 `json:"grace_period"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	ep, err := s.App.RotateWebhookSecret(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"), in.GracePeriod)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, ep)
}

func (s *Server) handleWebhookTest(w http.ResponseWriter, r *http.Request) {
	var in struct {
		EndpointID string `json:"endpoint_id"`
	}
	if err := decode(r, &in); err != nil {
		Error(w, r, err)
		return
	}
	v, err := s.App.SendTestEvent(s.committing(r, http.StatusCreated), principal(r), in.EndpointID)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusCreated, v)
}

func (s *Server) handleCallbackSecret(w http.ResponseWriter, r *http.Request) {
	secret, err := s.App.CallbackSecret(r.Context(), principal(r))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, map[string]any{"object": "webhook_secret", "secret": secret,
		"livemode": principal(r).Mode().Live()})
}

func (s *Server) handleEventList(w http.ResponseWriter, r *http.Request) {
	page, err := pageRequest(r)
	v := xaalis.ValidationErrors{}
	if e, ok := err.(*xaalis.Error); ok {
		for k, m := range e.Fields {
			v[k] = m
		}
	}
	q := r.URL.Query()
	f := xaalis.EventFilter{Type: q.Get("type")}
	if st := q.Get("delivery_status"); st != "" {
		f.DeliveryStatus = xaalis.DeliveryStatus(st)
		if f.DeliveryStatus != xaalis.DeliveryPending && f.DeliveryStatus != xaalis.DeliverySucceeded && f.DeliveryStatus != xaalis.DeliveryFailed {
			v.Add("delivery_status", "must be pending, succeeded or failed")
		}
	}
	for _, b := range []struct {
		name string
		dst  **time.Time
		end  bool
	}{{"from", &f.From, false}, {"to", &f.To, true}} {
		if t, ok := parseTimeParam(v, q.Get(b.name), b.name, b.end); ok {
			*b.dst = &t
		}
	}
	if err := v.Err(); err != nil {
		Error(w, r, err)
		return
	}
	list, pg, err := s.App.Events(r.Context(), principal(r), f, page)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.list(w, r, list, pg)
}

func (s *Server) handleEventGet(w http.ResponseWriter, r *http.Request) {
	v, err := s.App.EventDetail(r.Context(), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, v)
}

func (s *Server) handleEventRedeliver(w http.ResponseWriter, r *http.Request) {
	v, err := s.App.Redeliver(s.committing(r, http.StatusOK), principal(r), r.PathValue("id"))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, v)
}
