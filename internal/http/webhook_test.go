package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// receiver is a merchant's webhook endpoint: it answers with the statuses
// it is told, in turn (200 once they run out), and keeps what it got.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int
	hang     time.Duration
	got      []received
}

type received struct {
	status    int
	signature string
	body      []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	rc := &receiver{statuses: statuses}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		status, hang := http.StatusOK, rc.hang
		if len(rc.statuses) > 0 {
			status, rc.statuses = rc.statuses[0], rc.statuses[1:]
		}
		rc.got = append(rc.got, received{status: status, signature: r.Header.Get(pkgwebhook.Header), body: body})
		rc.mu.Unlock()
		if hang > 0 {
			select {
			case <-time.After(hang):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// hookEnv is a server whose webhook URL rules allow loopback (the
// development flag), with a dispatcher on its clock.
func hookEnv(t *testing.T, store xaalis.Store) (*env, *webhook.Dispatcher) {
	policy := &webhook.Policy{AllowInsecure: true}
	e := newEnv(t, store, func(_ *xhttp.Config, a *xaalis.App) { a.CheckWebhookURL = policy.Check })
	d := &webhook.Dispatcher{Store: store, Policy: policy, Sender: &webhook.Sender{Client: policy.Client(2 * time.Second)},
		Now: e.clock.Now, NewID: xaalis.NewUUIDv7, Logger: slogDiscard(), Timeout: 2 * time.Second,
		Jitter: func() float64 { return 0.5 }} // no jitter: 0.5 is the middle
	return e, d
}

func (e *env) endpoint(t *testing.T, key, url, extra string) (id, secret string) {
	t.Helper()
	body := `{"url":"` + url + `"` + extra + `}`
	var ep struct{ ID, Secret string }
	e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: key, idem: "ep-" + url + extra, body: body}).want(t, 201, "").data(t, &ep)
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("secret %q", ep.Secret)
	}
	return ep.ID, ep.Secret
}

