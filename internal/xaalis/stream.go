package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// StreamResumeWindow is how far back the event stream resumes after a
// Last-Event-ID: the events of the last 24 hours.
const StreamResumeWindow = 24 * time.Hour

// MaxRedeliverEvents bounds the events one POST /v1/events/redeliver sends
// again.
const MaxRedeliverEvents = 10_000

// EventTypeFilter selects event types: each pattern is a type
// (payment.success), a prefix ending in * (payout.*), or * alone. An
// empty filter selects every type.
type EventTypeFilter []string

// ParseEventTypeFilter reads a comma-separated list of patterns (the
// stream's ?types=, listen's --events). It returns validation_error under
// field for an unknown type, a * that is not last, or a prefix that no
// event type has.
func ParseEventTypeFilter(field, s string) (EventTypeFilter, error) {
	var f EventTypeFilter
	v := ValidationErrors{}
	all := false
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			continue
		case p == "*":
			// Every type; the other patterns are still checked, so that a
			// typo beside it is told rather than hidden.
			all = true
			continue
		case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
			v.Add(field, fmt.Sprintf("%q: * may only end a pattern (payout.*)", p))
			continue
		case strings.HasSuffix(p, "*"):
			if !slices.ContainsFunc(EventTypes, func(t string) bool { return strings.HasPrefix(t, p[:len(p)-1]) }) {
				v.Add(field, fmt.Sprintf("%q matches no event type", p))
				continue
			}
		case !slices.Contains(EventTypes, p):
			v.Add(field, fmt.Sprintf("%q is not an event type", p))
			continue
		}
		if !slices.Contains(f, p) {
			f = append(f, p)
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if all {
		return nil, nil
	}
	return f, nil
}

// Match reports whether the filter selects an event type.
func (f EventTypeFilter) Match(typ string) bool {
	if len(f) == 0 {
		return true
	}
	for _, p := range f {
		if p == typ || strings.HasSuffix(p, "*") && strings.HasPrefix(typ, p[:len(p)-1]) {
			return true
		}
	}
	return false
}

// StreamStart returns where a stream of the key's events begins: after
// lastEventID when given (one of the merchant's events in the key's mode,
// from the last StreamResumeWindow), else at the stream's head, so that
// only events committed from now on are sent; the events in skip are to
// be passed over (they committed before the start). It returns
// validation_error (field Last-Event-ID) for an event it cannot resume
// after.
func (a *App) StreamStart(ctx context.Context, p *Principal, lastEventID string) (c StreamCursor, skip []string, err error) {
	if lastEventID == "" {
		return a.Store.StreamHead(ctx, p.Merchant.ID, p.Mode())
	}
	e, c, err := a.Store.StreamCursorOf(ctx, p.Merchant.ID, lastEventID)
	if err != nil && ErrorCode(err) != ENotFound {
		return StreamCursor{}, nil, fmt.Errorf("stream start: %w", err)
	}
	if err != nil || e.Mode != p.Mode() {
		return StreamCursor{}, nil, &Error{Code: EValidation, Fields: ValidationErrors{"Last-Event-ID": {
			"is not an event of this account in the mode of the key; reconnect without it and catch up with GET /v1/events"}}}
	}
	if a.now().Sub(e.CreatedAt) > StreamResumeWindow {
		// An old event resumes still when what follows it is of the last
		// 24 hours (a quiet account's resume point): nothing of the
		// events the window keeps is missed.
		next, err := a.Store.StreamEvents(ctx, p.Merchant.ID, p.Mode(), c, 1)
		if err != nil {
			return StreamCursor{}, nil, fmt.Errorf("stream start: %w", err)
		}
		if len(next) > 0 && a.now().Sub(next[0].Event.CreatedAt) > StreamResumeWindow {
			return StreamCursor{}, nil, &Error{Code: EValidation, Fields: ValidationErrors{"Last-Event-ID": {
				"is older than 24 hours and so are events after it, too old to resume after; reconnect without it and catch up with GET /v1/events"}}}
		}
	}
	return c, nil, nil
}

// StreamAnchor is the event a new stream (one started without
// Last-Event-ID at head) can be resumed after: the key's newest event
// placed before head, however old (what follows it is new: StreamStart
// resumes after it); "" when there is none. A client that loses the
// stream before any event reaches it resumes there, and misses nothing
// committed meanwhile.
func (a *App) StreamAnchor(ctx context.Context, p *Principal, head StreamCursor) (string, error) {
	e, err := a.Store.StreamLastBefore(ctx, p.Merchant.ID, p.Mode(), head)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("stream anchor: %w", err)
	}
	return e.ID, nil
}

