package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// sseMessage is one Server-Sent Events message, or a comment.
type sseMessage struct {
	id, event, data string
	comment         string
}

// isEvent reports whether m is an event: not a comment, nor a message of
// an id alone (where to resume from).
func (m sseMessage) isEvent() bool { return m.comment == "" && (m.event != "" || m.data != "") }

// sseStream reads a stream's messages into a channel; it closes it at the
// end of the stream. Only complete messages (ended by a blank line) are
// sent, as EventSource does.
type sseStream struct {
	res  *http.Response
	msgs chan sseMessage
}

func readSSE(body io.Reader) chan sseMessage {
	ch := make(chan sseMessage, 1000)
	go func() {
		defer close(ch)
		br := bufio.NewReader(body)
		var m sseMessage
		var data []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if m.id != "" || m.event != "" || len(data) > 0 {
					m.data = strings.Join(data, "\n")
					ch <- m
				}
				m, data = sseMessage{}, nil
			case strings.HasPrefix(line, ":"):
				ch <- sseMessage{comment: strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	return ch
}

// openStream connects to the stream; lastID is sent as Last-Event-ID.
func (e *env) openStream(t *testing.T, key, query, lastID string) *sseStream {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/events/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// no-store, as every /v1 answer (docs/security.md).
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("X-Request-Id") == "" ||
		res.Header.Get("Cache-Control") != "no-store" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("stream: %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	s := &sseStream{res: res, msgs: readSSE(res.Body)}
	t.Cleanup(func() { res.Body.Close() })
	return s
}

// next returns the next event message (comments skipped), failing after d.
func (s *sseStream) next(t *testing.T, d time.Duration) sseMessage {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatal("stream ended")
			}
			if m.isEvent() {
				return m
			}
		case <-timeout:
			t.Fatal("no event in time")
		}
	}
}

// quiet checks that no event comes for d.
func (s *sseStream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-s.msgs:
			if ok && m.isEvent() {
				t.Fatalf("unexpected event %s %s", m.event, m.id)
			}
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

// checkMessage checks a message against the 2026-06-01 format and returns
// the event.
func checkMessage(t *testing.T, m sseMessage, typ string) *pkgwebhook.Event {
	t.Helper()
	ev, err := pkgwebhook.Parse([]byte(m.data))
	if err != nil {
		t.Fatalf("data: %v: %s", err, m.data)
	}
	var top struct {
		Object     string `json:"object"`
		APIVersion string `json:"api_version"`
	}
	_ = json.Unmarshal([]byte(m.data), &top)
	if m.event != typ || ev.Type != typ || ev.ID != m.id || top.Object != "event" || top.APIVersion != "2026-06-01" {
		t.Fatalf("message %s %s: %+v %+v", m.event, m.id, ev, top)
	}
	return ev
}

func streamEnv(t *testing.T, b backend) *env {
	return newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) {
		c.StreamPoll, c.StreamKeepAlive = 20*time.Millisecond, 400*time.Millisecond
	})
}

func successBody(extra string) string {
	return `"provider":"channel_a","payer":{"phone":"` + provider.TestPhoneSuccess + `"}` + extra
}