func runOnce(t *testing.T, d *webhook.Dispatcher) int {
	t.Helper()
	n, err := d.RunOnce(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWebhookDelivery(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.open(t)
		e, d := hookEnv(t, store)
		_, keys := e.merchant()

		t.Run("OKSignedAndRetriedOnSchedule", func(t *testing.T) {
			rc := newReceiver(t, 500, 503)
			_, secret := e.endpoint(t, keys.SecretTest, rc.srv.URL+"/hook", "")
			_, p := e.pay(t, keys.SecretTest, "wh-1", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			if runOnce(t, d) != 1 || len(rc.received()) != 1 {
				t.Fatal("no first attempt")
			}
			// Not yet due: the first retry comes after a minute.
			e.clock.Advance(59 * time.Second)
			if runOnce(t, d) != 0 {
				t.Fatal("retried before the schedule")
			}
			e.clock.Advance(2 * time.Second)
			if runOnce(t, d) != 1 {
				t.Fatal("no retry after a minute")
			}
			e.clock.Advance(5*time.Minute + time.Second)
			if runOnce(t, d) != 1 {
				t.Fatal("no retry after five more minutes")
			}
			got := rc.received()
			if len(got) != 3 || got[2].status != 200 {
				t.Fatalf("received %d", len(got))
			}
			for _, g := range got {
				if err := pkgwebhook.Verify(g.body, g.signature, secret, e.clock.Now(), 10*time.Minute); err != nil {
					t.Fatalf("signature: %v (%s)", err, g.signature)
				}
			}
			ev, err := pkgwebhook.Parse(got[2].body)
			if err != nil || ev.Type != "payment.success" || ev.MerchantReference != "wh-1" {
				t.Fatalf("event: %+v %v", ev, err)
			}
			// Done: acknowledged once, never sent again.
			e.clock.Advance(24 * time.Hour)
			if runOnce(t, d) != 0 {
				t.Fatal("a delivered event went out again")
			}
			var detail struct {
				ID         string
				Deliveries []struct {
					Status       string
					AttemptCount int `json:"attempt_count"`
					Attempts     []struct {
						HTTPStatus   *int    `json:"http_status"`
						ErrorMessage *string `json:"error_message"`
						DurationMS   int64   `json:"duration_ms"`
					}
				}
			}
			e.do(call{method: "GET", path: "/v1/events/" + ev.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &detail)
			if len(detail.Deliveries) != 1 || detail.Deliveries[0].Status != "succeeded" || len(detail.Deliveries[0].Attempts) != 3 {
				t.Fatalf("delivery log: %+v", detail)
			}
			a := detail.Deliveries[0].Attempts
			if *a[0].HTTPStatus != 500 || *a[1].HTTPStatus != 503 || *a[2].HTTPStatus != 200 || a[0].ErrorMessage == nil {
				t.Fatalf("attempts: %+v", a)
			}
			_ = p
			if evs := e.events(t, p.ID); len(evs) != 1 {
				t.Fatalf("events %v", evs)
			}
		})
		t.Run("OKTimeout", func(t *testing.T) {
			_, k := e.merchant()
			rc := newReceiver(t)
			rc.hang = 5 * time.Second
			e.endpoint(t, k.SecretTest, rc.srv.URL+"/slow", "")
			d2 := webhook.Dispatcher{Store: d.Store, Policy: d.Policy, Sender: d.Sender, Now: d.Now, NewID: d.NewID,
				Logger: d.Logger, Timeout: 300 * time.Millisecond, Jitter: d.Jitter}
			e.pay(t, k.SecretTest, "wh-slow", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			if runOnce(t, &d2) != 1 {
				t.Fatal("no attempt")
			}
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/events?delivery_status=pending", key: k.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 1 {
				t.Fatalf("pending events: %d", len(list))
			}
			var detail struct {
				Deliveries []struct {
					Attempts []struct {
						HTTPStatus   *int    `json:"http_status"`
						ErrorMessage *string `json:"error_message"`
					}
				}
			}
			e.do(call{method: "GET", path: "/v1/events/" + list[0].ID, key: k.SecretTest}).data(t, &detail)
			at := detail.Deliveries[0].Attempts[0]
			if at.HTTPStatus != nil || at.ErrorMessage == nil || !strings.Contains(*at.ErrorMessage, "timeout") {
				t.Fatalf("a hanging receiver: %+v", at)
			}
		})
		t.Run("OKRestartBetweenAttempts", func(t *testing.T) {
			_, k := e.merchant()
			rc := newReceiver(t, 500)
			e.endpoint(t, k.SecretTest, rc.srv.URL+"/restart", "")
			e.pay(t, k.SecretTest, "wh-restart", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			runOnce(t, d)
			// A new process: a new dispatcher on the same database.
			d2 := &webhook.Dispatcher{Store: store, Policy: d.Policy, Sender: d.Sender, Now: e.clock.Now, NewID: xaalis.NewUUIDv7,
				Logger: slogDiscard(), Timeout: time.Second, Jitter: d.Jitter}
			e.clock.Advance(2 * time.Minute)
			runOnce(t, d2) // also retries what earlier subtests left pending
			if got := rc.received(); len(got) != 2 || got[1].status != 200 {
				t.Fatalf("received %d", len(got))
			}
		})
		t.Run("OKRotation", func(t *testing.T) {
			_, k := e.merchant()
			rc := newReceiver(t)
			id, old := e.endpoint(t, k.SecretTest, rc.srv.URL+"/rot", "")
			var rot struct {
				Secret            string
				PreviousExpiresAt *string `json:"previous_secret_expires_at"`
			}
			e.do(call{method: "POST", path: "/v1/webhook-endpoints/" + id + "/rotate-secret", key: k.SecretTest, idem: "rot-1",
				body: `{"grace_period":3600}`}).want(t, 200, "").data(t, &rot)
			if rot.Secret == old || !strings.HasPrefix(rot.Secret, "whsec_") || rot.PreviousExpiresAt == nil {
				t.Fatalf("rotation: %+v", rot)
			}
			e.pay(t, k.SecretTest, "wh-rot", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			runOnce(t, d)
			g := rc.received()[0]
			if strings.Count(g.signature, "v1=") != 2 {
				t.Fatalf("two secrets, one signature: %s", g.signature)
			}
			for _, s := range []string{old, rot.Secret} {
				if err := pkgwebhook.Verify(g.body, g.signature, s, e.clock.Now(), time.Minute); err != nil {
					t.Fatalf("verify with %s: %v", s[:10], err)
				}
			}
			// After the grace period only the new secret signs.
			e.clock.Advance(time.Hour + time.Second)
			e.pay(t, k.SecretTest, "wh-rot-2", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			runOnce(t, d)
			g = rc.received()[1]
			if strings.Count(g.signature, "v1=") != 1 || pkgwebhook.Verify(g.body, g.signature, old, e.clock.Now(), time.Minute) == nil {
				t.Fatalf("the old secret still signs: %s", g.signature)
			}
		})
		t.Run("OKLegacyFormatAndCallbackURL", func(t *testing.T) {
			_, k := e.merchant()
			rc := newReceiver(t)
			e.endpoint(t, k.SecretTest, rc.srv.URL+"/legacy", `,"payload_format":"legacy","events":["payment.success"]`)
			cb := newReceiver(t)
			_, p := e.pay(t, k.SecretTest, "wh-cb", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"},"callback_url":"`+cb.srv.URL+`/cb","metadata":{"order_id":"77"}`)
			runOnce(t, d)
			g := rc.received()
			if len(g) != 1 {
				t.Fatalf("legacy endpoint got %d", len(g))
			}
			var legacy struct {
				Event string
				Data  map[string]any
			}
			if err := json.Unmarshal(g[0].body, &legacy); err != nil || legacy.Event != "payment.success" ||
				legacy.Data["merchant_reference"] != "wh-cb" || legacy.Data["transaction_id"] != p.ID || legacy.Data["id"] == p.ID {
				t.Fatalf("legacy body: %s", g[0].body)
			}
			var secret struct{ Secret string }
			e.do(call{method: "GET", path: "/v1/webhooks/callback-secret", key: k.SecretTest}).want(t, 200, "").data(t, &secret)
			c := cb.received()
			if len(c) != 1 {
				t.Fatalf("callback_url got %d", len(c))
			}
			if err := pkgwebhook.Verify(c[0].body, c[0].signature, secret.Secret, e.clock.Now(), time.Minute); err != nil {
				t.Fatalf("callback signature: %v", err)
			}
			if ev, err := pkgwebhook.Parse(c[0].body); err != nil || ev.Type != "payment.success" {
				t.Fatalf("callback: %v %+v", err, ev)
			}
		})
		t.Run("OKTestEventAndRedeliver", func(t *testing.T) {
			_, k := e.merchant()
			e.do(call{method: "POST", path: "/v1/webhooks/test", key: k.SecretTest, idem: "t-0", body: `{}`}).want(t, 422, xaalis.EValidation)
			rc := newReceiver(t)
			id, _ := e.endpoint(t, k.SecretTest, rc.srv.URL+"/test", "")
			var ev struct{ ID, Type string }
			e.do(call{method: "POST", path: "/v1/webhooks/test", key: k.SecretTest, idem: "t-1", body: `{"endpoint_id":"` + id + `"}`}).
				want(t, 201, "").data(t, &ev)
			if ev.Type != "webhook.test" {
				t.Fatalf("test event %+v", ev)
			}
			runOnce(t, d)
			e.do(call{method: "POST", path: "/v1/events/" + ev.ID + "/redeliver", key: k.SecretTest, idem: "t-2"}).want(t, 200, "")
			runOnce(t, d)
			g := rc.received()
			if len(g) != 2 {
				t.Fatalf("received %d", len(g))
			}
			a, _ := pkgwebhook.Parse(g[0].body)
			b2, _ := pkgwebhook.Parse(g[1].body)
			if a.ID != b2.ID || a.ID != ev.ID {
				t.Fatal("a redelivery must carry the same event id (data.id) for deduplication")
			}
		})
		t.Run("OKEndpoints", func(t *testing.T) {
			_, k := e.merchant()
			rc := newReceiver(t)
			id, _ := e.endpoint(t, k.SecretTest, rc.srv.URL+"/crud", `,"events":["payout.success","payment.failed"],"description":"orders"`)
			var got struct {
				Secret *string
				Events []string
			}
			e.do(call{method: "GET", path: "/v1/webhook-endpoints/" + id, key: k.SecretTest}).want(t, 200, "").data(t, &got)
			if got.Secret != nil || len(got.Events) != 2 {
				t.Fatalf("the secret is shown again: %+v", got)
			}
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/webhook-endpoints", key: k.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 1 {
				t.Fatalf("list %d", len(list))
			}
			e.do(call{method: "GET", path: "/v1/webhook-endpoints/" + id, key: k.SecretLive}).want(t, 403, xaalis.ELivemodeMismatch)
			e.do(call{method: "POST", path: "/v1/webhook-endpoints/" + id + "/rotate-secret", key: k.SecretTest, idem: "rot-big",
				body: `{"grace_period":18446744074}`, invalid: true}).want(t, 422, xaalis.EValidation)
			var del struct{ Status string }
			e.do(call{method: "DELETE", path: "/v1/webhook-endpoints/" + id, key: k.SecretTest, idem: "del-1"}).want(t, 200, "").data(t, &del)
			if del.Status != "deleted" {
				t.Fatalf("deleted endpoint: %s", del.Status)
			}
			// An event with no delivery still shows its (empty) deliveries.
			_, p := e.pay(t, k.SecretTest, "no-hook", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			var evs []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/events?type=payment.success", key: k.SecretTest}).want(t, 200, "").data(t, &evs)
			if len(evs) != 1 {
				t.Fatalf("events %d", len(evs))
			}
			r := e.do(call{method: "GET", path: "/v1/events/" + evs[0].ID, key: k.SecretTest}).want(t, 200, "")
			if !strings.Contains(string(r.body), `"deliveries":[]`) {
				t.Fatalf("event detail: %s", r.body)
			}
			_ = p
			// A payout's callback_url obeys the webhook URL rules too.
			e.do(call{method: "POST", path: "/v1/payouts", key: k.SecretTest, idem: "po-cb",
				body: `{"merchant_ref":"po-cb","amount":100,"provider":"channel_a","recipient":{"phone":"+221771112233"},"callback_url":"https://169.254.169.254/x"}`}).
				want(t, 422, xaalis.EValidation)
			e.do(call{method: "GET", path: "/v1/webhook-endpoints/" + id, key: k.SecretTest}).want(t, 404, xaalis.ENotFound)
			e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: k.SecretTest, idem: "bad-ev",
				body: `{"url":"` + rc.srv.URL + `","events":["nope.event"]}`}).want(t, 422, xaalis.EValidation)
		})
	})
}

// TestWebhookInactiveMerchant: a merchant that is not active keeps read
// access and may stop deliveries (delete an endpoint), but creates nothing:
// no endpoint, secret, test event or redelivery (README: "gets 422
// merchant_inactive on calls that create or move anything").
func TestWebhookInactiveMerchant(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, d := hookEnv(t, b.open(t))
		id, k := e.merchant()
		rc := newReceiver(t)
		ep, _ := e.endpoint(t, k.SecretTest, rc.srv.URL+"/in", "")
		e.do(call{method: "POST", path: "/v1/webhooks/test", key: k.SecretTest, idem: "t-0", body: `{}`}).want(t, 201, "")
		runOnce(t, d)
		var evs []struct {
			ID       string
			ObjectID string `json:"object_id"`
			Data     struct{ ID string }
		}
		e.do(call{method: "GET", path: "/v1/events", key: k.SecretTest}).want(t, 200, "").data(t, &evs)
		if len(evs) != 1 {
			t.Fatalf("events %d", len(evs))
		}
		// A test event's object_id is its record's id, as every event's.
		if evs[0].ObjectID == "" || evs[0].ObjectID != evs[0].Data.ID {
			t.Fatalf("webhook.test: object_id %q, data.id %q", evs[0].ObjectID, evs[0].Data.ID)
		}
		st := xaalis.MerchantSuspended
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{Status: &st}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []call{
			{method: "POST", path: "/v1/webhook-endpoints", body: `{"url":"` + rc.srv.URL + `/more"}`},
			{method: "POST", path: "/v1/webhook-endpoints/" + ep + "/rotate-secret", body: `{}`},
			{method: "POST", path: "/v1/webhooks/test", body: `{}`},
			{method: "POST", path: "/v1/events/" + evs[0].ID + "/redeliver"},
			{method: "POST", path: "/v1/events/redeliver", body: `{"type":"webhook.test"}`},
		} {
			c.key, c.idem = k.SecretTest, "in-"+c.path
			if r := e.do(c).want(t, 422, xaalis.EMerchantInactive); r.err.Context["status"] != "suspended" {
				t.Errorf("%s: context %v", c.path, r.err.Context)
			}
		}
		e.do(call{method: "GET", path: "/v1/webhook-endpoints/" + ep, key: k.SecretTest}).want(t, 200, "")
		e.do(call{method: "DELETE", path: "/v1/webhook-endpoints/" + ep, key: k.SecretTest, idem: "in-del"}).want(t, 200, "")
	})
}

// TestWebhookURLRules registers every refused URL form through the API.
func TestWebhookURLRules(t *testing.T) {
	// As xaalis serve registers: a name that does not resolve yet is taken
	// (delivery checks every address when it connects); one that resolves
	// to a forbidden address is not.
	policy := &webhook.Policy{AllowUnresolved: true,
		Resolver: fixedResolver{"hooks.example.com.": "93.184.216.34", "rebind.example.com.": "10.1.2.3"}}
	e := newEnv(t, openSQLite(t), func(_ *xhttp.Config, a *xaalis.App) { a.CheckWebhookURL = policy.Check })
	_, keys := e.merchant()
	for name, url := range map[string]string{
		"ErrHTTP":             "http://hooks.example.com/x",
		"ErrLoopback":         "https://127.0.0.1/x",
		"ErrLoopbackDecimal":  "https://2130706433/x",
		"ErrLoopbackOctal":    "https://0177.0.0.1/x",
		"ErrLoopbackHex":      "https://0x7f.0.0.1/x",
		"ErrPrivate":          "https://10.0.0.8/x",
		"ErrPrivate172":       "https://172.16.5.4/x",
		"ErrPrivate192":       "https://192.168.1.1/x",
		"ErrLinkLocal":        "https://169.254.10.10/x",
		"ErrMetadata":         "https://169.254.169.254/latest/meta-data",
		"ErrCGNAT":            "https://100.64.0.1/x",
		"ErrIPv6Loopback":     "https://[::1]/x",
		"ErrIPv6UniqueLocal":  "https://[fd00::1]/x",
		"ErrIPv4MappedIPv6":   "https://[::ffff:127.0.0.1]/x",
		"ErrInternalTLDLocal": "https://printer.local/x",
		"ErrInternalTLD":      "https://svc.internal/x",
		"ErrLocalhost":        "https://localhost/x",
		"ErrLAN":              "https://nas.lan/x",
		"ErrDNSPrivate":       "https://rebind.example.com/x",
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: keys.SecretTest, idem: name,
				body: `{"url":"` + url + `"}`}).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["url"]) == 0 {
				t.Fatalf("no rule named: %s", r.body)
			}
		})
	}
	t.Run("OKPublicHTTPS", func(t *testing.T) {
		e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: keys.SecretTest, idem: "ok",
			body: `{"url":"https://hooks.example.com/xaalis"}`}).want(t, 201, "")
	})
	t.Run("OKUnresolvedAtRegistration", func(t *testing.T) {
		e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: keys.SecretTest, idem: "nx",
			body: `{"url":"https://not-yet.example.com/xaalis"}`}).want(t, 201, "")
	})
}

// fixedResolver answers DNS from a table: the seam through which tests
// choose what a name resolves to.
type fixedResolver map[string]string

func (f fixedResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ip, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
}

// TestWebhookEndpointLimitConcurrent: thirty creations at once make the
// account's sixteen endpoints and no more; the others answer 422. (On
// PostgreSQL each counted the endpoints before the others' inserts: 28.)
func TestWebhookEndpointLimitConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		status := make([]int, 30)
		var wg sync.WaitGroup
		for i := range status {
			wg.Go(func() {
				status[i] = e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: keys.SecretTest, idem: fmt.Sprint("lim-", i),
					body: fmt.Sprintf(`{"url":"https://shop.example/hook-%d"}`, i), invalid: true}).status
			})
		}
		wg.Wait()
		made := 0
		for i, st := range status {
			switch st {
			case 201:
				made++
			case 422:
			default:
				t.Fatalf("creation %d: %d", i, st)
			}
		}
		var list []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/webhook-endpoints", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
		if made != xaalis.MaxWebhookEndpoints || len(list) != xaalis.MaxWebhookEndpoints {
			t.Fatalf("%d created, %d listed; at most %d", made, len(list), xaalis.MaxWebhookEndpoints)
		}
	})
}