// StreamEvents returns up to limit of the key's events after a cursor, in
// the order they committed, or invalid_api_key once the key is revoked or
// expired: a stream outlives the request that authenticated it, and a
// leaked key, once revoked, must stop reading at once, open streams
// included.
func (a *App) StreamEvents(ctx context.Context, p *Principal, after StreamCursor, limit int) ([]StreamedEvent, error) {
	list, err := a.Store.StreamEvents(ctx, p.Merchant.ID, p.Mode(), after, limit)
	if err != nil {
		return nil, err
	}
	// The key is read after the events: an event that committed after
	// the revocation is in no batch the key is found usable for.
	k, err := a.Store.Key(ctx, p.Key.ID)
	if err != nil {
		return nil, fmt.Errorf("stream key: %w", err)
	}
	if !k.Usable(a.now()) {
		return nil, E(EInvalidAPIKey)
	}
	return list, nil
}

// ListenSecret returns the whsec_ secret `xaalis listen` signs forwarded
// events with, for the merchant in the key's mode: made on first use, then
// the same every time, so a developer configures it once.
func (a *App) ListenSecret(ctx context.Context, p *Principal) (string, error) {
	return a.Store.ListenSecret(ctx, p.Merchant.ID, p.Mode(), NewWebhookSecret())
}

// Redelivery is the answer of POST /v1/events/redeliver.
type Redelivery struct {
	// Events is how many events were sent again.
	Events int
}

// MarshalJSON renders {"object": "redelivery", "events": N}.
func (r *Redelivery) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Object string `json:"object"`
		Events int    `json:"events"`
	}{"redelivery", r.Events})
}

// RedeliverMatching sends again, with the same event ids, the key's events
// matching f: one new delivery, due now, to each URL (endpoint or
// callback_url) whose latest delivery of the event matches f's endpoint
// and delivery status, never to a deleted endpoint. Events without such a
// delivery are not counted. It returns validation_error for an unknown
// type or status, an empty time range, or more than MaxRedeliverEvents
// (App.MaxRedeliver when set) events (context count and max); not_found or
// livemode_mismatch for the endpoint; merchant_inactive.
func (a *App) RedeliverMatching(ctx context.Context, p *Principal, f RedeliveryFilter) (*Redelivery, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	f.MerchantID, f.Mode = p.Merchant.ID, p.Mode()
	v := ValidationErrors{}
	if f.Type != "" && !slices.Contains(EventTypes, f.Type) {
		v.Add("type", fmt.Sprintf("%q is not an event type", f.Type))
	}
	switch f.DeliveryStatus {
	case "", DeliveryPending, DeliverySucceeded, DeliveryFailed:
	default:
		v.Add("delivery_status", "must be pending, succeeded or failed")
	}
	if f.From != nil && f.To != nil && !f.From.Before(*f.To) {
		v.Add("to", "must be after from")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if f.EndpointID != "" {
		if _, err := a.WebhookEndpoint(ctx, p, f.EndpointID); err != nil {
			return nil, err
		}
	}
	limit := a.MaxRedeliver
	if limit <= 0 {
		limit = MaxRedeliverEvents
	}
	out := &Redelivery{}
	err := a.update(ctx, func(tx Tx) error {
		n, targets, err := tx.RedeliveryTargets(ctx, f, limit)
		if err != nil {
			return err
		}
		if n > limit {
			return &Error{Code: EValidation, Context: map[string]any{"count": n, "max": limit},
				Message: fmt.Sprintf("%d events match; at most %d may be redelivered at once: narrow the filter (from, to, type).", n, limit),
				Fields:  ValidationErrors{"filter": {fmt.Sprintf("matches %d events, more than %d", n, limit)}}}
		}
		now := a.now()
		for _, t := range targets {
			d := &Delivery{ID: a.NewID(), EventID: t.EventID, MerchantID: f.MerchantID, Mode: f.Mode, EndpointID: t.EndpointID,
				URL: t.URL, Format: t.Format, Status: DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
			if err := tx.InsertDelivery(ctx, d); err != nil {
				return fmt.Errorf("insert delivery: %w", err)
			}
		}
		out.Events = n
		return RunCommitHook(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
