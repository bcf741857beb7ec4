package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// newEndpoint builds an endpoint of merchant m, not yet stored.
func newEndpoint(m *xaalis.Merchant, mode xaalis.Mode, at time.Time) *xaalis.WebhookEndpoint {
	return &xaalis.WebhookEndpoint{
		ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, URL: "https://shop.example/hooks", Description: "orders",
		Events: []string{xaalis.EventPaymentSuccess, xaalis.EventPaymentFailed}, Format: xaalis.Format20260601,
		Secret: "whsec_" + xaalis.NewUUIDv7(), CreatedAt: at, UpdatedAt: at,
	}
}

func insertEndpoint(t testing.TB, s xaalis.Store, w *xaalis.WebhookEndpoint) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertWebhookEndpoint(ctx, w) }); err != nil {
		t.Fatalf("insert webhook endpoint: %v", err)
	}
}

// insertEvent stores an event of merchant m about an object of its own
// (events.object_id names no table) and returns it.
func insertEvent(t testing.TB, s xaalis.Store, m *xaalis.Merchant, mode xaalis.Mode, typ string, at time.Time) *xaalis.Event {
	t.Helper()
	ctx := context.Background()
	e := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Type: typ, ObjectType: "transaction",
		ObjectID: xaalis.NewUUIDv7(), Data: []byte(`{"id": "x", "n": 1}`), CreatedAt: at}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertEvent(ctx, e) }); err != nil {
		t.Fatalf("insert event: %v", err)
	}
	return e
}

// newDelivery builds a pending delivery of e to an endpoint (a callback_url
// one when endpointID is empty), due at next, not yet stored.
func newDelivery(e *xaalis.Event, endpointID string, next time.Time) *xaalis.Delivery {
	return &xaalis.Delivery{
		ID: xaalis.NewUUIDv7(), EventID: e.ID, MerchantID: e.MerchantID, Mode: e.Mode, EndpointID: endpointID,
		URL: "https://shop.example/callback", Format: xaalis.FormatLegacy, Status: xaalis.DeliveryPending,
		NextAttemptAt: next, CreatedAt: e.CreatedAt, UpdatedAt: e.CreatedAt,
	}
}

func insertDeliveries(t testing.TB, s xaalis.Store, ds ...*xaalis.Delivery) {
	t.Helper()
	ctx := context.Background()
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		for _, d := range ds {
			if err := tx.InsertDelivery(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("insert deliveries: %v", err)
	}
}

func sameTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b) && a.Location() == time.UTC && b.Location() == time.UTC
}

func sameTime(a, b time.Time) bool { return a.Equal(b) && a.Location() == time.UTC }

func sameEndpoint(got, want *xaalis.WebhookEndpoint) bool {
	return got.ID == want.ID && got.MerchantID == want.MerchantID && got.Mode == want.Mode && got.URL == want.URL &&
		got.Description == want.Description && slices.Equal(got.Events, want.Events) && got.Format == want.Format &&
		got.Secret == want.Secret && got.PreviousSecret == want.PreviousSecret &&
		sameTimePtr(got.PreviousExpiresAt, want.PreviousExpiresAt) && sameTime(got.CreatedAt, want.CreatedAt) &&
		sameTime(got.UpdatedAt, want.UpdatedAt) && sameTimePtr(got.DeletedAt, want.DeletedAt) && !got.ShowSecret
}

func sameDelivery(got, want *xaalis.Delivery) bool {
	return got.ID == want.ID && got.EventID == want.EventID && got.MerchantID == want.MerchantID &&
		got.Mode == want.Mode && got.EndpointID == want.EndpointID && got.URL == want.URL && got.Format == want.Format &&
		got.Status == want.Status && got.Attempts == want.Attempts && sameTime(got.NextAttemptAt, want.NextAttemptAt) &&
		sameTimePtr(got.LastAttemptAt, want.LastAttemptAt) && sameTime(got.CreatedAt, want.CreatedAt) &&
		sameTime(got.UpdatedAt, want.UpdatedAt)
}

func endpointIDs(ws []*xaalis.WebhookEndpoint) []string {
	return pluck(ws, func(x *xaalis.WebhookEndpoint) string { return x.ID })
}

