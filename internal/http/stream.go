package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// handleEventStream serves GET /v1/events/stream: Server-Sent Events, one
// message per new event of the key's merchant and mode (id: the event id,
// event: its type, data: the event in the 2026-06-01 webhook format),
// filtered by ?types= and resumed after Last-Event-ID.
//
// It reads the events from the database, so a stream connected to one
// process sees the events other processes commit. A slow client never
// holds anything but its own connection: the handler keeps at most one
// batch of events (Config.StreamBatch) in memory, and a message the
// client has not taken within Config.StreamWriteTimeout (its socket's
// buffer full) closes the connection; the client resumes with
// Last-Event-ID.
func (s *Server) handleEventStream(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	types, err := xaalis.ParseEventTypeFilter("types", r.URL.Query().Get("types"))
	if err != nil {
		Error(w, r, err)
		return
	}
	lastID := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if err := checkHeader("Last-Event-ID", lastID); err != nil {
		Error(w, r, err)
		return
	}
	cursor, skipped, err := s.App.StreamStart(r.Context(), p, lastID)
	if err != nil {
		Error(w, r, err)
		return
	}
	// A message with only an id: where the client resumes from (an
	// EventSource keeps it as its lastEventId, and no event fires). Sent
	// at the start of a new stream, and after events the filter passed
	// over, so that a stream dropped before its next event misses nothing.
	resumeAt := lastID
	if lastID == "" {
		if resumeAt, err = s.App.StreamAnchor(r.Context(), p, cursor); err != nil {
			Error(w, r, err)
			return
		}
	}
	skip := map[string]bool{}
	for _, id := range skipped {
		skip[id] = true
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streamsCtx, cancel) // server shutdown
	defer stop()

	rc := http.NewResponseController(w)
	// The server's read timeout would end the request (its context) while
	// the client only listens; its write timeout would cut the stream.
	// Each write gets a deadline of its own instead.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store") // as every /v1 answer (docs/security.md)
	h.Set("X-Accel-Buffering", "no")
	cfg := s.streamConfig()
	var buf bytes.Buffer
	lastWrite := time.Now()
	flush := func() bool {
		if err := rc.SetWriteDeadline(time.Now().Add(cfg.StreamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			logger(ctx).Info("event stream closed: client too slow or gone", "request_id", requestID(ctx), "error", err)
			return false
		}
		buf.Reset()
		if err := rc.Flush(); err != nil {
			return false
		}
		lastWrite = time.Now()
		return true
	}
	w.WriteHeader(http.StatusOK)
	// retry: how long EventSource clients wait before reconnecting.
	buf.WriteString("retry: 2000\n: connected\n\n")
	if resumeAt != "" && resumeAt != lastID {
		writeResumeID(&buf, resumeAt)
	}
	if !flush() {
		return
	}

	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		list, err := s.App.StreamEvents(ctx, p, cursor, cfg.StreamBatch)
		if xaalis.ErrorCode(err) == xaalis.EInvalidAPIKey {
			// Revoked or expired since the stream opened: the client's
			// reconnection gets the 401.
			logger(ctx).Info("event stream closed: key revoked or expired", "request_id", requestID(ctx), "key", p.Key.ID)
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				logger(ctx).Error("event stream: read events", "request_id", requestID(ctx), "error", err)
			}
			return
		}
		passed := ""
		for _, se := range list {
			cursor = se.Cursor
			if skip[se.Event.ID] || !types.Match(se.Event.Type) {
				passed = se.Event.ID
				continue
			}
			body, err := webhook.Payload(xaalis.Format20260601, se.Event)
			if err != nil {
				logger(ctx).Error("event stream: render event", "event", se.Event.ID, "error", err)
				passed = se.Event.ID
				continue
			}
			writeSSE(&buf, se.Event.ID, se.Event.Type, body)
			passed = ""
			if !flush() {
				return
			}
		}
		if passed != "" {
			writeResumeID(&buf, passed)
			if !flush() {
				return
			}
		}
		if time.Since(lastWrite) >= cfg.StreamKeepAlive {
			buf.WriteString(": keep-alive\n\n")
			if !flush() {
				return
			}
		}
		next := cfg.StreamPoll
		if len(list) == cfg.StreamBatch {
			next = 0 // catching up
		}
		poll.Reset(min(next, cfg.StreamKeepAlive-time.Since(lastWrite)))
	}
}

