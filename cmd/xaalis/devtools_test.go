package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84"
	stripewebhook "github.com/stripe/stripe-go/v84/webhook"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// hookReceiver is a developer's local webhook endpoint.
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
	ch  chan delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{ch: make(chan delivery, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d := delivery{header: r.Header.Clone(), body: b}
		h.mu.Lock()
		h.got = append(h.got, d)
		h.mu.Unlock()
		h.ch <- d
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-h.ch:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20 s")
		return delivery{}
	}
}

// listener runs `xaalis listen` until stop, which returns run's error.
type listener struct {
	stdout, stderr *testutil.SyncBuffer
	cancel         context.CancelFunc
	done           chan error
}

func startListen(t *testing.T, getenv func(string) string, args ...string) (*listener, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- run(ctx, append([]string{"listen"}, args...), getenv, l.stdout, l.stderr) }()
	t.Cleanup(cancel)
	deadline := time.After(15 * time.Second)
	for {
		if out := l.stdout.String(); strings.Contains(out, "\n") {
			first, _, _ := strings.Cut(out, "\n")
			secret := regexp.MustCompile(`whsec_[0-9A-Za-z]+`).FindString(first)
			if secret == "" {
				t.Fatalf("the first line has no whsec_ secret: %q", first)
			}
			return l, secret
		}
		select {
		case err := <-l.done:
			t.Fatalf("listen ended: %v\n%s", err, l.stderr)
		case <-deadline:
			t.Fatalf("listen printed nothing in 15 s\n%s", l.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop sends the equivalent of ^C (main cancels run's context on SIGINT).
func (l *listener) stop(t *testing.T) error {
	l.cancel()
	select {
	case err := <-l.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("listen did not stop 10 s after ^C")
		return nil
	}
}

// verify checks a forwarded delivery with pkg/webhook and with stripe-go,
// and returns the event.
func verify(t *testing.T, d delivery, secret string) *pkgwebhook.Event {
	t.Helper()
	sig := d.header.Get(pkgwebhook.Header)
	ev, err := pkgwebhook.ConstructEvent(d.body, sig, secret)
	if err != nil {
		t.Fatalf("pkg/webhook refused the forwarded event: %v (%s)", err, sig)
	}
	se, err := stripewebhook.ConstructEventWithOptions(d.body, sig, secret,
		stripewebhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		t.Fatalf("stripe-go refused the forwarded event: %v", err)
	}
	if se.ID != ev.ID || se.Type != stripe.EventType(ev.Type) || se.Livemode {
		t.Fatalf("stripe event %+v, ours %+v", se, ev)
	}
	if d.header.Get("Content-Type") != "application/json" || d.header.Get("User-Agent") != "Xaalis-Webhooks/1.0" {
		t.Fatalf("headers %v", d.header)
	}
	var top struct {
		Object     string `json:"object"`
		APIVersion string `json:"api_version"`
	}
	if json.Unmarshal(d.body, &top); top.Object != "event" || top.APIVersion != "2026-06-01" {
		t.Fatalf("not the 2026-06-01 format: %s", d.body)
	}
	return ev
}

var triggered = regexp.MustCompile(`event (\S+) (\S+) listed by GET /v1/events`)

// triggerCLI runs `xaalis trigger event` and returns the event's id.
func triggerCLI(t *testing.T, getenv func(string) string, event string) string {
	t.Helper()
	out := mustCLI(t, getenv, "trigger", event)
	m := triggered.FindStringSubmatch(out)
	if m == nil || m[1] != event {
		t.Fatalf("trigger %s printed:\n%s", event, out)
	}
	return m[2]
}

// TestListenAndTrigger: serve, listen forwarding to a local receiver,
// trigger; the receiver gets deliveries signed with the printed secret,
// which pkg/webhook and stripe-go both verify; the stream is cut mid-run
// and listen resumes with nothing missed or repeated; ^C exits 0.
func TestListenAndTrigger(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db)...)
		sk, _ := s.demoKeys(t)
		rc := newHookReceiver(t)
		proxy := testutil.NewCutProxy(t, s.apiAddr)
		l, secret := startListen(t, envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", "http://"+proxy.Addr()),
			"--forward-to", rc.srv.URL+"/webhooks", "--events", "payment.*")
		// The secret is the account's listen secret, stable.
		r := s.do(t, "GET", "/v1/webhooks/listen-secret", sk, "").want(t, 200, "")
		if !strings.Contains(string(r.body), secret) {
			t.Fatalf("listen printed %s; the API says %s", secret, r.body)
		}
		api := envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", s.api)

		id := triggerCLI(t, api, "payment.success")
		ev := verify(t, rc.next(t), secret)
		if ev.ID != id || ev.Type != "payment.success" {
			t.Fatalf("forwarded %s %s, triggered %s", ev.Type, ev.ID, id)
		}

		// The stream is cut; two events happen while listen cannot reach
		// the server.
		proxy.Cut()
		want := []string{triggerCLI(t, api, "payment.failed"), triggerCLI(t, api, "payment.cancelled")}
		proxy.Resume()
		var got []string
		for range want {
			got = append(got, verify(t, rc.next(t), secret).ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after the cut: %v, want %v", got, want)
		}
		select {
		case d := <-rc.ch:
			t.Fatalf("a delivery too many: %s", d.body)
		case <-time.After(500 * time.Millisecond):
		}
		if !strings.Contains(l.stderr.String(), "resuming after "+id) {
			t.Errorf("no reconnection line:\n%s", l.stderr)
		}
		if err := l.stop(t); err != nil {
			t.Fatalf("listen after ^C: %v", err)
		}
		// One line per event: time, type, id, the receiver's status.
		lines := strings.Split(strings.TrimSpace(l.stdout.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("listen printed:\n%s", l.stdout)
		}
		for i, e := range append([]string{id}, want...) {
			if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+Z\s+payment\.\S+\s+` + e + `\s+\[202\]$`).MatchString(lines[i+1]) {
				t.Fatalf("line %q", lines[i+1])
			}
		}
	})
}

// TestTriggerEvents: every event trigger knows is made through the API
// and listed; the objects it made are printed.
func TestTriggerEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db, "--jobs-interval", "1s")...)
		sk, _ := s.demoKeys(t)
		api := envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", s.api)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			// The shortest payment lifetime is a minute.
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var o, e testutil.SyncBuffer
			if err := run(ctx, []string{"trigger", "payment.expired"}, api, &o, &e); err != nil || !triggered.MatchString(o.String()) {
				t.Errorf("trigger payment.expired: %v\n%s\n%s", err, o.String(), e.String())
			}
		}()
		for _, ev := range triggerEvents {
			if ev == "payment.expired" {
				continue
			}
			out := mustCLI(t, api, "trigger", ev)
			if !triggered.MatchString(out) || !strings.Contains(out, " TXN-") {
				t.Fatalf("trigger %s printed:\n%s", ev, out)
			}
			switch ev {
			case "payout.success", "payout.failed":
				if !strings.Contains(out, "payout ") {
					t.Fatalf("trigger %s printed no payout:\n%s", ev, out)
				}
			case "subscription.created":
				if !strings.Contains(out, "subscription ") || !strings.Contains(out, "plan ") {
					t.Fatalf("trigger %s printed:\n%s", ev, out)
				}
			}
			var list struct {
				Data []struct{ ID, Type string }
			}
			json.Unmarshal(s.do(t, "GET", "/v1/events?type="+ev, sk, "").want(t, 200, "").body, &list)
			if len(list.Data) == 0 {
				t.Fatalf("%s not listed", ev)
			}
		}
		wg.Wait()
		// The ledger still balances after it all.
		mustCLI(t, envOf("XAALIS_DATABASE_URL", db), "ledger", "check")
	})
}

// TestTriggerAnyAccount: trigger works for a merchant of any country (its
// magic numbers are Senegal's, and it collects there) and with the
// providers the account may use; with a key that cannot read events it
// makes nothing.
func TestTriggerAnyAccount(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + t.TempDir() + "/x.db"
	s := serve(t, noEnv, serveArgs(db)...)
	ci := createMerchant(t, db, "--country", "CI")
	api := envOf("XAALIS_API_KEY", ci.Keys.SecretTest, "XAALIS_API_BASE", s.api)
	for _, ev := range []string{"payment.success", "payout.success", "refund.success"} {
		if out := mustCLI(t, api, "trigger", ev); !triggered.MatchString(out) {
			t.Fatalf("trigger %s for a CI merchant printed:\n%s", ev, out)
		}
	}
	only := createMerchant(t, db)
	updateMerchant(t, db, only.MerchantID, "--allowed-providers", "channel_c")
	api = envOf("XAALIS_API_KEY", only.Keys.SecretTest, "XAALIS_API_BASE", s.api)
	if out := mustCLI(t, api, "trigger", "payment.success"); !triggered.MatchString(out) {
		t.Fatalf("trigger for a merchant limited to channel_c printed:\n%s", out)
	}
	narrow := createKey(t, db, ci.MerchantID, "--mode", "test", "--scopes", "can_initiate_payment")
	before := s.do(t, "GET", "/v1/payments", ci.Keys.SecretTest, "").want(t, 200, "")
	_, _, err := cli(t, envOf("XAALIS_API_KEY", narrow.Key, "XAALIS_API_BASE", s.api), "trigger", "payment.success")
	if err == nil || !strings.Contains(err.Error(), "scope_insufficient") {
		t.Fatalf("trigger with a key that cannot read events: %v", err)
	}
	after := s.do(t, "GET", "/v1/payments", ci.Keys.SecretTest, "").want(t, 200, "")
	if total := func(b []byte) string { return regexp.MustCompile(`"total":\d+`).FindString(string(b)) }; total(before.body) != total(after.body) {
		t.Fatalf("a failing trigger made a payment: %s then %s", total(before.body), total(after.body))
	}
}

// TestTriggerFundsAboveMinimum: the payment that funds a payout pays at
// least the provider's minimum, which the refusal names: an account on
// channel_b alone (minimum 200 XOF; no fees here, so that its balance is
// exact) holding 1,950 of the 2,000 a payout needs is funded with a
// payment of 200 (155 asked first, refused).
func TestTriggerFundsAboveMinimum(t *testing.T) {
	t.Parallel()
	var cfg map[string]any
	if err := json.Unmarshal(xaalis.DefaultConfigJSON(), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg["fees"].([]any) {
		if g := f.(map[string]any); g["provider"] == "channel_b" {
			g["percent_bp"], g["min"] = 0, 0
		}
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "cfg.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + t.TempDir() + "/x.db"
	s := serve(t, noEnv, serveArgs(db, "--config", path)...)
	m := createMerchant(t, db)
	updateMerchant(t, db, m.MerchantID, "--allowed-providers", "channel_b")
	s.do(t, "POST", "/v1/payments", m.Keys.SecretTest, `{"merchant_ref":"fund-1950","amount":1950,"currency":"XOF","country":"SN","provider":"channel_b",
		"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).want(t, 201, "")
	out := mustCLI(t, envOf("XAALIS_API_KEY", m.Keys.SecretTest, "XAALIS_API_BASE", s.api), "trigger", "payout.success")
	if !triggered.MatchString(out) || !strings.Contains(out, "funding the test balance (1950") || !strings.Contains(out, "200.00") {
		t.Fatalf("trigger payout.success on channel_b with a minimum of 5000 printed:\n%s", out)
	}
}

// TestListenSecondProcess: listen connected to one server process gets
// the events another process commits to the same PostgreSQL database.
func TestListenSecondProcess(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	a := serve(t, noEnv, serveArgs(db)...)
	sk, _ := a.demoKeys(t)
	b := serve(t, noEnv, serveArgs(db)...)
	rc := newHookReceiver(t)
	l, secret := startListen(t, envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", a.api), "--forward-to", rc.srv.URL)
	id := triggerCLI(t, envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", b.api), "payment.success")
	if ev := verify(t, rc.next(t), secret); ev.ID != id {
		t.Fatalf("forwarded %s, triggered %s on the other process", ev.ID, id)
	}
	if err := l.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestListenReadyOnceStreaming: listen says Ready only once its stream is
// open. A first stream starts at the server's "now", so an event triggered
// right after a Ready printed before the connection was lost. The proxy
// in front of the API holds the stream's request back for a moment, the
// gap a loaded machine made (TestListenSecondProcess failed so in CI).
func TestListenReadyOnceStreaming(t *testing.T) {
	t.Parallel()
	s := serve(t, noEnv, serveArgs("sqlite://"+t.TempDir()+"/x.db")...)
	sk, _ := s.demoKeys(t)
	api, err := url.Parse(s.api)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		if r.In.URL.Path == "/v1/events/stream" {
			time.Sleep(time.Second)
		}
		r.SetURL(api)
	}})
	// Closed after listen stops (cleanups run last first): Close waits for
	// the stream's request.
	t.Cleanup(proxy.Close)
	rc := newHookReceiver(t)
	l, secret := startListen(t, envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", proxy.URL), "--forward-to", rc.srv.URL)
	id := triggerCLI(t, envOf("XAALIS_API_KEY", sk, "XAALIS_API_BASE", s.api), "payment.success")
	if ev := verify(t, rc.next(t), secret); ev.ID != id {
		t.Fatalf("forwarded %s, triggered %s", ev.ID, id)
	}
	if err := l.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestDevToolsUsage(t *testing.T) {
	t.Parallel()
	key := envOf("XAALIS_API_KEY", "sk_test_abc", "XAALIS_API_BASE", "http://127.0.0.1:1")
	for _, c := range []struct {
		name   string
		getenv func(string) string
		args   []string
		want   string
	}{
		{"TriggerUnknownEvent", key, []string{"trigger", "payment.nope"}, "payment.success, payment.failed"},
		{"TriggerNoEvent", key, []string{"trigger"}, "subscription.created"},
		{"TriggerLiveKey", envOf("XAALIS_API_KEY", "sk_live_abcdefghijkl"), []string{"trigger", "payment.success"}, "test mode only"},
		{"TriggerNoKey", noEnv, []string{"trigger", "payment.success"}, "XAALIS_API_KEY"},
		{"TriggerPublishableKey", noEnv, []string{"trigger", "payment.success", "--api-key", "pk_test_abc"}, "secret key"},
		{"ListenNoURL", key, []string{"listen"}, "--forward-to"},
		{"ListenBadURL", key, []string{"listen", "--forward-to", "localhost:3000"}, "http(s) URL"},
		{"ListenLiveKey", envOf("XAALIS_API_KEY", "sk_live_abcdefghijkl"), []string{"listen", "--forward-to", "http://localhost:3000"}, "--live"},
		{"ListenBadEvents", key, []string{"listen", "--forward-to", "http://localhost:3000", "--events", "payment.nope"}, "payment.nope"},
		{"ListenBadBase", noEnv, []string{"listen", "--forward-to", "http://localhost:3000", "--api-key", "sk_test_x", "--api-base", "localhost"}, "--api-base"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := cli(t, c.getenv, c.args...)
			wantErr(t, true, out, err)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
	// A server that does not answer: exit 1, not 2.
	out, _, err := cli(t, key, "listen", "--forward-to", "http://localhost:3000")
	var u usageError
	if err == nil || errors.As(err, &u) || out != "" {
		t.Fatalf("unreachable API: %v, %q", err, out)
	}
	_ = fmt.Sprint()
}

// TestServeStopsStreams: shutting the server down ends open event streams
// at once rather than waiting for them to go idle.
func TestServeStopsStreams(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + t.TempDir() + "/x.db"
	s := serve(t, noEnv, serveArgs(db)...)
	sk, _ := s.demoKeys(t)
	req, _ := http.NewRequest("GET", s.api+"/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+sk)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a stream open", d)
	}
	if _, err := io.ReadAll(res.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("stream ended: %v", err)
	}
}

func TestWholeUnits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"4950", 4950, false}, {"9948.5", 9948, false}, {"0", 0, false}, {"0.99", 0, false},
		{"-9190", -9190, false}, {"-9190.00", -9190, false}, {"-9190.5", -9191, false}, {"-0.01", -1, false},
		{"", 0, true}, {"-", 0, true}, {"1e3", 0, true}, {"12.x", 0, true},
	} {
		got, err := wholeUnits(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("wholeUnits(%q) = %d, %v; want %d (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}