func testWebhookEndpoint(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	other := NewMerchant(t, s)
	var ws []*xaalis.WebhookEndpoint
	for i := range 3 {
		w := newEndpoint(m, xaalis.ModeTest, t0.Add(time.Duration(2-i)*time.Second)) // inserted newest first
		ws = append(ws, w)
	}
	ws[1].Events, ws[1].Format, ws[1].Description = nil, xaalis.FormatLegacy, ""
	exp := t0.Add(24 * time.Hour)
	ws[2].PreviousSecret, ws[2].PreviousExpiresAt = "whsec_old", &exp
	for _, w := range ws {
		insertEndpoint(t, s, w)
	}
	live := newEndpoint(m, xaalis.ModeLive, t0)
	insertEndpoint(t, s, live)
	insertEndpoint(t, s, newEndpoint(other, xaalis.ModeTest, t0))

	for _, w := range append(ws, live) {
		got, err := s.WebhookEndpoint(ctx, m.ID, w.ID)
		if err != nil || !sameEndpoint(got, w) {
			t.Fatalf("endpoint = %+v, %v; want %+v", got, err, w)
		}
	}
	if _, err := s.WebhookEndpoint(ctx, other.ID, ws[0].ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's endpoint: %v", err)
	}
	if _, err := s.WebhookEndpoint(ctx, m.ID, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("missing endpoint: %v", err)
	}
	list, err := s.WebhookEndpoints(ctx, m.ID, xaalis.ModeTest)
	if err != nil || !slices.Equal(endpointIDs(list), []string{ws[2].ID, ws[1].ID, ws[0].ID}) {
		t.Fatalf("endpoints %v, %v; want oldest first", endpointIDs(list), err)
	}
	if list, _ := s.WebhookEndpoints(ctx, m.ID, xaalis.ModeLive); len(list) != 1 || list[0].ID != live.ID {
		t.Fatalf("live endpoints %v", endpointIDs(list))
	}

	// Update every mutable field: a rotation and a new configuration.
	exp2 := t0.Add(48 * time.Hour)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		w, err := tx.WebhookEndpointForUpdate(ctx, m.ID, ws[0].ID)
		if err != nil {
			return err
		}
		w.URL, w.Description, w.Events, w.Format = "https://shop.example/v2", "v2", []string{"*"}, xaalis.FormatLegacy
		w.PreviousSecret, w.Secret, w.PreviousExpiresAt = w.Secret, "whsec_new", &exp2
		w.UpdatedAt = t0.Add(time.Hour)
		ws[0] = w
		return tx.UpdateWebhookEndpoint(ctx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.WebhookEndpoint(ctx, m.ID, ws[0].ID); err != nil || !sameEndpoint(got, ws[0]) {
		t.Fatalf("updated endpoint = %+v, %v; want %+v", got, err, ws[0])
	}
	// Clearing the list and the previous secret.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		w, err := tx.WebhookEndpointForUpdate(ctx, m.ID, ws[0].ID)
		if err != nil {
			return err
		}
		w.Events, w.PreviousSecret, w.PreviousExpiresAt = nil, "", nil
		ws[0] = w
		return tx.UpdateWebhookEndpoint(ctx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.WebhookEndpoint(ctx, m.ID, ws[0].ID); err != nil || !sameEndpoint(got, ws[0]) || got.Events != nil {
		t.Fatalf("cleared endpoint = %+v, %v; want %+v", got, err, ws[0])
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		return tx.UpdateWebhookEndpoint(ctx, &xaalis.WebhookEndpoint{ID: "nope", MerchantID: m.ID, Format: xaalis.FormatLegacy})
	})
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("update missing endpoint: %v", err)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		w := *ws[1]
		w.MerchantID = other.ID
		return tx.UpdateWebhookEndpoint(ctx, &w)
	})
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("update through another merchant: %v", err)
	}

	// Soft delete: the row stays, invisible to every read.
	del := t0.Add(2 * time.Hour)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		w, err := tx.WebhookEndpointForUpdate(ctx, m.ID, ws[1].ID)
		if err != nil {
			return err
		}
		w.DeletedAt, w.UpdatedAt = &del, del
		return tx.UpdateWebhookEndpoint(ctx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebhookEndpoint(ctx, m.ID, ws[1].ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("deleted endpoint: %v", err)
	}
	if list, _ := s.WebhookEndpoints(ctx, m.ID, xaalis.ModeTest); !slices.Equal(endpointIDs(list), []string{ws[2].ID, ws[0].ID}) {
		t.Fatalf("endpoints after delete %v", endpointIDs(list))
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if _, err := tx.WebhookEndpointForUpdate(ctx, m.ID, ws[1].ID); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("deleted endpoint for update: %v", err)
		}
		w := *ws[1]
		w.URL = "https://shop.example/again"
		if err := tx.UpdateWebhookEndpoint(ctx, &w); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("update deleted endpoint: %v", err)
		}
		active, err := tx.ActiveWebhookEndpoints(ctx, m.ID, xaalis.ModeTest)
		if err != nil {
			return err
		}
		if !slices.Equal(endpointIDs(active), []string{ws[2].ID, ws[0].ID}) {
			return fmt.Errorf("active endpoints %v", endpointIDs(active))
		}
		// An endpoint added in the transaction is active in it.
		added := newEndpoint(m, xaalis.ModeTest, t0.Add(time.Minute))
		if err := tx.InsertWebhookEndpoint(ctx, added); err != nil {
			return err
		}
		active, err = tx.ActiveWebhookEndpoints(ctx, m.ID, xaalis.ModeTest)
		if err != nil {
			return err
		}
		if !slices.Equal(endpointIDs(active), []string{ws[2].ID, ws[0].ID, added.ID}) || !sameEndpoint(active[0], ws[2]) {
			return fmt.Errorf("active endpoints after insert %v", endpointIDs(active))
		}
		if active, err := tx.ActiveWebhookEndpoints(ctx, m.ID, xaalis.ModeLive); err != nil || len(active) != 1 {
			return fmt.Errorf("active live endpoints: %d, %v", len(active), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func eventIDs(es []*xaalis.Event) []string {
	return pluck(es, func(x *xaalis.Event) string { return x.ID })
}

func testEventList(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	other := NewMerchant(t, s)
	// es[i] at t0+i hours, success and failed in turn; es[6] shares es[5]'s
	// time and comes after it by id.
	var es []*xaalis.Event
	for i := range 7 {
		typ := xaalis.EventPaymentSuccess
		if i%2 == 1 {
			typ = xaalis.EventPaymentFailed
		}
		es = append(es, insertEvent(t, s, m, xaalis.ModeTest, typ, t0.Add(time.Duration(min(i, 5))*time.Hour)))
	}
	live := insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentSuccess, t0)
	foreign := insertEvent(t, s, other, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)

	got, err := s.Event(ctx, m.ID, es[0].ID)
	if err != nil || got.ID != es[0].ID || got.MerchantID != m.ID || got.Mode != xaalis.ModeTest ||
		got.Type != xaalis.EventPaymentSuccess || got.ObjectType != "transaction" || got.ObjectID != es[0].ObjectID ||
		got.Seq != 1 || string(got.Data) != string(es[0].Data) || !sameTime(got.CreatedAt, t0) {
		t.Fatalf("event = %+v, %v", got, err)
	}
	if got, err := s.Event(ctx, m.ID, live.ID); err != nil || got.Mode != xaalis.ModeLive {
		t.Fatalf("live event = %+v, %v", got, err)
	}
	if _, err := s.Event(ctx, m.ID, foreign.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's event: %v", err)
	}
	if got, err := s.EventByID(ctx, foreign.ID); err != nil || got.MerchantID != other.ID || string(got.Data) != string(foreign.Data) {
		t.Fatalf("event by id = %+v, %v", got, err)
	}
	if _, err := s.EventByID(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}

	// Deliveries: es[0] pending; es[1] succeeded and failed; es[2] failed
	// twice; es[3] succeeded.
	at := t0.Add(10 * time.Hour)
	mk := func(e *xaalis.Event, st xaalis.DeliveryStatus) *xaalis.Delivery {
		d := newDelivery(e, "", at)
		d.Status = st
		return d
	}
	insertDeliveries(t, s, mk(es[0], xaalis.DeliveryPending), mk(es[1], xaalis.DeliverySucceeded),
		mk(es[1], xaalis.DeliveryFailed), mk(es[2], xaalis.DeliveryFailed), mk(es[2], xaalis.DeliveryFailed),
		mk(es[3], xaalis.DeliverySucceeded), mk(live, xaalis.DeliveryPending), mk(foreign, xaalis.DeliveryPending))

	from, to := t0.Add(time.Hour), t0.Add(4*time.Hour)
	rev := func(idx ...int) []string {
		out := make([]string, len(idx))
		for i, j := range idx {
			out[i] = es[j].ID
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    xaalis.EventFilter
		want []string
	}{
		{"all", xaalis.EventFilter{}, rev(6, 5, 4, 3, 2, 1, 0)},
		{"type", xaalis.EventFilter{Type: xaalis.EventPaymentFailed}, rev(5, 3, 1)},
		{"range", xaalis.EventFilter{From: &from, To: &to}, rev(3, 2, 1)},
		{"from", xaalis.EventFilter{From: &to}, rev(6, 5, 4)},
		{"to", xaalis.EventFilter{To: &from}, rev(0)},
		{"pending", xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryPending}, rev(0)},
		{"succeeded", xaalis.EventFilter{DeliveryStatus: xaalis.DeliverySucceeded}, rev(3, 1)},
		{"failed", xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryFailed}, rev(2, 1)},
		{"failed type", xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryFailed, Type: xaalis.EventPaymentSuccess}, rev(2)},
		{"failed range", xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryFailed, From: &to}, nil},
		{"no such type", xaalis.EventFilter{Type: "payout.success"}, nil},
	} {
		c.f.MerchantID, c.f.Mode = m.ID, xaalis.ModeTest
		list, total, err := s.ListEvents(ctx, c.f, xaalis.PageRequest{Page: 1, PerPage: 20})
		if err != nil || total != len(c.want) || !slices.Equal(eventIDs(list), c.want) {
			t.Fatalf("%s: total %d, %v, %v; want %v", c.name, total, eventIDs(list), err, c.want)
		}
	}
	if list, total, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m.ID, Mode: xaalis.ModeLive},
		xaalis.PageRequest{Page: 1, PerPage: 20}); err != nil || total != 1 || len(list) != 1 || list[0].ID != live.ID {
		t.Fatalf("live events: total %d, %v, %v", total, eventIDs(list), err)
	}
	// Pages of 3: newest first across pages.
	var paged []string
	for p := 1; p <= 4; p++ {
		list, total, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m.ID, Mode: xaalis.ModeTest},
			xaalis.PageRequest{Page: p, PerPage: 3})
		if err != nil || total != 7 || len(list) != []int{3, 3, 1, 0}[p-1] {
			t.Fatalf("page %d: total %d, %d listed, %v", p, total, len(list), err)
		}
		paged = append(paged, eventIDs(list)...)
	}
	if !slices.Equal(paged, rev(6, 5, 4, 3, 2, 1, 0)) {
		t.Fatalf("pages %v", paged)
	}
	list, total, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m.ID, Mode: xaalis.ModeTest,
		DeliveryStatus: xaalis.DeliveryFailed}, xaalis.PageRequest{Page: 2, PerPage: 1})
	if err != nil || total != 2 || !slices.Equal(eventIDs(list), rev(1)) {
		t.Fatalf("second page of failed: total %d, %v, %v", total, eventIDs(list), err)
	}
}