// writeResumeID appends a message of an id alone: the place to resume
// from, with no event.
func writeResumeID(b *bytes.Buffer, id string) {
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteString("\n\n")
}

// writeSSE appends one Server-Sent Events message. data is one line of
// JSON (json.Marshal escapes line breaks inside strings).
func writeSSE(b *bytes.Buffer, id, event string, data []byte) {
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteString("\nevent: ")
	b.WriteString(event)
	b.WriteString("\ndata: ")
	b.Write(bytes.ReplaceAll(data, []byte("\n"), []byte("\ndata: ")))
	b.WriteString("\n\n")
}

// streamConfig fills the stream settings left at zero with the defaults.
func (s *Server) streamConfig() Config {
	c, d := s.Config, DefaultConfig()
	if c.StreamPoll <= 0 {
		c.StreamPoll = d.StreamPoll
	}
	if c.StreamKeepAlive <= 0 {
		c.StreamKeepAlive = d.StreamKeepAlive
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = d.StreamWriteTimeout
	}
	if c.StreamBatch <= 0 {
		c.StreamBatch = d.StreamBatch
	}
	return c
}

// StopStreams ends every event stream (they hold their connections open
// otherwise): http.Server.Shutdown waits for connections to go idle, so
// `xaalis serve` calls it through RegisterOnShutdown.
func (s *Server) StopStreams() { s.stopStreams() }

func (s *Server) handleListenSecret(w http.ResponseWriter, r *http.Request) {
	secret, err := s.App.ListenSecret(r.Context(), principal(r))
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusOK, map[string]any{"object": "webhook_secret", "secret": secret,
		"livemode": principal(r).Mode().Live()})
}

// redeliverBody is the body of POST /v1/events/redeliver.
type redeliverBody struct {
	Type           *string `json:"type"`
	From           *string `json:"from"`
	To             *string `json:"to"`
	DeliveryStatus *string `json:"delivery_status"`
	EndpointID     *string `json:"endpoint_id"`
}

var redeliverFields = []string{"type", "from", "to", "delivery_status", "endpoint_id"}

func (s *Server) handleEventsRedeliver(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	if err := decode(r, &raw); err != nil {
		Error(w, r, err)
		return
	}
	// A mistyped filter would widen a bulk resend: unknown fields are
	// refused.
	v := xaalis.ValidationErrors{}
	for k := range raw {
		if !slices.Contains(redeliverFields, k) {
			v.Add(k, "is not a filter: use type, from, to, delivery_status or endpoint_id")
		}
	}
	var in redeliverBody
	str := func(name string, dst **string) {
		if b, ok := raw[name]; ok && string(b) != "null" {
			var s string
			if json.Unmarshal(b, &s) != nil {
				v.Add(name, "must be a string")
				return
			}
			*dst = &s
		}
	}
	str("type", &in.Type)
	str("from", &in.From)
	str("to", &in.To)
	str("delivery_status", &in.DeliveryStatus)
	str("endpoint_id", &in.EndpointID)
	var f xaalis.RedeliveryFilter
	val := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f.Type, f.DeliveryStatus, f.EndpointID = val(in.Type), xaalis.DeliveryStatus(val(in.DeliveryStatus)), val(in.EndpointID)
	if t, ok := parseTimeParam(v, val(in.From), "from", false); ok {
		f.From = &t
	}
	if t, ok := parseTimeParam(v, val(in.To), "to", true); ok {
		f.To = &t
	}
	if err := v.Err(); err != nil {
		Error(w, r, err)
		return
	}
	res, err := s.App.RedeliverMatching(s.committing(r, http.StatusAccepted), principal(r), f)
	if err != nil {
		Error(w, r, err)
		return
	}
	s.record(w, r, http.StatusAccepted, res)
}