func TestEventStream(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := streamEnv(t, b)
		_, keys := e.merchant()
		_, other := e.merchant()
		key := keys.SecretTest

		// Errors are JSON, before the stream starts.
		e.do(call{method: "GET", path: "/v1/events/stream?types=payment.nope", key: key}).want(t, 422, xaalis.EValidation)
		r := e.do(call{method: "GET", path: "/v1/events/stream?types=pay*ment", key: key}).want(t, 422, xaalis.EValidation)
		if len(r.err.Errors["types"]) != 1 {
			t.Fatalf("errors %v", r.err.Errors)
		}
		e.do(call{method: "GET", path: "/v1/events/stream?types=nothing.*", key: key}).want(t, 422, xaalis.EValidation)
		e.do(call{method: "GET", path: "/v1/events/stream", key: key, header: map[string]string{"Last-Event-ID": xaalis.NewUUIDv7()}}).
			want(t, 422, xaalis.EValidation)
		e.do(call{method: "GET", path: "/v1/events/stream", key: keys.PublishableTest}).want(t, 403, xaalis.EForbidden)
		e.do(call{method: "GET", path: "/v1/events/stream"}).want(t, 401, xaalis.ECredentialsMissing)

		s := e.openStream(t, key, "?types=payment.success,payout.*", "")
		if m := <-s.msgs; m.comment != "connected" {
			t.Fatalf("first line %+v", m)
		}
		e.pay(t, key, "st-failed", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneFailed+`"}`)
		e.pay(t, other.SecretTest, "st-other", successBody(""))
		_, p := e.pay(t, key, "st-1", successBody(""))
		m := s.next(t, 5*time.Second)
		ev := checkMessage(t, m, "payment.success")
		var rec struct{ ID, Status string }
		if json.Unmarshal(ev.Data, &rec); rec.ID != p.ID || rec.Status != "success" || ev.MerchantReference != "st-1" {
			t.Fatalf("record %+v", rec)
		}
		// The event is the one GET /v1/events lists.
		e.do(call{method: "GET", path: "/v1/events/" + m.id, key: key}).want(t, 200, "")
		// Idle: a keep-alive comment.
		deadline := time.After(3 * time.Second)
	wait:
		for {
			select {
			case m := <-s.msgs:
				if m.comment == "keep-alive" {
					break wait
				}
				if m.isEvent() {
					t.Fatalf("unexpected event %+v", m)
				}
			case <-deadline:
				t.Fatal("no keep-alive")
			}
		}

		// Disconnected, the client misses nothing: it resumes after the last
		// event it got.
		s.res.Body.Close()
		var want []string
		for i := range 3 {
			_, p := e.pay(t, key, fmt.Sprint("st-gap-", i), successBody(""))
			want = append(want, p.ID)
		}
		s2 := e.openStream(t, key, "?types=payment.success", m.id)
		var got []string
		for range want {
			ev := checkMessage(t, s2.next(t, 5*time.Second), "payment.success")
			var rec struct{ ID string }
			json.Unmarshal(ev.Data, &rec)
			got = append(got, rec.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("resumed with %v, want %v", got, want)
		}
		s2.quiet(t, 300*time.Millisecond)

		// Another mode: its own stream; an event of it cannot resume a test
		// stream.
		e.do(call{method: "GET", path: "/v1/events/stream", key: keys.SecretLive, header: map[string]string{"Last-Event-ID": m.id}}).
			want(t, 422, xaalis.EValidation)
		// Older than 24 hours: too old to resume after.
		e.clock.Advance(25 * time.Hour)
		r = e.do(call{method: "GET", path: "/v1/events/stream", key: key, header: map[string]string{"Last-Event-ID": m.id}}).
			want(t, 422, xaalis.EValidation)
		if !strings.Contains(strings.Join(r.err.Errors["Last-Event-ID"], " "), "24 hours") {
			t.Fatalf("errors %v", r.err.Errors)
		}
	})
}