func testDeliveries(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	w := newEndpoint(m, xaalis.ModeTest, t0)
	insertEndpoint(t, s, w)
	e := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)
	other := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)

	// An endpoint's delivery and the callback_url's, inserted with the
	// event as the fan-out does.
	toEndpoint := newDelivery(e, w.ID, t0)
	toEndpoint.URL, toEndpoint.Format = w.URL, w.Format
	callback := newDelivery(e, "", t0)
	callback.CreatedAt, callback.UpdatedAt = t0.Add(time.Second), t0.Add(time.Second)
	e2 := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.EventPaymentFailed,
		ObjectType: "transaction", ObjectID: e.ObjectID, Data: []byte(`{}`), CreatedAt: t0.Add(time.Minute)}
	var fanned *xaalis.Delivery
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertDelivery(ctx, callback); err != nil { // the newer first
			return err
		}
		if err := tx.InsertDelivery(ctx, toEndpoint); err != nil {
			return err
		}
		if err := tx.InsertEvent(ctx, e2); err != nil {
			return err
		}
		active, err := tx.ActiveWebhookEndpoints(ctx, m.ID, xaalis.ModeTest)
		if err != nil || len(active) != 1 {
			return fmt.Errorf("active endpoints: %d, %v", len(active), err)
		}
		fanned = newDelivery(e2, active[0].ID, e2.CreatedAt)
		return tx.InsertDelivery(ctx, fanned)
	})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.Deliveries(ctx, e.ID)
	if err != nil || len(ds) != 2 || !sameDelivery(ds[0], toEndpoint) || !sameDelivery(ds[1], callback) {
		t.Fatalf("deliveries = %+v, %v; want %+v and %+v", ds, err, toEndpoint, callback)
	}
	if ds, err := s.Deliveries(ctx, e2.ID); err != nil || len(ds) != 1 || !sameDelivery(ds[0], fanned) {
		t.Fatalf("fanned-out deliveries = %+v, %v", ds, err)
	}
	if ds, err := s.Deliveries(ctx, other.ID); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries of an event without any: %d, %v", len(ds), err)
	}
	if as, err := s.Attempts(ctx, callback.ID); err != nil || len(as) != 0 {
		t.Fatalf("attempts before any: %d, %v", len(as), err)
	}

	// A failed attempt (no answer), then a success.
	a1 := &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: callback.ID, AttemptedAt: t0.Add(time.Second),
		DurationMS: 10000, ErrorMessage: "timeout after 10s"}
	last1 := a1.AttemptedAt
	callback.Attempts, callback.NextAttemptAt, callback.LastAttemptAt, callback.UpdatedAt =
		1, t0.Add(time.Minute+time.Second), &last1, last1.Add(10*time.Second)
	if err := s.RecordAttempt(ctx, callback, a1); err != nil {
		t.Fatal(err)
	}
	a2 := &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: callback.ID, AttemptedAt: t0.Add(2 * time.Minute),
		DurationMS: 85, HTTPStatus: 200}
	last2 := a2.AttemptedAt
	callback.Status, callback.Attempts, callback.LastAttemptAt, callback.UpdatedAt =
		xaalis.DeliverySucceeded, 2, &last2, last2
	if err := s.RecordAttempt(ctx, callback, a2); err != nil {
		t.Fatal(err)
	}
	ds, _ = s.Deliveries(ctx, e.ID)
	if len(ds) != 2 || !sameDelivery(ds[1], callback) || !sameDelivery(ds[0], toEndpoint) {
		t.Fatalf("deliveries after attempts = %+v; want %+v", ds, callback)
	}
	as, err := s.Attempts(ctx, callback.ID)
	if err != nil || len(as) != 2 {
		t.Fatalf("attempts: %d, %v", len(as), err)
	}
	for i, want := range []*xaalis.Attempt{a1, a2} {
		got := as[i]
		if got.ID != want.ID || got.DeliveryID != callback.ID || !sameTime(got.AttemptedAt, want.AttemptedAt) ||
			got.DurationMS != want.DurationMS || got.HTTPStatus != want.HTTPStatus || got.ErrorMessage != want.ErrorMessage {
			t.Fatalf("attempt %d = %+v, want %+v", i, got, want)
		}
	}
	if as, _ := s.Attempts(ctx, toEndpoint.ID); len(as) != 0 {
		t.Fatalf("another delivery's attempts: %d", len(as))
	}

	// A missing delivery: nothing is stored.
	ghost := newDelivery(e, "", t0)
	err = s.RecordAttempt(ctx, ghost, &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: ghost.ID, AttemptedAt: t0})
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("attempt of a missing delivery: %v", err)
	}
	// A delivery of a missing event is refused.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		return tx.InsertDelivery(ctx, newDelivery(&xaalis.Event{ID: "nope", MerchantID: m.ID, Mode: xaalis.ModeTest}, "", t0))
	})
	if err == nil {
		t.Fatal("a delivery of a missing event was stored")
	}
}

