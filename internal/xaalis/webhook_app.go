package xaalis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// EventTypes are the events a webhook endpoint may subscribe to.
var EventTypes = []string{
	EventPaymentSuccess, EventPaymentFailed, EventPaymentCancelled, EventPaymentExpired,
	EventPayoutSuccess, EventPayoutFailed, EventPayoutCancelled,
	EventPRSubmitted, EventPRApproved, EventPRRejected, EventPRCompleted, EventPRFailed,
	EventRefundSuccess, EventRefundFailed, EventPaymentRefunded, EventPaymentPartiallyRefunded,
	EventDisputeOpened, EventDisputeResponded, EventDisputeWon, EventDisputeLost,
	EventSubscriptionCreated, EventSubscriptionPaymentRequested, EventSubscriptionPaymentSucceeded,
	EventSubscriptionPaymentFailed, EventSubscriptionCancelScheduled, EventSubscriptionCancelled, EventSubscriptionExpired,
	EventSplitCreated, EventSplitCredited,
	EventWebhookTest,
}

// EventWebhookTest is the event POST /v1/webhooks/test sends.
const EventWebhookTest = "webhook.test"

// Webhook limits.
const (
	MaxWebhookEndpoints   = 16
	DefaultRotationGrace  = 24 * time.Hour
	MaxRotationGrace      = 7 * 24 * time.Hour
	webhookSecretAlphabet = keyAlphabet
)

// NewWebhookSecret makes a whsec_ secret.
func NewWebhookSecret() string { return "whsec_" + RandomString(32, webhookSecretAlphabet) }

// emit stores an event and, in the same transaction, one delivery for
// every endpoint of the merchant subscribed to it and one for callbackURL
// when set (in the account's default format): the outbox webhooks are
// delivered from. The dispatcher starts on them once this commits, not at
// its next poll.
func (a *App) emit(ctx context.Context, tx Tx, ev *Event, callbackURL string) error {
	if err := tx.InsertEvent(ctx, ev); err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if err := tx.InsertFanOut(ctx, ev, a.NewID); err != nil {
		return fmt.Errorf("fan out: %w", err)
	}
	if callbackURL == "" {
		return nil
	}
	d := &Delivery{ID: a.NewID(), EventID: ev.ID, MerchantID: ev.MerchantID, Mode: ev.Mode, URL: callbackURL,
		Format: Format20260601, Status: DeliveryPending, NextAttemptAt: ev.CreatedAt, CreatedAt: ev.CreatedAt,
		UpdatedAt: ev.CreatedAt}
	if err := tx.InsertDelivery(ctx, d); err != nil {
		return fmt.Errorf("insert delivery: %w", err)
	}
	tx.Wake(WakeDeliveries)
	return nil
}

// WebhookEndpointInput is the body of POST /v1/webhook-endpoints.
type WebhookEndpointInput struct {
	URL           *string  `json:"url"`
	Events        []string `json:"events"`
	PayloadFormat *string  `json:"payload_format"`
	Description   *string  `json:"description"`
}

