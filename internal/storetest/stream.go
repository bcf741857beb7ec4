package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func testListenSecret(t *testing.T, s xaalis.Store) {
	testStableSecret(t, s, s.ListenSecret)
	// It is not the callback secret.
	ctx := context.Background()
	m := NewMerchant(t, s)
	cb, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeTest, "callback")
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := s.ListenSecret(ctx, m.ID, xaalis.ModeTest, "listen"); err != nil || ls != "listen" || ls == cb {
		t.Fatalf("listen secret %q, %v; callback secret %q", ls, err, cb)
	}
}

func streamedIDs(list []xaalis.StreamedEvent) []string {
	return pluck(list, func(x xaalis.StreamedEvent) string { return x.Event.ID })
}

func testEventStream(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	now := time.Now().UTC().Truncate(time.Microsecond)
	before := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, now)

	head, skip, err := s.StreamHead(ctx, m.ID, xaalis.ModeTest)
	if err != nil {
		t.Fatal(err)
	}
	// Read after the head, less skip, only events that commit after it:
	// none yet.
	fromHead := func(want int) []xaalis.StreamedEvent {
		t.Helper()
		got := streamUntil(t, s, m, head, want)
		return slices.DeleteFunc(got, func(e xaalis.StreamedEvent) bool { return slices.Contains(skip, e.Event.ID) })
	}
	if got := fromHead(0); len(got) != 0 {
		t.Fatalf("after the head, before any new event: %v", streamedIDs(got))
	}
	// The newest event before the head: where a stream opened at the
	// head resumes from; none for the other mode or merchant. An event
	// to skip (committed, but placed after the head: on PostgreSQL, one
	// of a transaction that began while another still ran) is not before
	// it.
	if last, err := s.StreamLastBefore(ctx, m.ID, xaalis.ModeTest, head); slices.Contains(skip, before.ID) {
		if !errIs(err, xaalis.ErrNotFound) {
			t.Fatalf("last before the head = %+v, %v; want none (%s is after it)", last, err, before.ID)
		}
	} else if err != nil || last.ID != before.ID {
		t.Fatalf("last before the head = %+v, %v; want %s", last, err, before.ID)
	}
	for _, c := range []struct {
		merchant string
		mode     xaalis.Mode
	}{{m.ID, xaalis.ModeLive}, {other.ID, xaalis.ModeTest}} {
		if _, err := s.StreamLastBefore(ctx, c.merchant, c.mode, head); !errIs(err, xaalis.ErrNotFound) {
			t.Fatalf("last before the head of %+v: %v, want not_found", c, err)
		}
	}
	var want []string
	for i := range 5 {
		// Creation times out of order: the stream follows commits.
		e := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentFailed, now.Add(-time.Duration(i)*time.Minute))
		want = append(want, e.ID)
		insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentFailed, now)
		insertEvent(t, s, other, xaalis.ModeTest, xaalis.EventPaymentFailed, now)
	}
	got := fromHead(len(want) + len(skip))
	if !slices.Equal(streamedIDs(got), want) {
		t.Fatalf("stream = %v, want the merchant's test events in commit order %v", streamedIDs(got), want)
	}
	for i := 1; i < len(got); i++ {
		if !got[i].Cursor.After(got[i-1].Cursor) {
			t.Fatalf("cursor %d %+v is not after %+v", i, got[i].Cursor, got[i-1].Cursor)
		}
	}
	if got[0].Event.Type != xaalis.EventPaymentFailed || got[0].Event.MerchantID != m.ID || string(got[0].Event.Data) == "" {
		t.Fatalf("streamed event %+v", got[0].Event)
	}
	// Pages: a limit, then on from the last cursor.
	page, err := s.StreamEvents(ctx, m.ID, xaalis.ModeTest, got[0].Cursor, 2) // all visible by now
	if err != nil || !slices.Equal(streamedIDs(page), want[1:3]) {
		t.Fatalf("a page %v, %v", streamedIDs(page), err)
	}
	rest, err := s.StreamEvents(ctx, m.ID, xaalis.ModeTest, page[1].Cursor, 10)
	if err != nil || !slices.Equal(streamedIDs(rest), want[3:]) {
		t.Fatalf("rest %v, %v; want %v", streamedIDs(rest), err, want[3:])
	}

	// An event's own cursor resumes after it; the event before the head
	// resumes with everything since.
	e, c, err := s.StreamCursorOf(ctx, m.ID, want[1])
	if err != nil || e.ID != want[1] || c != got[1].Cursor {
		t.Fatalf("StreamCursorOf = %v %+v, %v; want %+v", e, c, err, got[1].Cursor)
	}
	if rest, _ := s.StreamEvents(ctx, m.ID, xaalis.ModeTest, c, 10); !slices.Equal(streamedIDs(rest), want[2:]) {
		t.Fatalf("after %s: %v", want[1], streamedIDs(rest))
	}
	_, c, err = s.StreamCursorOf(ctx, m.ID, before.ID)
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := s.StreamEvents(ctx, m.ID, xaalis.ModeTest, c, 10); !slices.Equal(streamedIDs(all), want) {
		t.Fatalf("after the first event: %v, want %v", streamedIDs(all), want)
	}
	if _, _, err := s.StreamCursorOf(ctx, other.ID, want[0]); !errIs(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's event: %v, want not_found", err)
	}
	if _, _, err := s.StreamCursorOf(ctx, m.ID, xaalis.NewUUIDv7()); !errIs(err, xaalis.ErrNotFound) {
		t.Fatalf("unknown event: %v, want not_found", err)
	}
}