// testFanOut: an event gets one pending delivery per endpoint of its
// merchant and mode subscribed to its type (no events, "*" or the type),
// none for a deleted endpoint, another mode's or another merchant's, in
// the endpoints' order and named by the generator; the dispatcher is woken
// when one is stored and only then. Past MaxWebhookEndpoints endpoints
// (only a race of creations makes them) every endpoint still gets one.
func testFanOut(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	ep := func(m *xaalis.Merchant, mode xaalis.Mode, at time.Duration, url string, events ...string) *xaalis.WebhookEndpoint {
		w := newEndpoint(m, mode, t0.Add(at))
		w.URL, w.Events = "https://shop.example/"+url, events
		if url == "legacy" {
			w.Format = xaalis.FormatLegacy
		}
		insertEndpoint(t, s, w)
		return w
	}
	all := ep(m, xaalis.ModeTest, 0, "all")
	star := ep(m, xaalis.ModeTest, time.Second, "legacy", "*")
	exact := ep(m, xaalis.ModeTest, 2*time.Second, "exact", xaalis.EventPaymentFailed, xaalis.EventPaymentSuccess)
	ep(m, xaalis.ModeTest, 3*time.Second, "failed-only", xaalis.EventPaymentFailed)
	ep(m, xaalis.ModeLive, 4*time.Second, "live")
	ep(other, xaalis.ModeTest, 5*time.Second, "other")
	deleted := ep(m, xaalis.ModeTest, 6*time.Second, "deleted")
	gone := t0.Add(time.Minute)
	deleted.DeletedAt, deleted.UpdatedAt = &gone, gone
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.UpdateWebhookEndpoint(ctx, deleted) }); err != nil {
		t.Fatal(err)
	}

	wake := s.Subscribe(xaalis.WakeDeliveries)
	DrainWakes(wake)
	// fanOut stores an event of merchant m in mode with its fan-out and
	// returns it with the IDs the generator made, in order.
	fanOut := func(m *xaalis.Merchant, mode xaalis.Mode, typ string) (*xaalis.Event, []string) {
		t.Helper()
		e := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Type: typ, ObjectType: "transaction",
			ObjectID: xaalis.NewUUIDv7(), First: true, Data: []byte(`{}`), CreatedAt: t0.Add(2 * time.Minute)}
		var made []string
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			made = nil
			if err := tx.InsertEvent(ctx, e); err != nil {
				return err
			}
			return tx.InsertFanOut(ctx, e, func() string {
				id := xaalis.NewUUIDv7()
				made = append(made, id)
				return id
			})
		})
		if err != nil {
			t.Fatalf("fan out: %v", err)
		}
		return e, made
	}
	e, made := fanOut(m, xaalis.ModeTest, xaalis.EventPaymentSuccess)
	ds, err := s.Deliveries(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	targets := []*xaalis.WebhookEndpoint{all, star, exact}
	if len(ds) != len(targets) || len(made) < len(targets) {
		t.Fatalf("deliveries to %v (%d IDs made); want to %v", deliveryURLs(ds), len(made), endpointURLs(targets))
	}
	for i, w := range targets {
		want := &xaalis.Delivery{ID: made[i], EventID: e.ID, MerchantID: m.ID, Mode: xaalis.ModeTest, EndpointID: w.ID,
			URL: w.URL, Format: w.Format, Status: xaalis.DeliveryPending, NextAttemptAt: e.CreatedAt,
			CreatedAt: e.CreatedAt, UpdatedAt: e.CreatedAt}
		if !sameDelivery(ds[i], want) {
			t.Fatalf("delivery %d = %+v; want %+v", i, ds[i], want)
		}
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("a fan-out that stored deliveries did not wake the dispatcher")
	}
	DrainWakes(wake)

	// Subscribed to nothing of this type: no delivery, no wake-up.
	e, _ = fanOut(other, xaalis.ModeTest, xaalis.EventPaymentSuccess) // other's one endpoint takes every event
	if ds, err := s.Deliveries(ctx, e.ID); err != nil || len(ds) != 1 {
		t.Fatalf("other merchant's deliveries = %v, %v", deliveryURLs(ds), err)
	}
	DrainWakes(wake)
	lone := NewMerchant(t, s)
	ep(lone, xaalis.ModeTest, 0, "failed-only", xaalis.EventPaymentFailed)
	e, _ = fanOut(lone, xaalis.ModeTest, xaalis.EventPaymentSuccess)
	if ds, err := s.Deliveries(ctx, e.ID); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries to an endpoint not subscribed = %v, %v", deliveryURLs(ds), err)
	}
	select {
	case <-wake:
		t.Fatal("a fan-out that stored nothing woke the dispatcher")
	case <-time.After(500 * time.Millisecond):
	}

	// More endpoints than the limit: one delivery each, none named twice.
	many := NewMerchant(t, s)
	n := xaalis.MaxWebhookEndpoints + 2
	for i := range n {
		ep(many, xaalis.ModeTest, time.Duration(i)*time.Second, fmt.Sprintf("many/%d", i))
	}
	e, made = fanOut(many, xaalis.ModeTest, xaalis.EventRefundSuccess)
	ds, err = s.Deliveries(ctx, e.ID)
	if err != nil || len(ds) != n {
		t.Fatalf("deliveries past the limit: %d, %v; want %d", len(ds), err, n)
	}
	ids, urls := map[string]bool{}, map[string]bool{}
	for _, d := range ds {
		ids[d.ID], urls[d.URL] = true, true
	}
	if len(ids) != n || len(urls) != n {
		t.Fatalf("past the limit: %d distinct IDs and %d URLs of %d deliveries", len(ids), len(urls), n)
	}
	for i := range min(len(made), xaalis.MaxWebhookEndpoints) {
		if !ids[made[i]] {
			t.Fatalf("ID %d of the generator, %s, names no delivery", i, made[i])
		}
	}
}

