package webhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
	pw "github.com/xaalis/xaalis/pkg/webhook"
)

// clock is an injected clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// received is one request a receiver got.
type received struct {
	body   []byte
	header string
	at     time.Time // the test clock's time
	status int
}

// receiver is a real HTTP endpoint whose answers a test scripts.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	clock  *clock
	mu     sync.Mutex
	got    []received
	answer func(n int) int // n: 1 for the first request; returns a status, 0 hangs
}

func newReceiver(t *testing.T, c *clock, answer func(n int) int) *receiver {
	r := &receiver{t: t, clock: c, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got) + 1
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(n)
		}
		r.got = append(r.got, received{body: body, header: req.Header.Get(pw.Header), at: c.Now(), status: status})
		r.mu.Unlock()
		if status == 0 {
			<-req.Context().Done() // hang until the sender gives up
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// fixture is a store with a merchant, and helpers to make events and
// deliveries.
type fixture struct {
	t     *testing.T
	path  string
	store *sqlite.Store
	clock *clock
}

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, path: filepath.Join(t.TempDir(), "xaalis.db"), clock: &clock{t: t0}}
	f.open()
	err := f.store.Update(context.Background(), func(tx xaalis.Tx) error {
		return tx.CreateMerchant(context.Background(), &xaalis.Merchant{ID: "m1", Name: "Boutique", Country: "SN",
			SettlementCurrency: xaalis.XOF, Status: xaalis.MerchantActive, KYC: xaalis.KYCApproved,
			CreatedAt: t0, UpdatedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	st, err := sqlite.Open(context.Background(), f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	f.store = st
	f.t.Cleanup(func() { st.Close() })
}

// restart closes the store and opens it again, as a new process would.
func (f *fixture) restart() {
	f.t.Helper()
	if err := f.store.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

func (f *fixture) dispatcher() *Dispatcher {
	return &Dispatcher{
		Store:   f.store,
		Policy:  &Policy{AllowInsecure: true}, // the receivers listen on loopback
		Now:     f.clock.Now,
		Timeout: 500 * time.Millisecond,
		Jitter:  func() float64 { return 0.5 }, // exactly on schedule
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (f *fixture) endpoint(url string, format xaalis.PayloadFormat, mutate ...func(*xaalis.WebhookEndpoint)) *xaalis.WebhookEndpoint {
	f.t.Helper()
	now := f.clock.Now()
	ep := &xaalis.WebhookEndpoint{ID: "we_" + uuid.NewString()[:8], MerchantID: "m1", Mode: xaalis.ModeLive, URL: url,
		Format: format, Secret: NewSecret(), CreatedAt: now, UpdatedAt: now}
	for _, m := range mutate {
		m(ep)
	}
	if err := f.store.Update(context.Background(), func(tx xaalis.Tx) error {
		return tx.InsertWebhookEndpoint(context.Background(), ep)
	}); err != nil {
		f.t.Fatal(err)
	}
	return ep
}

// event stores a payment.success event of a new payment and a delivery of
// it to url (an endpoint's when ep is set, else a callback_url).
func (f *fixture) event(ep *xaalis.WebhookEndpoint, url string, format xaalis.PayloadFormat) (*xaalis.Event, *xaalis.Delivery) {
	f.t.Helper()
	ev := testEvent(f.t, true, "ORDER-"+uuid.NewString()[:6])
	ev.ID, ev.ObjectID, ev.CreatedAt = uuid.NewString(), uuid.NewString(), f.clock.Now()
	var rec map[string]any
	json.Unmarshal(ev.Data, &rec)
	rec["id"] = ev.ObjectID
	ev.Data, _ = json.Marshal(rec)
	now := f.clock.Now()
	d := &xaalis.Delivery{ID: uuid.NewString(), EventID: ev.ID, MerchantID: "m1", Mode: xaalis.ModeLive, URL: url,
		Format: format, Status: xaalis.DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
	if ep != nil {
		d.EndpointID = ep.ID
	}
	if err := f.store.Update(context.Background(), func(tx xaalis.Tx) error {
		if err := tx.InsertEvent(context.Background(), ev); err != nil {
			return err
		}
		return tx.InsertDelivery(context.Background(), d)
	}); err != nil {
		f.t.Fatal(err)
	}
	return ev, d
}

func (f *fixture) delivery(eventID string) *xaalis.Delivery {
	f.t.Helper()
	list, err := f.store.Deliveries(context.Background(), eventID)
	if err != nil || len(list) != 1 {
		f.t.Fatalf("deliveries: %v %v", list, err)
	}
	return list[0]
}

func (f *fixture) attempts(deliveryID string) []*xaalis.Attempt {
	f.t.Helper()
	list, err := f.store.Attempts(context.Background(), deliveryID)
	if err != nil {
		f.t.Fatal(err)
	}
	return list
}

func runOnce(t *testing.T, d *Dispatcher, want int) {
	t.Helper()
	n, err := d.RunOnce(context.Background(), 10)
	if err != nil || n != want {
		t.Fatalf("RunOnce at %s = %d, %v; want %d", d.Now().Format(time.TimeOnly), n, err, want)
	}
}

// A receiver that fails the first attempts (500, a hang past the timeout,
// a dropped connection) and then answers 200 gets the event retried on
// schedule and acknowledged once; every attempt is logged.
func TestDispatcherRetriesOnSchedule(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, func(n int) int {
		switch n {
		case 1:
			return 500
		case 2:
			return 0 // hang
		case 3:
			return 503
		}
		return 200
	})
	ep := f.endpoint(rcv.srv.URL+"/hook", xaalis.Format20260601)
	ev, dl := f.event(ep, ep.URL, xaalis.Format20260601)
	d := f.dispatcher()

	runOnce(t, d, 1) // attempt 1 at t0: 500
	runOnce(t, d, 0) // not due again yet
	f.clock.Add(time.Minute - time.Second)
	runOnce(t, d, 0)
	f.clock.Add(time.Second)
	runOnce(t, d, 1) // attempt 2 at +1 min: timeout
	f.clock.Add(5*time.Minute - time.Second)
	runOnce(t, d, 0)
	f.clock.Add(time.Second)
	runOnce(t, d, 1) // attempt 3 at +6 min: 503
	f.clock.Add(30 * time.Minute)
	runOnce(t, d, 1) // attempt 4 at +36 min: 200
	f.clock.Add(72 * time.Hour)
	runOnce(t, d, 0) // done: never again

	got := rcv.requests()
	if len(got) != 4 {
		t.Fatalf("%d requests", len(got))
	}
	wantAt := []time.Duration{0, time.Minute, 6 * time.Minute, 36 * time.Minute}
	acked := 0
	for i, r := range got {
		if !r.at.Equal(t0.Add(wantAt[i])) {
			t.Errorf("request %d at %v, want t0+%v", i+1, r.at.Sub(t0), wantAt[i])
		}
		if err := pw.Verify(r.body, r.header, ep.Secret, r.at, pw.DefaultTolerance); err != nil {
			t.Errorf("request %d: %v", i+1, err)
		}
		pe, err := pw.Parse(r.body)
		if err != nil || pe.ID != ev.ID || pe.Type != "payment.success" || pe.Sequence != 1 {
			t.Errorf("request %d: %+v %v", i+1, pe, err)
		}
		if i > 0 && string(r.body) != string(got[0].body) {
			t.Errorf("request %d: body changed between attempts", i+1)
		}
		if r.status == 200 {
			acked++
		}
	}
	if acked != 1 {
		t.Fatalf("acknowledged %d times", acked)
	}

	final := f.delivery(ev.ID)
	if final.Status != xaalis.DeliverySucceeded || final.Attempts != 4 || final.LastAttemptAt == nil ||
		!final.LastAttemptAt.Equal(t0.Add(36*time.Minute)) {
		t.Fatalf("delivery %+v", final)
	}
	as := f.attempts(dl.ID)
	if len(as) != 4 {
		t.Fatalf("%d attempts logged", len(as))
	}
	for i, want := range []struct {
		status int
		msg    string
	}{{500, "http 500"}, {0, "timeout"}, {503, "http 503"}, {200, ""}} {
		a := as[i]
		if a.HTTPStatus != want.status || a.ErrorMessage != want.msg || !a.AttemptedAt.Equal(t0.Add(wantAt[i])) {
			t.Errorf("attempt %d: %+v, want %d %q", i+1, a, want.status, want.msg)
		}
	}
	if as[1].DurationMS < 400 || as[1].DurationMS > 3000 {
		t.Errorf("timeout attempt took %d ms", as[1].DurationMS)
	}
}

// After the last retry fails, the delivery is failed and no longer sent.
func TestDispatcherExhaustsSchedule(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, func(int) int { return 500 })
	ep := f.endpoint(rcv.srv.URL, xaalis.FormatLegacy)
	ev, dl := f.event(ep, ep.URL, xaalis.FormatLegacy)
	d := f.dispatcher()
	runOnce(t, d, 1)
	for i, wait := range Schedule {
		f.clock.Add(wait)
		runOnce(t, d, 1)
		got := f.delivery(ev.ID)
		if i < len(Schedule)-1 && (got.Status != xaalis.DeliveryPending || got.Attempts != i+2) {
			t.Fatalf("after retry %d: %+v", i+1, got)
		}
	}
	got := f.delivery(ev.ID)
	if got.Status != xaalis.DeliveryFailed || got.Attempts != len(Schedule)+1 {
		t.Fatalf("delivery %+v", got)
	}
	if n := len(f.attempts(dl.ID)); n != 9 {
		t.Fatalf("%d attempts", n)
	}
	f.clock.Add(30 * 24 * time.Hour)
	runOnce(t, d, 0)
	if n := len(rcv.requests()); n != 9 {
		t.Fatalf("%d requests", n)
	}
}

// Deliveries survive a restart between attempts, and a claim whose
// dispatcher died is taken again when its lease ends.
func TestDispatcherRestartLosesNothing(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, func(n int) int {
		if n == 1 {
			return 502
		}
		return 200
	})
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	ev1, _ := f.event(ep, ep.URL, xaalis.Format20260601)
	runOnce(t, f.dispatcher(), 1) // fails

	f.restart()
	ev2, _ := f.event(ep, ep.URL, xaalis.Format20260601)
	// A dispatcher claims ev2's delivery and dies before sending.
	claimed, err := f.store.ClaimDeliveries(context.Background(), f.clock.Now(), DefaultLease, 10)
	if err != nil || len(claimed) != 1 || claimed[0].EventID != ev2.ID {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	f.restart()

	d := f.dispatcher()
	runOnce(t, d, 0) // ev1 not due, ev2 held
	f.clock.Add(time.Minute)
	runOnce(t, d, 2) // ev1's retry, and ev2 once its lease is over
	for _, ev := range []*xaalis.Event{ev1, ev2} {
		if got := f.delivery(ev.ID); got.Status != xaalis.DeliverySucceeded {
			t.Fatalf("event %s: %+v", ev.ID, got)
		}
	}
	if n := len(rcv.requests()); n != 3 {
		t.Fatalf("%d requests", n)
	}
}

// During a rotation's grace period both secrets sign (two v1 entries);
// after it, only the new one.
func TestDispatcherRotationSignsWithBoth(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	old := NewSecret()
	until := t0.Add(24 * time.Hour)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601, func(w *xaalis.WebhookEndpoint) {
		w.PreviousSecret, w.PreviousExpiresAt = old, &until
	})
	d := f.dispatcher()
	f.event(ep, ep.URL, xaalis.Format20260601)
	runOnce(t, d, 1)
	f.clock.Set(until.Add(time.Second))
	f.event(ep, ep.URL, xaalis.Format20260601)
	runOnce(t, d, 1)

	got := rcv.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	if strings.Count(got[0].header, "v1=") != 2 || strings.Count(got[1].header, "v1=") != 1 {
		t.Fatalf("headers %q, %q", got[0].header, got[1].header)
	}
	for _, secret := range []string{ep.Secret, old} {
		if err := pw.Verify(got[0].body, got[0].header, secret, got[0].at, 0); err != nil {
			t.Fatalf("during grace: %v", err)
		}
	}
	if err := pw.Verify(got[1].body, got[1].header, ep.Secret, got[1].at, 0); err != nil {
		t.Fatal(err)
	}
	if err := pw.Verify(got[1].body, got[1].header, old, got[1].at, 0); err == nil {
		t.Fatal("old secret still signs after the grace period")
	}
}

// A callback_url delivery is signed with the merchant's callback secret,
// made once, in the delivery's format.
func TestDispatcherCallbackURL(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	d := f.dispatcher()
	ev1, _ := f.event(nil, rcv.srv.URL+"/callback", xaalis.FormatLegacy)
	ev2, _ := f.event(nil, rcv.srv.URL+"/callback", xaalis.FormatLegacy)
	runOnce(t, d, 2)
	secret, err := f.store.CallbackSecret(context.Background(), "m1", xaalis.ModeLive, "unused")
	if err != nil || !strings.HasPrefix(secret, "whsec_") || secret == "unused" {
		t.Fatalf("callback secret %q %v", secret, err)
	}
	ids := map[string]bool{}
	for _, r := range rcv.requests() {
		if err := pw.Verify(r.body, r.header, secret, r.at, 0); err != nil {
			t.Fatal(err)
		}
		ev, err := pw.Parse(r.body)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(r.body), `{"event":"payment.success","data":{"id":"`+ev.ID) {
			t.Fatalf("not legacy: %s", r.body)
		}
		ids[ev.ID] = true
	}
	if !ids[ev1.ID] || !ids[ev2.ID] {
		t.Fatalf("events %v", ids)
	}
}

// A failed delivery's log line shows the receiver's URL without its
// query, where merchants put the token that authenticates deliveries.
func TestDispatcherLogsNoQuery(t *testing.T) {
	f := newFixture(t)
	var logged testutil.SyncBuffer
	d := f.dispatcher()
	d.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/cb?token=s3cr3t&phone=%2B221770000001"
	ln.Close() // nothing answers there
	_, dl := f.event(nil, url, xaalis.FormatLegacy)
	runOnce(t, d, 1)
	out := logged.String()
	if !strings.Contains(out, "webhook delivery failed") || strings.Contains(out, "s3cr3t") || strings.Contains(out, "221770000001") ||
		!strings.Contains(out, "/cb?[REDACTED]") {
		t.Fatalf("log:\n%s", out)
	}
	if a := f.attempts(dl.ID); len(a) != 1 || a[0].ErrorMessage == "" {
		t.Fatalf("attempts: %+v", a)
	}
}

// A delivery to a deleted endpoint fails at once, without a request.
func TestDispatcherEndpointDeleted(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	ev, dl := f.event(ep, ep.URL, xaalis.Format20260601)
	now := f.clock.Now()
	ep.DeletedAt, ep.UpdatedAt = &now, now
	if err := f.store.Update(context.Background(), func(tx xaalis.Tx) error {
		return tx.UpdateWebhookEndpoint(context.Background(), ep)
	}); err != nil {
		t.Fatal(err)
	}
	runOnce(t, f.dispatcher(), 1)
	if got := f.delivery(ev.ID); got.Status != xaalis.DeliveryFailed || got.Attempts != 1 {
		t.Fatalf("delivery %+v", got)
	}
	if as := f.attempts(dl.ID); len(as) != 1 || as[0].ErrorMessage != "endpoint deleted" || as[0].HTTPStatus != 0 {
		t.Fatalf("attempts %+v", as)
	}
	if len(rcv.requests()) != 0 {
		t.Fatal("a deleted endpoint was called")
	}
}

// The URL is checked again at delivery: a name that now resolves to a
// private address is a failed attempt naming the rule, retried on
// schedule; when DNS is sane again, the retry goes through.
func TestDispatcherRechecksURL(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	names := newDNS()
	names.set("hooks.shop.example", "127.0.0.1")
	url := "http://hooks.shop.example:" + srvPort(t, rcv.srv.URL) + "/hook"
	p := &Policy{AllowInsecure: true, Resolver: names}
	if err := p.Check(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoint(url, xaalis.Format20260601)
	ev, dl := f.event(ep, url, xaalis.Format20260601)
	d := f.dispatcher()
	d.Policy = p

	names.set("hooks.shop.example", "10.1.2.3")
	runOnce(t, d, 1)
	got := f.delivery(ev.ID)
	as := f.attempts(dl.ID)
	if got.Status != xaalis.DeliveryPending || !got.NextAttemptAt.Equal(t0.Add(time.Minute)) || len(as) != 1 ||
		as[0].ErrorMessage != "refused: url resolves to a private address" {
		t.Fatalf("delivery %+v, attempts %+v", got, as)
	}
	names.set("hooks.shop.example", "127.0.0.1")
	f.clock.Add(time.Minute)
	runOnce(t, d, 1)
	if got := f.delivery(ev.ID); got.Status != xaalis.DeliverySucceeded || len(rcv.requests()) != 1 {
		t.Fatalf("delivery %+v", got)
	}
}

// A URL refused by the policy at delivery is never contacted, whatever
// the form; the default (strict) policy refuses loopback.
func TestDispatcherStrictPolicy(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	ev, dl := f.event(ep, ep.URL, xaalis.Format20260601)
	d := f.dispatcher()
	d.Policy = nil
	runOnce(t, d, 1)
	as := f.attempts(dl.ID)
	if len(as) != 1 || !strings.HasPrefix(as[0].ErrorMessage, "refused: url must use https; url host is a loopback address") {
		t.Fatalf("attempts %+v", as)
	}
	if f.delivery(ev.ID).Status != xaalis.DeliveryPending || len(rcv.requests()) != 0 {
		t.Fatal("refused URL contacted")
	}
}

// Several dispatchers on one store deliver each event once.
func TestDispatcherConcurrentDispatchers(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	const events = 40
	for range events {
		f.event(ep, ep.URL, xaalis.Format20260601)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := f.dispatcher()
			for {
				n, err := d.RunOnce(context.Background(), 5)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rcv.requests()
	seen := map[string]int{}
	for _, r := range got {
		ev, err := pw.Parse(r.body)
		if err != nil {
			t.Fatal(err)
		}
		seen[ev.ID]++
	}
	if total != events || len(got) != events || len(seen) != events {
		t.Fatalf("attempted %d, received %d, distinct %d", total, len(got), len(seen))
	}
}

// Run delivers until its context ends.
func TestDispatcherRun(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	d := f.dispatcher()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx, 20*time.Millisecond); close(done) }()
	for i := range 3 {
		f.event(ep, ep.URL, xaalis.Format20260601)
		deadline := time.Now().Add(5 * time.Second)
		for len(rcv.requests()) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("event %d not delivered", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// A shutdown in the middle of an attempt records nothing: the delivery is
// sent again after its lease (at least once), and the failure does not
// count against the schedule.
func TestDispatcherShutdownMidAttempt(t *testing.T) {
	f := newFixture(t)
	started := make(chan struct{}, 1)
	rcv := newReceiver(t, f.clock, func(n int) int {
		if n == 1 {
			started <- struct{}{}
			return 0
		}
		return 200
	})
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	ev, dl := f.event(ep, ep.URL, xaalis.Format20260601)
	d := f.dispatcher()
	d.Timeout = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if n, err := d.RunOnce(ctx, 10); n != 0 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if got := f.delivery(ev.ID); got.Attempts != 0 || len(f.attempts(dl.ID)) != 0 {
		t.Fatalf("delivery %+v", got)
	}
	f.clock.Add(d.lease())
	runOnce(t, f.dispatcher(), 1)
	if got := f.delivery(ev.ID); got.Status != xaalis.DeliverySucceeded {
		t.Fatalf("delivery %+v", got)
	}
}

func TestDispatcherDefaults(t *testing.T) {
	d := &Dispatcher{}
	if d.timeout() != 15*time.Second || d.lease() != time.Minute {
		t.Fatalf("timeout %v lease %v", d.timeout(), d.lease())
	}
	d.Lease = time.Second
	if d.lease() != 25*time.Second {
		t.Fatalf("lease %v", d.lease())
	}
	d.init()
	if d.sender == nil || d.policy == nil || d.policy.AllowInsecure {
		t.Fatal("defaults")
	}
	if c := d.sender.Client; c.Timeout != 15*time.Second {
		t.Fatalf("client timeout %v", c.Timeout)
	}
}

// TestDispatcherRetryScale: a scaled schedule (tests, demos) waits the same
// steps shrunk: 60 ms then 300 ms at 0.001.
func TestDispatcherRetryScale(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, func(n int) int {
		if n <= 2 {
			return 500
		}
		return 200
	})
	ep := f.endpoint(rcv.srv.URL+"/hook", xaalis.Format20260601)
	f.event(ep, ep.URL, xaalis.Format20260601)
	d := f.dispatcher()
	d.RetryScale = 0.001
	runOnce(t, d, 1) // attempt 1: 500
	f.clock.Add(59 * time.Millisecond)
	runOnce(t, d, 0)
	f.clock.Add(time.Millisecond)
	runOnce(t, d, 1) // attempt 2 at +60 ms: 500
	f.clock.Add(299 * time.Millisecond)
	runOnce(t, d, 0)
	f.clock.Add(time.Millisecond)
	runOnce(t, d, 1) // attempt 3 at +360 ms: 200
	if got := rcv.requests(); len(got) != 3 || !got[2].at.Equal(t0.Add(360*time.Millisecond)) {
		t.Fatalf("requests %+v", got)
	}
}

// TestDispatcherRunWakesForRetries: Run sends a retry it scheduled itself
// when it comes due, not at its next poll (here an hour away, and no
// wake-up comes).
func TestDispatcherRunWakesForRetries(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, func(n int) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	ep := f.endpoint(rcv.srv.URL+"/hook", xaalis.Format20260601)
	f.event(ep, ep.URL, xaalis.Format20260601)
	d := f.dispatcher()
	d.Now = time.Now // the timer waits in real time
	d.RetryScale = 0.001
	runUntilEnd(t, d, time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for len(rcv.requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts: the retry due 60 ms after the first waited for the poll", len(rcv.requests()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// undurable is a store whose Durable fails while fail is set, and which
// records the ReadMark each call carries.
type undurable struct {
	*sqlite.Store
	mu    sync.Mutex
	fail  bool
	marks []uint64
}

func (s *undurable) Durable(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := xaalis.ReadMarkOf(ctx); m != nil {
		s.marks = append(s.marks, m.Seq())
	} else {
		s.marks = append(s.marks, 0)
	}
	if s.fail {
		return xaalis.Errorf(xaalis.EServiceUnavailable, "injected: not durable")
	}
	return s.Store.Durable(ctx)
}

// A delivery leaves only once what its attempt read (the event, the
// endpoint) is durable: while the store cannot say so, nothing is sent and
// no attempt is recorded (the lease runs out and it goes again); once it
// can, it is delivered. The wait covers the attempt's own reads (its
// ReadMark saw them).
func TestDispatcherWaitsForDurable(t *testing.T) {
	f := newFixture(t)
	rcv := newReceiver(t, f.clock, nil)
	ep := f.endpoint(rcv.srv.URL, xaalis.Format20260601)
	ev, dl := f.event(ep, ep.URL, xaalis.Format20260601)
	store := &undurable{Store: f.store, fail: true}
	d := f.dispatcher()
	d.Store = store
	if _, err := d.RunOnce(context.Background(), 10); err == nil {
		t.Fatal("RunOnce reported no error while the store could not make its reads durable")
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("%d requests sent while the store could not make the attempt's reads durable", n)
	}
	if as := f.attempts(dl.ID); len(as) != 0 {
		t.Fatalf("attempts recorded: %+v", as)
	}
	store.mu.Lock()
	marks := append([]uint64(nil), store.marks...)
	store.fail = false
	store.mu.Unlock()
	if len(marks) != 1 || marks[0] == 0 {
		t.Fatalf("Durable calls' read marks = %v, want one, after the attempt's reads", marks)
	}

	f.clock.Add(time.Hour) // past the lease
	runOnce(t, d, 1)
	if got := f.delivery(ev.ID); got.Status != xaalis.DeliverySucceeded || len(rcv.requests()) != 1 {
		t.Fatalf("delivery %+v after the store became durable, %d requests", got, len(rcv.requests()))
	}
}

// TestDispatcherRunNoHeadOfLine: a receiver that hangs holds its own
// delivery, not the others': an event for another endpoint, committed
// while the hanging attempt waits for its timeout, is delivered at once.
// (Run waited for every delivery of a round before claiming again: one
// receiver that hung for its 15 s delayed every merchant's webhooks.)
// runUntilEnd runs d.Run(every) until the test ends.
func runUntilEnd(t *testing.T, d *Dispatcher, every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx, every); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestDispatcherRunNoHeadOfLine(t *testing.T) {
	f := newFixture(t)
	slow := newReceiver(t, f.clock, func(int) int { return 0 }) // hangs
	fast := newReceiver(t, f.clock, nil)
	hang := f.endpoint(slow.srv.URL+"/hook", xaalis.Format20260601)
	f.event(hang, hang.URL, xaalis.Format20260601)
	d := f.dispatcher()
	d.Now = time.Now
	d.Timeout = 10 * time.Second
	runUntilEnd(t, d, 20*time.Millisecond)
	wait := func(r *receiver, what string) time.Time {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(r.requests()) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no request in 5 s", what)
			}
		}
		return time.Now()
	}
	wait(slow, "the hanging receiver")
	ok := f.endpoint(fast.srv.URL+"/hook", xaalis.Format20260601)
	f.event(ok, ok.URL, xaalis.Format20260601)
	wait(fast, "the other endpoint, while the first hangs")
}

// TestDispatcherRunDrainsPastStuckSlots: with most slots held by
// receivers that hang, the free ones keep draining the backlog, not one
// claim a poll. (Claiming only once a quarter of the slots was free, 26
// hanging deliveries left 100 others at six a second.)
func TestDispatcherRunDrainsPastStuckSlots(t *testing.T) {
	f := newFixture(t)
	slow := newReceiver(t, f.clock, func(int) int { return 0 }) // hangs
	fast := newReceiver(t, f.clock, nil)
	hang := f.endpoint(slow.srv.URL+"/hook", xaalis.Format20260601)
	for range Concurrency - 6 {
		f.event(hang, hang.URL, xaalis.Format20260601)
	}
	f.clock.Set(f.clock.Now().Add(time.Second)) // the hanging ones are claimed first
	ok := f.endpoint(fast.srv.URL+"/hook", xaalis.Format20260601)
	for range 100 {
		f.event(ok, ok.URL, xaalis.Format20260601)
	}
	d := f.dispatcher()
	d.Now = time.Now
	d.Timeout = 20 * time.Second
	runUntilEnd(t, d, time.Second)
	for deadline := time.Now().Add(8 * time.Second); len(fast.requests()) < 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 delivered in 8 s beside %d hanging receivers", len(fast.requests()), Concurrency-6)
		}
	}
}