// CreateWebhookEndpoint registers a URL for the merchant's events in the
// key's mode; its whsec_ secret is shown in this answer only. It returns
// validation_error (the URL rules name the rule broken) and
// merchant_inactive.
func (a *App) CreateWebhookEndpoint(ctx context.Context, p *Principal, in WebhookEndpointInput) (*WebhookEndpoint, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	v := ValidationErrors{}
	url := ""
	if in.URL == nil || strings.TrimSpace(*in.URL) == "" {
		v.Add("url", "is required")
	} else if url = strings.TrimSpace(*in.URL); utf8.RuneCountInString(url) > 2000 {
		v.Add("url", "must be at most 2000 characters")
	}
	events := []string{}
	for _, e := range in.Events {
		switch {
		case e == "*":
			events = nil
		case !slices.Contains(EventTypes, e):
			v.Add("events", fmt.Sprintf("%q is not an event type", e))
		case events != nil && !slices.Contains(events, e):
			events = append(events, e)
		}
	}
	if len(in.Events) == 0 || events == nil || len(events) == 0 {
		events = nil // every event
	}
	format := Format20260601
	if in.PayloadFormat != nil {
		if format = PayloadFormat(*in.PayloadFormat); !format.Valid() {
			v.Add("payload_format", "must be legacy or 2026-06-01")
		}
	}
	desc := ""
	if in.Description != nil {
		if desc = strings.TrimSpace(*in.Description); utf8.RuneCountInString(desc) > 500 {
			v.Add("description", "must be at most 500 characters")
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if a.CheckWebhookURL != nil {
		if err := a.CheckWebhookURL(ctx, url); err != nil {
			return nil, err
		}
	}
	now := a.now()
	w := &WebhookEndpoint{ID: a.NewID(), MerchantID: p.Merchant.ID, Mode: p.Mode(), URL: url, Description: desc,
		Events: events, Format: format, Secret: NewWebhookSecret(), CreatedAt: now, UpdatedAt: now}
	err := a.update(ctx, func(tx Tx) error {
		if err := tx.LockWebhookEndpoints(ctx, w.MerchantID, w.Mode); err != nil {
			return fmt.Errorf("lock webhook endpoints: %w", err)
		}
		list, err := tx.ActiveWebhookEndpoints(ctx, w.MerchantID, w.Mode)
		if err != nil {
			return err
		}
		if len(list) >= MaxWebhookEndpoints {
			return &Error{Code: EValidation, Fields: ValidationErrors{"url": {
				fmt.Sprintf("an account has at most %d endpoints per mode: delete one first", MaxWebhookEndpoints)}}}
		}
		if err := tx.InsertWebhookEndpoint(ctx, w); err != nil {
			return fmt.Errorf("insert webhook endpoint: %w", err)
		}
		w.ShowSecret = true
		return RunCommitHook(ctx, tx, w)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// WebhookEndpoints lists the merchant's endpoints in the key's mode.
func (a *App) WebhookEndpoints(ctx context.Context, p *Principal) ([]*WebhookEndpoint, error) {
	return a.Store.WebhookEndpoints(ctx, p.Merchant.ID, p.Mode())
}

// WebhookEndpoint returns one endpoint; not_found or livemode_mismatch.
func (a *App) WebhookEndpoint(ctx context.Context, p *Principal, id string) (*WebhookEndpoint, error) {
	w, err := a.Store.WebhookEndpoint(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if w.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return w, nil
}

// DeleteWebhookEndpoint stops an endpoint's deliveries; pending ones end
// failed at their next attempt. It returns not_found or livemode_mismatch.
func (a *App) DeleteWebhookEndpoint(ctx context.Context, p *Principal, id string) (*WebhookEndpoint, error) {
	return a.updateEndpoint(ctx, p, id, func(w *WebhookEndpoint, now time.Time) { w.DeletedAt = &now })
}

// RotateWebhookSecret gives an endpoint a new secret; the old one keeps
// signing too (a second v1 entry) for the grace period. It returns the
// endpoint with its new secret shown, not_found, livemode_mismatch,
// merchant_inactive or validation_error for a grace period out of range.
func (a *App) RotateWebhookSecret(ctx context.Context, p *Principal, id string, grace *int64) (*WebhookEndpoint, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	g := DefaultRotationGrace
	if grace != nil {
		if *grace < 0 || *grace > int64(MaxRotationGrace/time.Second) {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{"grace_period": {"must be between 0 and 604800 seconds"}}}
		}
		g = time.Duration(*grace) * time.Second
	}
	w, err := a.updateEndpoint(ctx, p, id, func(w *WebhookEndpoint, now time.Time) {
		exp := now.Add(g)
		w.PreviousSecret, w.PreviousExpiresAt, w.Secret = w.Secret, &exp, NewWebhookSecret()
		if g == 0 {
			w.PreviousSecret, w.PreviousExpiresAt = "", nil
		}
		w.ShowSecret = true
	})
	return w, err
}

func (a *App) updateEndpoint(ctx context.Context, p *Principal, id string, change func(*WebhookEndpoint, time.Time)) (*WebhookEndpoint, error) {
	var out *WebhookEndpoint
	err := a.update(ctx, func(tx Tx) error {
		w, err := tx.WebhookEndpointForUpdate(ctx, p.Merchant.ID, id)
		if err != nil {
			return err
		}
		if w.Mode != p.Mode() {
			return E(ELivemodeMismatch)
		}
		now := a.now()
		change(w, now)
		w.UpdatedAt = now
		if err := tx.UpdateWebhookEndpoint(ctx, w); err != nil {
			return fmt.Errorf("update webhook endpoint: %w", err)
		}
		out = w
		return RunCommitHook(ctx, tx, w)
	})
	return out, err
}

// EventView is an event as the API shows it, with its deliveries and their
// attempts when asked for one event.
type EventView struct {
	Event      *Event
	Deliveries []DeliveryView
	Detail     bool
}

// DeliveryView is a delivery with its attempts.
type DeliveryView struct {
	Delivery *Delivery
	Attempts []*Attempt
}

// MarshalJSON renders the event record.
func (v *EventView) MarshalJSON() ([]byte, error) {
	e := v.Event
	type attemptJSON struct {
		ID           string  `json:"id"`
		AttemptedAt  string  `json:"attempted_at"`
		DurationMS   int64   `json:"duration_ms"`
		HTTPStatus   *int    `json:"http_status"`
		ErrorMessage *string `json:"error_message"`
	}
	type deliveryJSON struct {
		ID            string        `json:"id"`
		EndpointID    *string       `json:"endpoint_id"`
		URL           string        `json:"url"`
		PayloadFormat PayloadFormat `json:"payload_format"`
		Status        string        `json:"status"`
		Attempts      int           `json:"attempt_count"`
		NextAttemptAt *string       `json:"next_attempt_at"`
		LastAttemptAt *string       `json:"last_attempt_at"`
		AttemptLog    []attemptJSON `json:"attempts"`
	}
	j := struct {
		ID         string          `json:"id"`
		Object     string          `json:"object"`
		Type       string          `json:"type"`
		ObjectType string          `json:"object_type"`
		ObjectID   string          `json:"object_id"`
		Sequence   int64           `json:"sequence"`
		Data       json.RawMessage `json:"data"`
		Livemode   bool            `json:"livemode"`
		CreatedAt  string          `json:"created_at"`
		Deliveries []deliveryJSON  `json:"deliveries,omitzero"`
	}{ID: e.ID, Object: "event", Type: e.Type, ObjectType: e.ObjectType, ObjectID: e.ObjectID, Sequence: e.Seq,
		Data: e.Data, Livemode: e.Mode.Live(), CreatedAt: Timestamp(e.CreatedAt)}
	if v.Detail {
		j.Deliveries = []deliveryJSON{}
	}
	for _, dv := range v.Deliveries {
		d := dv.Delivery
		dj := deliveryJSON{ID: d.ID, EndpointID: strPtr(d.EndpointID), URL: d.URL, PayloadFormat: d.Format,
			Status: string(d.Status), Attempts: d.Attempts, LastAttemptAt: tsPtr(d.LastAttemptAt), AttemptLog: []attemptJSON{}}
		if d.Status == DeliveryPending {
			dj.NextAttemptAt = tsPtr(&d.NextAttemptAt)
		}
		for _, at := range dv.Attempts {
			aj := attemptJSON{ID: at.ID, AttemptedAt: Timestamp(at.AttemptedAt), DurationMS: at.DurationMS, ErrorMessage: strPtr(at.ErrorMessage)}
			if at.HTTPStatus != 0 {
				s := at.HTTPStatus
				aj.HTTPStatus = &s
			}
			dj.AttemptLog = append(dj.AttemptLog, aj)
		}
		j.Deliveries = append(j.Deliveries, dj)
	}
	return json.Marshal(j)
}

// Events lists the merchant's events in the key's mode, newest first.
func (a *App) Events(ctx context.Context, p *Principal, f EventFilter, page PageRequest) ([]*EventView, Pagination, error) {
	f.MerchantID, f.Mode = p.Merchant.ID, p.Mode()
	list, total, err := a.Store.ListEvents(ctx, f, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list events: %w", err)
	}
	out := make([]*EventView, len(list))
	for i, e := range list {
		out[i] = &EventView{Event: e}
	}
	return out, NewPagination(page, total), nil
}

// EventDetail returns one event with its deliveries and attempts; not_found
// or livemode_mismatch.
func (a *App) EventDetail(ctx context.Context, p *Principal, id string) (*EventView, error) {
	e, err := a.Store.Event(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if e.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return a.eventDetail(ctx, e)
}

// eventDetail reads an event's deliveries and their attempts.
func (a *App) eventDetail(ctx context.Context, e *Event) (*EventView, error) {
	ds, err := a.Store.Deliveries(ctx, e.ID)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	v := &EventView{Event: e, Detail: true}
	for _, d := range ds {
		at, err := a.Store.Attempts(ctx, d.ID)
		if err != nil {
			return nil, fmt.Errorf("attempts: %w", err)
		}
		v.Deliveries = append(v.Deliveries, DeliveryView{Delivery: d, Attempts: at})
	}
	return v, nil
}

// Redeliver sends an event again: a new delivery, due now, to every URL it
// was delivered to (or to the endpoints subscribed to it, when it had
// none). It returns the event with its deliveries; not_found,
// livemode_mismatch or merchant_inactive.
func (a *App) Redeliver(ctx context.Context, p *Principal, id string) (*EventView, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	e, err := a.Store.Event(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if e.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	if err := a.redeliver(ctx, e, false); err != nil {
		return nil, err
	}
	v, err := a.EventDetail(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return v, RunCommitHookStandalone(ctx, a, v)
}

// redeliver writes the new deliveries of an event in one transaction,
// with the operator's audit entry when audited.
func (a *App) redeliver(ctx context.Context, e *Event, audited bool) error {
	old, err := a.Store.Deliveries(ctx, e.ID)
	if err != nil {
		return err
	}
	now := a.now()
	return a.update(ctx, func(tx Tx) error {
		seen := map[string]bool{}
		var added []string
		for _, d := range old {
			key := d.EndpointID + " " + d.URL
			if seen[key] {
				continue
			}
			seen[key] = true
			nd := &Delivery{ID: a.NewID(), EventID: e.ID, MerchantID: e.MerchantID, Mode: e.Mode, EndpointID: d.EndpointID,
				URL: d.URL, Format: d.Format, Status: DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
			if err := tx.InsertDelivery(ctx, nd); err != nil {
				return err
			}
			added = append(added, nd.ID)
		}
		if len(old) == 0 {
			eps, err := tx.ActiveWebhookEndpoints(ctx, e.MerchantID, e.Mode)
			if err != nil {
				return err
			}
			for _, w := range eps {
				if !w.Subscribed(e.Type) {
					continue
				}
				nd := &Delivery{ID: a.NewID(), EventID: e.ID, MerchantID: e.MerchantID, Mode: e.Mode,
					EndpointID: w.ID, URL: w.URL, Format: w.Format, Status: DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
				if err := tx.InsertDelivery(ctx, nd); err != nil {
					return err
				}
				added = append(added, nd.ID)
			}
		}
		if !audited {
			return nil
		}
		return a.audit(ctx, tx, "event.redeliver", "event", e.ID, nil,
			map[string]any{"id": e.ID, "type": e.Type, "merchant_id": e.MerchantID, "deliveries": append([]string{}, added...)})
	})
}

// SendTestEvent writes a webhook.test event delivered, signed like any
// other, to one endpoint (endpointID) or every endpoint of the account. It
// returns validation_error when there is no endpoint, not_found and
// merchant_inactive.
func (a *App) SendTestEvent(ctx context.Context, p *Principal, endpointID string) (*EventView, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	if endpointID != "" {
		if _, err := a.WebhookEndpoint(ctx, p, endpointID); err != nil {
			return nil, err
		}
	}
	eps, err := a.Store.WebhookEndpoints(ctx, p.Merchant.ID, p.Mode())
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"endpoint_id": {"the account has no webhook endpoint in this mode"}}}
	}
	now := a.now()
	// The event's object_id is its record's id, as for every other event.
	objectID := "test_" + a.NewID()
	data, _ := json.Marshal(map[string]any{"id": objectID, "object": "webhook_test",
		"merchant_ref": "test", "message": "A test event from Xaalis.", "livemode": p.Mode().Live(), "created_at": Timestamp(now)})
	ev := &Event{ID: a.NewID(), MerchantID: p.Merchant.ID, Mode: p.Mode(), Type: EventWebhookTest, ObjectType: "webhook_test",
		ObjectID: objectID, Data: data, CreatedAt: now}
	err = a.update(ctx, func(tx Tx) error {
		if err := tx.InsertEvent(ctx, ev); err != nil {
			return err
		}
		list, err := tx.ActiveWebhookEndpoints(ctx, ev.MerchantID, ev.Mode)
		if err != nil {
			return err
		}
		for _, w := range list {
			if endpointID != "" && w.ID != endpointID {
				continue
			}
			if err := tx.InsertDelivery(ctx, &Delivery{ID: a.NewID(), EventID: ev.ID, MerchantID: ev.MerchantID, Mode: ev.Mode,
				EndpointID: w.ID, URL: w.URL, Format: w.Format, Status: DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v, err := a.EventDetail(ctx, p, ev.ID)
	if err != nil {
		return nil, err
	}
	return v, RunCommitHookStandalone(ctx, a, v)
}

// RunCommitHookStandalone stores a request's idempotent answer in a
// transaction of its own, for commands whose writes came before the answer
// was known (the answer shows state read after the commit).
func RunCommitHookStandalone(ctx context.Context, a *App, result any) error {
	return a.update(ctx, func(tx Tx) error { return RunCommitHook(ctx, tx, result) })
}

// CallbackSecret returns the whsec_ secret that signs the deliveries to
// transactions' callback_url in the key's mode (made on first use).
func (a *App) CallbackSecret(ctx context.Context, p *Principal) (string, error) {
	return a.Store.CallbackSecret(ctx, p.Merchant.ID, p.Mode(), NewWebhookSecret())
}