func endpointURLs(ws []*xaalis.WebhookEndpoint) []string {
	return pluck(ws, func(x *xaalis.WebhookEndpoint) string { return x.URL })
}

func deliveryURLs(ds []*xaalis.Delivery) []string {
	return pluck(ds, func(x *xaalis.Delivery) string { return x.URL })
}

func deliveryIDs(ds []*xaalis.Delivery) []string {
	return pluck(ds, func(x *xaalis.Delivery) string { return x.ID })
}

func testClaimDeliveries(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	e := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0.Add(-time.Hour))
	d1 := newDelivery(e, "", t0.Add(-2*time.Minute))
	d2 := newDelivery(e, "", t0.Add(-time.Minute))
	d3 := newDelivery(e, "", t0.Add(time.Minute)) // not due yet
	done := newDelivery(e, "", t0.Add(-time.Hour))
	done.Status = xaalis.DeliverySucceeded
	failed := newDelivery(e, "", t0.Add(-time.Hour))
	failed.Status = xaalis.DeliveryFailed
	insertDeliveries(t, s, d3, d2, done, failed, d1)

	claimAt := func(now time.Time, limit int, want ...*xaalis.Delivery) []*xaalis.Delivery {
		t.Helper()
		got, err := s.ClaimDeliveries(ctx, now, time.Minute, limit)
		if err != nil || !slices.Equal(deliveryIDs(got), deliveryIDs(want)) {
			t.Fatalf("claim at %v, limit %d: %v, %v; want %v", now, limit, deliveryIDs(got), err, deliveryIDs(want))
		}
		return got
	}
	got := claimAt(t0, 1, d1) // the oldest due first
	if !sameDelivery(got[0], d1) {
		t.Fatalf("claimed %+v, want %+v", got[0], d1)
	}
	claimAt(t0, 10, d2)                          // d1 is held; d3 not due; done and failed never
	claimAt(t0.Add(59*time.Second), 10)          // both held until t0+1m
	claimAt(t0.Add(time.Minute), 10, d1, d2, d3) // the holds ran out; d3 is due
	claimAt(t0.Add(time.Minute), 0)

	// An attempt releases the hold: d1, due again at once, is claimable
	// before its hold would have run out; d3 succeeded and is never claimed.
	rec := func(d *xaalis.Delivery, st xaalis.DeliveryStatus, next time.Time) {
		t.Helper()
		at := t0.Add(time.Minute + time.Second)
		d.Status, d.Attempts, d.NextAttemptAt, d.LastAttemptAt, d.UpdatedAt = st, d.Attempts+1, next, &at, at
		if err := s.RecordAttempt(ctx, d, &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: d.ID, AttemptedAt: at,
			DurationMS: 5, HTTPStatus: 500}); err != nil {
			t.Fatal(err)
		}
	}
	rec(d1, xaalis.DeliveryPending, t0.Add(time.Minute+time.Second))
	rec(d3, xaalis.DeliverySucceeded, t0.Add(time.Minute+time.Second))
	rec(d2, xaalis.DeliveryPending, t0.Add(time.Hour)) // retried later
	got = claimAt(t0.Add(time.Minute+time.Second), 10, d1)
	if !sameDelivery(got[0], d1) {
		t.Fatalf("claimed %+v, want %+v", got[0], d1)
	}
	claimAt(t0.Add(time.Hour-time.Second), 10, d1) // d1's new hold ran out; d2 not due
	claimAt(t0.Add(time.Hour), 10, d2)
	rec(d1, xaalis.DeliveryFailed, t0.Add(time.Hour))
	claimAt(t0.Add(24*time.Hour), 10, d2)
}