// testEventStreamCommitOrder: an event whose transaction is still open is
// never passed over by a reader that sees a later one: the reader sees
// neither until it commits, then both, in order.
func testEventStreamCommitOrder(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	head, skip, err := s.StreamHead(ctx, m.ID, xaalis.ModeTest)
	if err != nil || len(skip) != 0 {
		t.Fatal(skip, err)
	}
	now := time.Now().UTC()
	first := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.EventPaymentSuccess,
		ObjectType: "transaction", ObjectID: xaalis.NewUUIDv7(), Data: []byte(`{}`), CreatedAt: now}
	inserted, release, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		firstDone <- s.Update(ctx, func(tx xaalis.Tx) error {
			if err := tx.InsertEvent(ctx, first); err != nil {
				return err
			}
			close(inserted)
			<-release
			return nil
		})
	}()
	<-inserted
	secondDone := make(chan *xaalis.Event, 1)
	go func() { secondDone <- insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentFailed, now) }()
	var second *xaalis.Event
	select {
	case second = <-secondDone: // PostgreSQL: committed while the first is open
	case <-time.After(300 * time.Millisecond): // SQLite: waits for the writer
	}
	if got, err := s.StreamEvents(ctx, m.ID, xaalis.ModeTest, head, 10); err != nil || len(got) != 0 {
		t.Fatalf("while the first transaction is open the stream shows %v, %v; want nothing", streamedIDs(got), err)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if second == nil {
		second = <-secondDone
	}
	if got := streamUntil(t, s, m, head, 2); !slices.Equal(streamedIDs(got), []string{first.ID, second.ID}) {
		t.Fatalf("stream = %v; want [%s %s]", streamedIDs(got), first.ID, second.ID)
	}
}

