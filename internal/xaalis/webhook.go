package xaalis

import (
	"context"
	"encoding/json"
	"time"
)

// PayloadFormat is the shape of a webhook body.
type PayloadFormat string

// The two payload formats (DECISIONS.md: Webhooks).
const (
	// FormatLegacy: {"event": "...", "data": {...}}.
	FormatLegacy PayloadFormat = "legacy"
	// Format20260601: the common payments API's event shape.
	Format20260601 PayloadFormat = "2026-06-01"
)

// Valid reports whether f is a known format.
func (f PayloadFormat) Valid() bool { return f == FormatLegacy || f == Format20260601 }

// WebhookEndpoint is a URL of the merchant's that receives events.
type WebhookEndpoint struct {
	ID          string
	MerchantID  string
	Mode        Mode
	URL         string
	Description string
	// Events the endpoint receives; empty means every event.
	Events []string
	Format PayloadFormat
	// Secret signs deliveries; PreviousSecret signs them too until
	// PreviousExpiresAt (secret rotation).
	Secret            string
	PreviousSecret    string
	PreviousExpiresAt *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	DeletedAt         *time.Time
	// ShowSecret is set when the record is answered to its creator (or a
	// rotation): the secret is shown then only.
	ShowSecret bool
}

// Subscribed reports whether the endpoint receives an event type.
func (w *WebhookEndpoint) Subscribed(typ string) bool {
	if len(w.Events) == 0 {
		return true
	}
	for _, e := range w.Events {
		if e == "*" || e == typ {
			return true
		}
	}
	return false
}

// Secrets are the secrets that sign a delivery at now: the current one,
// and the previous one during its grace period.
func (w *WebhookEndpoint) Secrets(now time.Time) []string {
	out := []string{w.Secret}
	if w.PreviousSecret != "" && w.PreviousExpiresAt != nil && now.Before(*w.PreviousExpiresAt) {
		out = append(out, w.PreviousSecret)
	}
	return out
}

// MarshalJSON renders the endpoint record; the secret appears only when
// ShowSecret is set.
func (w *WebhookEndpoint) MarshalJSON() ([]byte, error) {
	events := w.Events
	if len(events) == 0 {
		events = []string{"*"}
	}
	j := struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		URL               string        `json:"url"`
		Description       *string       `json:"description"`
		Events            []string      `json:"events"`
		PayloadFormat     PayloadFormat `json:"payload_format"`
		Status            string        `json:"status"`
		Secret            *string       `json:"secret,omitempty"`
		PreviousExpiresAt *string       `json:"previous_secret_expires_at"`
		Livemode          bool          `json:"livemode"`
		CreatedAt         string        `json:"created_at"`
		UpdatedAt         string        `json:"updated_at"`
	}{ID: w.ID, Object: "webhook_endpoint", URL: w.URL, Description: strPtr(w.Description), Events: events,
		PayloadFormat: w.Format, Status: "enabled", Livemode: w.Mode.Live(), CreatedAt: Timestamp(w.CreatedAt),
		UpdatedAt: Timestamp(w.UpdatedAt)}
	if w.ShowSecret {
		j.Secret = &w.Secret
	}
	if w.DeletedAt != nil {
		j.Status = "deleted"
	}
	if w.PreviousSecret != "" && w.PreviousExpiresAt != nil {
		j.PreviousExpiresAt = tsPtr(w.PreviousExpiresAt)
	}
	return json.Marshal(j)
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliverySucceeded DeliveryStatus = "succeeded"
	DeliveryFailed    DeliveryStatus = "failed"
)