// ConcurrentClaims stores 100 due deliveries through stores[0] and claims
// them with 8 claimers at once, spread over the stores (which share one
// database): every delivery goes to exactly one claimer.
func ConcurrentClaims(t *testing.T, stores ...xaalis.Store) {
	ctx := context.Background()
	s := stores[0]
	m := NewMerchant(t, s)
	var ds []*xaalis.Delivery
	for range 4 {
		e := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)
		for i := range 25 {
			ds = append(ds, newDelivery(e, "", t0.Add(time.Duration(i%5)*time.Second)))
		}
	}
	insertDeliveries(t, s, ds...)
	now := t0.Add(time.Minute)
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stores[i%len(stores)]
			for {
				got, err := st.ClaimDeliveries(ctx, now, time.Minute, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					claimed[d.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimed) != len(ds) {
		t.Fatalf("%d deliveries claimed, want %d", len(claimed), len(ds))
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("delivery %s claimed %d times", id, n)
		}
	}
	if got, err := s.ClaimDeliveries(ctx, now, time.Minute, 100); err != nil || len(got) != 0 {
		t.Fatalf("claim after all are held: %d, %v", len(got), err)
	}
}

func testCallbackSecret(t *testing.T, s xaalis.Store) { testStableSecret(t, s, s.CallbackSecret) }