// TestEventStreamResumePoints: a new stream says where it can be resumed
// from (the account's newest event, in a message of an id alone), and so
// does a stream after the events its filter passed over: a client that
// loses the stream before its next event resumes there and misses
// nothing.
func TestEventStreamResumePoints(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := streamEnv(t, b)
		_, keys := e.merchant()
		key := keys.SecretTest
		// A stream of an account with no event yet: nothing to resume after.
		s0 := e.openStream(t, key, "", "")
		if m := <-s0.msgs; m.comment != "connected" {
			t.Fatalf("first message %+v", m)
		}
		s0.quiet(t, 100*time.Millisecond)
		s0.res.Body.Close()

		_, p1 := e.pay(t, key, "rp-1", successBody(""))
		last := e.events(t, p1.ID)
		if len(last) != 1 {
			t.Fatalf("events %v", last)
		}
		var evs []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/events?per_page=1", key: key}).want(t, 200, "").data(t, &evs)
		// On PostgreSQL an event is before the head once every transaction
		// that began before it has ended (other tests' too): a stream opened
		// meanwhile names an older point, or none. Within moments, this one.
		opened := func(want string) *sseStream {
			t.Helper()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				s := e.openStream(t, key, "?types=payout.*", "")
				if m := <-s.msgs; m.comment != "connected" {
					t.Fatalf("first message %+v", m)
				}
				m := <-s.msgs
				if !m.isEvent() && m.id == want {
					return s
				}
				if m.isEvent() || time.Now().After(deadline) {
					t.Fatalf("resume point %+v, want the newest event %s", m, want)
				}
				s.res.Body.Close()
			}
		}
		s := opened(evs[0].ID)
		// An event the filter passes over moves the resume point.
		_, p2 := e.pay(t, key, "rp-2", successBody(""))
		e.do(call{method: "GET", path: "/v1/events?per_page=1", key: key}).want(t, 200, "").data(t, &evs)
		deadline := time.After(5 * time.Second)
		for got := false; !got; {
			select {
			case m, ok := <-s.msgs:
				if !ok {
					t.Fatal("stream ended")
				}
				if m.isEvent() {
					t.Fatalf("an event the filter refuses: %+v", m)
				}
				got = m.id == evs[0].ID
			case <-deadline:
				t.Fatalf("no resume point after %s's event", p2.ID)
			}
		}
		// Dropped there: what commits meanwhile comes on resuming.
		s.res.Body.Close()
		e.fund(t, key, 1, 50000)
		r := e.do(call{method: "POST", path: "/v1/payouts", key: key, idem: "rp-po", body: payoutBody("rp-po", 1000, "channel_a", "+221771112233")}).want(t, 201, "")
		var po txRecord
		r.data(t, &po)
		s2 := e.openStream(t, key, "?types=payout.*", evs[0].ID)
		ev := checkMessage(t, s2.next(t, 5*time.Second), "payout.success")
		var rec struct{ ID string }
		if json.Unmarshal(ev.Data, &rec); rec.ID != po.ID {
			t.Fatalf("resumed with %s, want the payout %s", rec.ID, po.ID)
		}
		s2.res.Body.Close()

		// A quiet account: its resume point, the newest event, is over a
		// day old; nothing after it is, so the stream resumes after it.
		e.do(call{method: "GET", path: "/v1/events?per_page=1", key: key}).want(t, 200, "").data(t, &evs)
		e.clock.Advance(25 * time.Hour)
		s3 := e.openStream(t, key, "", evs[0].ID)
		_, p3 := e.pay(t, key, "rp-3", successBody(""))
		ev = checkMessage(t, s3.next(t, 5*time.Second), "payment.success")
		if json.Unmarshal(ev.Data, &rec); rec.ID != p3.ID {
			t.Fatalf("resumed after a day with %s, want %s", rec.ID, p3.ID)
		}
		s3.res.Body.Close()
		// A day later still, a new stream's resume point is that newest
		// event, however old.
		e.do(call{method: "GET", path: "/v1/events?per_page=1", key: key}).want(t, 200, "").data(t, &evs)
		e.clock.Advance(25 * time.Hour)
		opened(evs[0].ID).res.Body.Close()
	})
}

// TestEventStreamKeyRevoked: a stream ends when its key is revoked or
// expires, and no event committed after that reaches it; its reconnection
// is refused.
func TestEventStreamKeyRevoked(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := streamEnv(t, b)
		ctx := context.Background()
		mid, keys := e.merchant()
		exp := e.clock.Now().Add(time.Hour)
		for _, c := range []struct {
			name string
			end  func(t *testing.T, k *xaalis.Key)
			in   xaalis.KeyCreate
		}{
			{"revoked", func(t *testing.T, k *xaalis.Key) {
				if _, err := e.app.RevokeKey(ctx, k.ID); err != nil {
					t.Fatal(err)
				}
			}, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret}},
			{"expired", func(t *testing.T, _ *xaalis.Key) { e.clock.Advance(2 * time.Hour) },
				xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret, ExpiresAt: &exp}},
		} {
			t.Run(c.name, func(t *testing.T) {
				k, secret, err := e.app.CreateKey(ctx, c.in)
				if err != nil {
					t.Fatal(err)
				}
				s := e.openStream(t, secret, "", "")
				e.pay(t, keys.SecretTest, "kr-before-"+c.name, successBody(""))
				if ev := checkMessage(t, s.next(t, 5*time.Second), "payment.success"); ev.MerchantReference != "kr-before-"+c.name {
					t.Fatalf("event of %s", ev.MerchantReference)
				}
				c.end(t, k)
				e.pay(t, keys.SecretTest, "kr-after-"+c.name, successBody(""))
				deadline := time.After(5 * time.Second)
				for ended := false; !ended; {
					select {
					case m, ok := <-s.msgs:
						if !ok {
							ended = true
						} else if m.comment == "" && strings.Contains(m.data, "kr-after-") {
							t.Fatalf("event after the key's end: %s %s", m.event, m.id)
						}
					case <-deadline:
						t.Fatal("the stream did not end")
					}
				}
				e.do(call{method: "GET", path: "/v1/events/stream", key: secret}).want(t, 401, xaalis.EInvalidAPIKey)
			})
		}
	})
}