// Delivery is one event on its way to one URL: an endpoint's, or the
// transaction's callback_url (EndpointID empty).
type Delivery struct {
	ID            string
	EventID       string
	MerchantID    string
	Mode          Mode
	EndpointID    string
	URL           string
	Format        PayloadFormat
	Status        DeliveryStatus
	Attempts      int
	NextAttemptAt time.Time
	LastAttemptAt *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Attempt is one try of a delivery.
type Attempt struct {
	ID           string
	DeliveryID   string
	AttemptedAt  time.Time
	DurationMS   int64
	HTTPStatus   int // 0: no answer
	ErrorMessage string
}

// EventFilter selects a merchant's events.
type EventFilter struct {
	MerchantID string
	Mode       Mode
	Type       string
	From, To   *time.Time
	// DeliveryStatus keeps events with at least one delivery in it.
	DeliveryStatus DeliveryStatus
}

// StreamCursor is a place in the event stream: the order in which events
// committed, so that reading after a cursor never skips an event that
// commits later. Tx is PostgreSQL's transaction id (0 on SQLite), Pos the
// insertion order; cursors compare by Tx, then Pos.
type StreamCursor struct {
	Tx  uint64
	Pos int64
}

// After reports whether c is further along the stream than d.
func (c StreamCursor) After(d StreamCursor) bool {
	return c.Tx > d.Tx || c.Tx == d.Tx && c.Pos > d.Pos
}

// StreamedEvent is an event read from the stream, with its place.
type StreamedEvent struct {
	Event  *Event
	Cursor StreamCursor
}

// RedeliveryFilter selects the deliveries POST /v1/events/redeliver sends
// again: those of the merchant's events in Mode of Type (any when empty),
// created in [From, To), in DeliveryStatus (any when empty), to EndpointID
// (any URL when empty), never to a deleted endpoint.
type RedeliveryFilter struct {
	EventFilter
	EndpointID string
}

// URLChecker checks a webhook URL against the URL rules (HTTPS, no
// private or internal targets). It returns validation_error naming the
// rule.
type URLChecker func(ctx context.Context, rawURL string) error

// WebhookStore is the part of the Store webhooks need.
type WebhookStore interface {
	// Durable returns once what ctx's reads saw is durable (Store.Durable):
	// a delivery waits for it before it leaves.
	Durable(ctx context.Context) error
	WebhookEndpoint(ctx context.Context, merchantID, id string) (*WebhookEndpoint, error)
	// WebhookEndpoints lists the merchant's endpoints in a mode, not deleted,
	// oldest first.
	WebhookEndpoints(ctx context.Context, merchantID string, mode Mode) ([]*WebhookEndpoint, error)
	// Event returns one of the merchant's events.
	Event(ctx context.Context, merchantID, id string) (*Event, error)
	// EventByID returns an event of any merchant (the dispatcher).
	EventByID(ctx context.Context, id string) (*Event, error)
	ListEvents(ctx context.Context, f EventFilter, page PageRequest) ([]*Event, int, error)
	// Deliveries returns an event's deliveries, oldest first.
	Deliveries(ctx context.Context, eventID string) ([]*Delivery, error)
	// Attempts returns a delivery's attempts, oldest first.
	Attempts(ctx context.Context, deliveryID string) ([]*Attempt, error)
	// ClaimDeliveries takes up to limit pending deliveries due at now that
	// nobody holds, and holds them until now+lease: several processes may
	// claim at once, each delivery goes to one.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*Delivery, error)
	// RecordAttempt stores an attempt and the delivery's new state,
	// releases the hold, and counts the attempt in the stat counters
	// (AttemptStat), in one transaction.
	RecordAttempt(ctx context.Context, d *Delivery, a *Attempt) error
	// CallbackSecret returns the merchant's secret for callback_url
	// deliveries in a mode, creating it (with fresh) on first use.
	CallbackSecret(ctx context.Context, merchantID string, mode Mode, fresh string) (string, error)
	// ListenSecret returns the merchant's secret for `xaalis listen` in a
	// mode, creating it (with fresh) on first use.
	ListenSecret(ctx context.Context, merchantID string, mode Mode, fresh string) (string, error)

	// StreamHead is the stream's place now for the merchant's events in a
	// mode: the events read after it are the ones that commit from now on,
	// and those listed in skip, which committed already.
	StreamHead(ctx context.Context, merchantID string, mode Mode) (head StreamCursor, skip []string, err error)
	// StreamCursorOf returns one of the merchant's events and its place in
	// the stream; not_found.
	StreamCursorOf(ctx context.Context, merchantID, eventID string) (*Event, StreamCursor, error)
	// StreamLastBefore returns the newest of the merchant's events in a
	// mode placed at or before a cursor (ErrNotFound when none is).
	StreamLastBefore(ctx context.Context, merchantID string, mode Mode, c StreamCursor) (*Event, error)
	// StreamEvents returns up to limit of the merchant's events in a mode
	// after a cursor, in stream order. An event that commits later never
	// has a place before the last one returned.
	StreamEvents(ctx context.Context, merchantID string, mode Mode, after StreamCursor, limit int) ([]StreamedEvent, error)
}

// WebhookTx is the part of Tx webhooks need.
type WebhookTx interface {
	InsertWebhookEndpoint(ctx context.Context, w *WebhookEndpoint) error
	WebhookEndpointForUpdate(ctx context.Context, merchantID, id string) (*WebhookEndpoint, error)
	UpdateWebhookEndpoint(ctx context.Context, w *WebhookEndpoint) error
	// ActiveWebhookEndpoints lists the merchant's endpoints in a mode, not
	// deleted, oldest first, with their secrets opened.
	ActiveWebhookEndpoints(ctx context.Context, merchantID string, mode Mode) ([]*WebhookEndpoint, error)
	// LockWebhookEndpoints holds, until the transaction ends, the right
	// to add endpoints of the merchant in mode, so that two creations at
	// once count each other's endpoint against MaxWebhookEndpoints.
	LockWebhookEndpoints(ctx context.Context, merchantID string, mode Mode) error
	// InsertFanOut stores, in ev's transaction, one pending delivery of ev,
	// due at ev.CreatedAt, for every endpoint of ev's merchant in ev's mode
	// that is not deleted and is subscribed to ev.Type (Subscribed), in the
	// endpoints' order, oldest first, each named by newID; and wakes the
	// dispatcher at commit when it stores any.
	//
	// On PostgreSQL it is one statement that nothing waits for, sent with
	// the transaction's next statement, so that an event costs no round
	// trip of its own. It names the deliveries there from
	// MaxWebhookEndpoints IDs made ahead; an endpoint past them, which only
	// endpoints created concurrently past the limit can be, gets a random
	// UUID.
	InsertFanOut(ctx context.Context, ev *Event, newID IDGen) error
	InsertDelivery(ctx context.Context, d *Delivery) error
	// RedeliveryTargets counts the events that have a delivery matching f
	// and, when there are at most max, returns one delivery per event and
	// URL (endpoint or callback_url) among those, oldest event first: the
	// events and URLs to send again.
	RedeliveryTargets(ctx context.Context, f RedeliveryFilter, max int) (events int, targets []*Delivery, err error)
}