// streamUntil reads the merchant's test events after c until there are n
// of them (or 10 s passed): on PostgreSQL, other tests' transactions still
// running hold the stream back for a moment.
func streamUntil(t *testing.T, s xaalis.Store, m *xaalis.Merchant, c xaalis.StreamCursor, n int) []xaalis.StreamedEvent {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.StreamEvents(context.Background(), m.ID, xaalis.ModeTest, c, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testRedeliveryTargets(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	w1, w2 := newEndpoint(m, xaalis.ModeTest, t0), newEndpoint(m, xaalis.ModeTest, t0)
	w2.URL = "https://shop.example/other"
	insertEndpoint(t, s, w1)
	insertEndpoint(t, s, w2)
	e1 := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)
	e2 := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentFailed, t0.Add(time.Minute))
	e3 := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentFailed, t0.Add(2*time.Minute)) // no delivery
	live := insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentFailed, t0)
	del := func(e *xaalis.Event, ep *xaalis.WebhookEndpoint, st xaalis.DeliveryStatus, at time.Duration) *xaalis.Delivery {
		d := newDelivery(e, "", t0)
		if ep != nil {
			d.EndpointID, d.URL, d.Format = ep.ID, ep.URL, ep.Format
		}
		d.Status, d.CreatedAt, d.UpdatedAt = st, t0.Add(at), t0.Add(at)
		return d
	}
	insertDeliveries(t, s,
		del(e1, w1, xaalis.DeliveryFailed, 0),
		del(e1, w1, xaalis.DeliverySucceeded, time.Second), // e1 to w1: latest succeeded
		del(e1, nil, xaalis.DeliveryFailed, 0),             // e1 to its callback_url
		del(e2, w1, xaalis.DeliveryFailed, 0),
		del(e2, w2, xaalis.DeliveryFailed, 0),
		del(live, nil, xaalis.DeliveryFailed, 0),
	)
	w2.DeletedAt = &t0
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.UpdateWebhookEndpoint(ctx, w2) }); err != nil {
		t.Fatal(err)
	}
	_ = e3
	type target struct{ event, endpoint, url string }
	run := func(f xaalis.RedeliveryFilter, max int) (int, []target) {
		t.Helper()
		f.MerchantID, f.Mode = m.ID, xaalis.ModeTest
		var n int
		var out []target
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			var list []*xaalis.Delivery
			var err error
			n, list, err = tx.RedeliveryTargets(ctx, f, max)
			for _, d := range list {
				if d.EndpointID != "" && d.Format != w1.Format || d.EndpointID == "" && d.Format != xaalis.FormatLegacy {
					t.Errorf("target %+v: format %q", d, d.Format)
				}
				out = append(out, target{d.EventID, d.EndpointID, d.URL})
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, out
	}
	cb := "https://shop.example/callback"
	for _, c := range []struct {
		name string
		f    xaalis.RedeliveryFilter
		n    int
		want []target
	}{
		{"all", xaalis.RedeliveryFilter{}, 2, []target{{e1.ID, "", cb}, {e1.ID, w1.ID, w1.URL}, {e2.ID, w1.ID, w1.URL}}},
		{"failed", xaalis.RedeliveryFilter{EventFilter: xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryFailed}}, 2,
			[]target{{e1.ID, "", cb}, {e2.ID, w1.ID, w1.URL}}},
		{"succeeded", xaalis.RedeliveryFilter{EventFilter: xaalis.EventFilter{DeliveryStatus: xaalis.DeliverySucceeded}}, 1,
			[]target{{e1.ID, w1.ID, w1.URL}}},
		{"endpoint and failed", xaalis.RedeliveryFilter{EndpointID: w1.ID, EventFilter: xaalis.EventFilter{DeliveryStatus: xaalis.DeliveryFailed}}, 1,
			[]target{{e2.ID, w1.ID, w1.URL}}},
		{"deleted endpoint", xaalis.RedeliveryFilter{EndpointID: w2.ID}, 0, nil},
		{"type", xaalis.RedeliveryFilter{EventFilter: xaalis.EventFilter{Type: xaalis.EventPaymentSuccess}}, 1,
			[]target{{e1.ID, "", cb}, {e1.ID, w1.ID, w1.URL}}},
		{"from", xaalis.RedeliveryFilter{EventFilter: xaalis.EventFilter{From: ptr(t0.Add(time.Second))}}, 1,
			[]target{{e2.ID, w1.ID, w1.URL}}},
		{"to", xaalis.RedeliveryFilter{EventFilter: xaalis.EventFilter{To: ptr(t0.Add(time.Second))}}, 1,
			[]target{{e1.ID, "", cb}, {e1.ID, w1.ID, w1.URL}}},
	} {
		n, got := run(c.f, 10)
		if n != c.n || !slices.Equal(got, c.want) {
			t.Errorf("%s: %d %v, want %d %v", c.name, n, got, c.n, c.want)
		}
	}
	// Past the bound: the count, no targets.
	if n, got := run(xaalis.RedeliveryFilter{}, 1); n != 2 || got != nil {
		t.Fatalf("over the bound: %d %v", n, got)
	}
}

func ptr[T any](v T) *T { return &v }

func errIs(err, target error) bool {
	return err != nil && xaalis.ErrorCode(err) == xaalis.ErrorCode(target)
}