// TestEventStreamAcrossProcesses: a stream served by one process carries
// the events another process commits to the same PostgreSQL database.
func TestEventStreamAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	cfg := func(c *xhttp.Config, _ *xaalis.App) { c.StreamPoll = 20 * time.Millisecond }
	a := newEnv(t, openPostgresURL(t, url), cfg)
	b := newEnv(t, openPostgresURL(t, url), cfg)
	_, keys := a.merchant()
	s := a.openStream(t, keys.SecretTest, "", "")
	_, p := b.pay(t, keys.SecretTest, "across-1", successBody(""))
	ev := checkMessage(t, s.next(t, 10*time.Second), "payment.success")
	if !strings.Contains(string(ev.Data), p.ID) {
		t.Fatalf("event of another payment: %s", ev.Data)
	}
}

// smallBuffers makes accepted connections' send buffers small, so that a
// client that stops reading fills them after a few messages.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestEventStreamSlowClient: a client that stops reading is disconnected
// once a message waits longer than the write timeout; the API meanwhile
// answers as usual, and the client resumes with nothing missed.
func TestEventStreamSlowClient(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		srv := httptest.NewUnstartedServer(xhttp.NewServer(e.app, slog.New(slog.NewTextHandler(io.Discard, nil)), func() xhttp.Config {
			c := xhttp.DefaultConfig()
			c.StreamPoll, c.StreamWriteTimeout, c.StreamBatch = 10*time.Millisecond, 300*time.Millisecond, 20
			return c
		}(), api.OpenAPI, nil))
		srv.Listener = smallBuffers{srv.Listener}
		srv.Start()
		t.Cleanup(srv.Close)

		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(2048)
		fmt.Fprintf(conn, "GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", keys.SecretTest)
		br := bufio.NewReader(conn)
		if line, _ := br.ReadString('\n'); !strings.Contains(line, "200") {
			t.Fatalf("status line %q", line)
		}
		// The client reads nothing more while 300 events of 2 KB commit.
		m := &xaalis.Merchant{ID: mid}
		big := strings.Repeat("x", 2000)
		var want []string
		for i := range 300 {
			ev := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.EventPaymentSuccess,
				ObjectType: "transaction", ObjectID: xaalis.NewUUIDv7(), Data: []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, big)),
				CreatedAt: e.clock.Now()}
			if err := e.app.Store.Update(context.Background(), func(tx xaalis.Tx) error { return tx.InsertEvent(context.Background(), ev) }); err != nil {
				t.Fatal(err)
			}
			want = append(want, ev.ID)
		}
		// The API is not slowed down.
		start := time.Now()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/balance", nil)
		req.Header.Set("Authorization", "Bearer "+keys.SecretTest)
		if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
			t.Fatalf("balance: %v", err)
		} else {
			res.Body.Close()
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the API took %v beside a stuck stream", d)
		}
		// The server gives up on the client: reading on, it meets the end
		// of the stream (chunked encoding cut short) before all events.
		time.Sleep(time.Second)
		var got []string
		msgs := readSSE(br)
		for m := range msgs {
			if m.id != "" {
				got = append(got, m.id)
			}
		}
		if len(got) == 0 || len(got) >= len(want) {
			t.Fatalf("the slow client got %d of %d events before the stream closed", len(got), len(want))
		}
		if !slices.Equal(got, want[:len(got)]) {
			t.Fatal("events out of order")
		}
		// It resumes after the last complete message, with nothing missed.
		e2 := *e
		e2.srv = srv
		s := e2.openStream(t, keys.SecretTest, "", got[len(got)-1])
		for _, id := range want[len(got):] {
			if m := s.next(t, 5*time.Second); m.id != id {
				t.Fatalf("resumed with %s, want %s", m.id, id)
			}
		}
	})
}