// testStableSecret checks a secret kept per merchant and mode, made on
// first use (CallbackSecret, ListenSecret).
func testStableSecret(t *testing.T, s xaalis.Store, secret func(ctx context.Context, merchantID string, mode xaalis.Mode, fresh string) (string, error)) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	secrets := make([]string, 8)
	var wg sync.WaitGroup
	for i := range secrets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := secret(ctx, m.ID, xaalis.ModeTest, fmt.Sprint("fresh-", i))
			if err != nil {
				t.Error(err)
			}
			secrets[i] = v
		}()
	}
	wg.Wait()
	for _, v := range secrets {
		if v != secrets[0] {
			t.Fatalf("callback secrets differ: %q", secrets)
		}
	}
	if len(secrets[0]) < len("fresh-0") || secrets[0][:6] != "fresh-" {
		t.Fatalf("callback secret %q is none of the fresh ones", secrets[0])
	}
	if v, err := secret(ctx, m.ID, xaalis.ModeTest, "later"); err != nil || v != secrets[0] {
		t.Fatalf("second use: %q, %v; want %q", v, err, secrets[0])
	}
	// Each mode and each merchant has a secret of its own.
	if v, err := secret(ctx, m.ID, xaalis.ModeLive, "live"); err != nil || v != "live" {
		t.Fatalf("live secret: %q, %v", v, err)
	}
	other := NewMerchant(t, s)
	if v, err := secret(ctx, other.ID, xaalis.ModeTest, "other"); err != nil || v != "other" {
		t.Fatalf("another merchant's secret: %q, %v", v, err)
	}
	if v, _ := secret(ctx, m.ID, xaalis.ModeTest, "again"); v != secrets[0] {
		t.Fatalf("secret changed to %q", v)
	}
}