func TestListenSecret(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		var s1, s2, live struct {
			Object, Secret string
			Livemode       bool
		}
		e.do(call{method: "GET", path: "/v1/webhooks/listen-secret", key: keys.SecretTest}).want(t, 200, "").data(t, &s1)
		e.do(call{method: "GET", path: "/v1/webhooks/listen-secret", key: keys.SecretTest}).want(t, 200, "").data(t, &s2)
		e.do(call{method: "GET", path: "/v1/webhooks/listen-secret", key: keys.SecretLive}).want(t, 200, "").data(t, &live)
		if !strings.HasPrefix(s1.Secret, "whsec_") || s1 != s2 || s1.Object != "webhook_secret" || s1.Livemode {
			t.Fatalf("secrets %+v %+v", s1, s2)
		}
		if !live.Livemode || live.Secret == s1.Secret {
			t.Fatalf("live secret %+v", live)
		}
		var cb struct{ Secret string }
		e.do(call{method: "GET", path: "/v1/webhooks/callback-secret", key: keys.SecretTest}).want(t, 200, "").data(t, &cb)
		if cb.Secret == s1.Secret {
			t.Fatal("the listen secret is the callback secret")
		}
		e.do(call{method: "GET", path: "/v1/webhooks/listen-secret", key: keys.PublishableTest}).want(t, 403, xaalis.EForbidden)
		_, noRead, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest,
			Type: xaalis.KeySecret, Scopes: []xaalis.Scope{xaalis.ScopeInitiatePayment}})
		if err != nil {
			t.Fatal(err)
		}
		e.do(call{method: "GET", path: "/v1/webhooks/listen-secret", key: noRead}).want(t, 403, xaalis.EScopeInsufficient)
		e.do(call{method: "GET", path: "/v1/events/stream", key: noRead}).want(t, 403, xaalis.EScopeInsufficient)
	})
}

func TestRedeliverByFilter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.open(t)
		e, d := hookEnv(t, store)
		_, keys := e.merchant()
		key := keys.SecretTest
		rc := newReceiver(t)
		epID, _ := e.endpoint(t, key, rc.srv.URL+"/hook", `,"events":["payment.success","payment.failed"]`)
		var ids []string
		for i := range 3 {
			_, p := e.pay(t, key, fmt.Sprint("rd-", i), successBody(""))
			ids = append(ids, p.ID)
		}
		e.pay(t, key, "rd-failed", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneFailed+`"}`)
		if n := runOnce(t, d); n != 4 {
			t.Fatalf("%d first deliveries", n)
		}
		type answer struct {
			Object string
			Events int
		}
		redeliver := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/events/redeliver", key: key, idem: idem, body: body})
		}
		var a answer
		redeliver("rd-1", `{"type":"payment.success","delivery_status":"succeeded"}`).want(t, 202, "").data(t, &a)
		if a.Object != "redelivery" || a.Events != 3 {
			t.Fatalf("answer %+v", a)
		}
		// The same key replays the answer; nothing is sent twice.
		r := redeliver("rd-1", `{"type":"payment.success","delivery_status":"succeeded"}`).want(t, 202, "")
		if r.header.Get("Idempotent-Replay") != "true" {
			t.Fatal("no replay")
		}
		if n := runOnce(t, d); n != 3 {
			t.Fatalf("%d redeliveries sent", n)
		}
		got := rc.received()[4:]
		var sent []string
		for _, g := range got {
			ev, err := pkgwebhook.Parse(g.body)
			if err != nil || ev.Type != "payment.success" {
				t.Fatalf("redelivered %+v %v", ev, err)
			}
			var rec struct{ ID string }
			json.Unmarshal(ev.Data, &rec)
			sent = append(sent, rec.ID)
			// The same event id as the first delivery.
			var first string
			for _, g0 := range rc.received()[:4] {
				if e0, _ := pkgwebhook.Parse(g0.body); e0 != nil && strings.Contains(string(e0.Data), rec.ID) {
					first = e0.ID
				}
			}
			if first != ev.ID {
				t.Fatalf("event id %s, first delivered as %s", ev.ID, first)
			}
		}
		slices.Sort(sent)
		slices.Sort(ids)
		if !slices.Equal(sent, ids) {
			t.Fatalf("redelivered %v, want %v", sent, ids)
		}
		// Nothing failed; nothing of another endpoint or type.
		redeliver("rd-2", `{"delivery_status":"failed"}`).want(t, 202, "").data(t, &a)
		if a.Events != 0 {
			t.Fatalf("failed: %+v", a)
		}
		redeliver("rd-3", `{"endpoint_id":"`+epID+`","type":"payment.failed","from":"2020-01-01","to":"2100-01-01"}`).want(t, 202, "").data(t, &a)
		if a.Events != 1 {
			t.Fatalf("endpoint and type: %+v", a)
		}
		redeliver("rd-4", `{"from":"2100-01-01"}`).want(t, 202, "").data(t, &a)
		if a.Events != 0 {
			t.Fatalf("future: %+v", a)
		}
		// Errors.
		e.do(call{method: "POST", path: "/v1/events/redeliver", key: key, body: `{}`, invalid: true}).want(t, 400, xaalis.EIdempotencyKeyRequired)
		r = e.do(call{method: "POST", path: "/v1/events/redeliver", key: key, idem: "rd-5", body: `{"delivery_statuss":"failed"}`, invalid: true})
		r.want(t, 422, xaalis.EValidation)
		if len(r.err.Errors["delivery_statuss"]) != 1 {
			t.Fatalf("errors %v", r.err.Errors)
		}
		redeliver("rd-6", `{"type":"payment.nope"}`).want(t, 422, xaalis.EValidation)
		redeliver("rd-7", `{"delivery_status":"lost"}`).want(t, 422, xaalis.EValidation)
		redeliver("rd-8", `{"from":"yesterday"}`).want(t, 422, xaalis.EValidation)
		redeliver("rd-9", `{"from":"2026-01-02","to":"2026-01-01"}`).want(t, 422, xaalis.EValidation)
		redeliver("rd-10", `{"endpoint_id":"`+xaalis.NewUUIDv7()+`"}`).want(t, 404, xaalis.ENotFound)
		e.do(call{method: "POST", path: "/v1/events/redeliver", key: keys.SecretLive, idem: "rd-11", body: `{"endpoint_id":"` + epID + `"}`}).
			want(t, 403, xaalis.ELivemodeMismatch)
		e.do(call{method: "POST", path: "/v1/events/redeliver", key: key, idem: "rd-12", body: `[]`, invalid: true}).want(t, 400, xaalis.EInvalidRequest)
		// Past the bound: 422 with the count, nothing sent.
		e.app.MaxRedeliver = 2
		r = redeliver("rd-13", ``).want(t, 422, xaalis.EValidation)
		if r.err.Context["count"] != float64(4) || r.err.Context["max"] != float64(2) {
			t.Fatalf("context %v", r.err.Context)
		}
		if n := runOnce(t, d); n != 1 { // the one of rd-3
			t.Fatalf("%d deliveries after the refusal", n)
		}
	})
}

// TestEventStreamOutlivesServerTimeouts: behind an http.Server with read
// and write timeouts (`xaalis serve` has 30 s and 60 s), a stream stays
// open past both and still carries events.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	srv := httptest.NewUnstartedServer(xhttp.NewServer(e.app, slog.New(slog.NewTextHandler(io.Discard, nil)), func() xhttp.Config {
		c := xhttp.DefaultConfig()
		c.StreamPoll, c.StreamKeepAlive = 20*time.Millisecond, 200*time.Millisecond
		return c
	}(), api.OpenAPI, nil))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	e2 := *e
	e2.srv = srv
	s := e2.openStream(t, keys.SecretTest, "", "")
	time.Sleep(1500 * time.Millisecond) // three times both timeouts
	_, p := e.pay(t, keys.SecretTest, "late", successBody(""))
	ev := checkMessage(t, s.next(t, 5*time.Second), "payment.success")
	if !strings.Contains(string(ev.Data), p.ID) {
		t.Fatalf("event %s", ev.Data)
	}
}
