package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// behindProxy configures a server that trusts the test's own address
// (127.0.0.1), as it would trust a reverse proxy on the same host.
func behindProxy(cfg *xhttp.Config, _ *xaalis.App) {
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
}

// accessLines returns the access log lines of a path.
func accessLines(t *testing.T, logs string, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "request" && m["path"] == path {
			out = append(out, m)
		}
	}
	return out
}

// TestTrustedProxies: behind a trusted proxy the client address comes
// from X-Forwarded-For, for the IP allowlists, the per-address limits, the
// access log and the audit log; from anyone else the header is ignored.
func TestTrustedProxies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.open(t)
		e := newEnv(t, store, behindProxy, func(cfg *xhttp.Config, _ *xaalis.App) {
			cfg.PageRateLimit, cfg.PageRateBurst = 0.001, 1
		})
		ctx := context.Background()
		mid, keys := e.merchant()
		allow := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
		_, secret, err := e.app.CreateKey(ctx, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret, AllowIPs: allow})
		if err != nil {
			t.Fatal(err)
		}
		from := func(xff string) map[string]string { return map[string]string{"X-Forwarded-For": xff} }

		e.do(call{method: "GET", path: "/v1/plans", key: secret, header: from("203.0.113.7")}).want(t, 200, "")
		// What the client wrote to the left of the proxy's entry is ignored.
		e.do(call{method: "GET", path: "/v1/plans", key: secret, header: from("203.0.113.7, 198.51.100.1")}).want(t, 401, xaalis.EIPNotAllowed)
		e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 401, xaalis.EIPNotAllowed)
		e.do(call{method: "GET", path: "/v1/plans", key: secret,
			header: map[string]string{"Forwarded": `for="203.0.113.9:4711";proto=https`}}).want(t, 200, "")

		// The merchant's allowlist reads the same address.
		if _, err := e.app.UpdateMerchant(ctx, mid, xaalis.MerchantUpdate{AllowIPs: &allow}); err != nil {
			t.Fatal(err)
		}
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest, header: from("203.0.113.8")}).want(t, 200, "")
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest}).want(t, 401, xaalis.EIPNotAllowed)

		lines := accessLines(t, e.logs.String(), "/v1/plans")
		if len(lines) < 3 || lines[0]["remote_ip"] != "203.0.113.7" || lines[0]["proxy_ip"] != "127.0.0.1" ||
			lines[2]["remote_ip"] != "127.0.0.1" || lines[2]["proxy_ip"] != nil {
			t.Fatalf("access log: %v", lines)
		}

		// Per-address limits (here the hosted page's) count each client apart.
		page := func(xff string) int {
			req := mustRequest(t, "GET", e.srv.URL+"/v1/checkout.js", "")
			req.Header.Set("X-Forwarded-For", xff)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if a1, a2, b1 := page("198.51.100.1"), page("198.51.100.1"), page("198.51.100.2"); a1 != 200 || a2 != 429 || b1 != 200 {
			t.Fatalf("per-address limit: %d %d %d", a1, a2, b1)
		}

		// The audit log records the operator's forwarded address.
		if _, err := e.app.UpdateMerchant(ctx, mid, xaalis.MerchantUpdate{AllowIPs: &[]netip.Prefix{}}); err != nil {
			t.Fatal(err)
		}
		e.fund(t, keys.SecretTest, 1, 200000)
		var pr struct{ ID string }
		e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: "pr-1", header: from("203.0.113.8"),
			body: `{"amount":50000,"currency":"XOF","destination_phone":"+221771112233"}`}).want(t, 201, "").data(t, &pr)
		cfg := xhttp.DefaultConfig()
		behindProxy(&cfg, nil)
		admin := httptest.NewServer(xhttp.NewAdmin(e.app, nil, xhttp.NewServer(e.app, slogDiscard(), cfg, api.OpenAPI, nil), nil))
		defer admin.Close()
		_, token, err := e.app.CreateOperatorToken(ctx, "ops", nil)
		if err != nil {
			t.Fatal(err)
		}
		req := mustRequest(t, "POST", admin.URL+"/admin/v1/payout-requests/"+pr.ID+"/approve", "")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", "192.0.2.44")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("approve: %d", res.StatusCode)
		}
		list, _, err := e.app.AuditLog(ctx, xaalis.PageRequest{Page: 1, PerPage: 1})
		if err != nil || len(list) != 1 || list[0].Action != "payout_request.approve" || list[0].ClientIP != "192.0.2.44" {
			t.Fatalf("audit entry: %+v %v", list, err)
		}
		if b, _ := json.Marshal(list[0]); !strings.Contains(string(b), `"client_ip":"192.0.2.44"`) {
			t.Fatalf("audit JSON: %s", b)
		}
	})
}

// TestForwardedIgnoredWithoutTrustedProxies: by default the headers name
// nobody, whatever they say.
func TestForwardedIgnoredWithoutTrustedProxies(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	mid, _ := e.merchant()
	allow := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	_, secret, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret, AllowIPs: allow})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []map[string]string{{"X-Forwarded-For": "203.0.113.7"}, {"Forwarded": "for=203.0.113.7"}, {"X-Real-Ip": "203.0.113.7"}} {
		e.do(call{method: "GET", path: "/v1/plans", key: secret, header: h}).want(t, 401, xaalis.EIPNotAllowed)
	}
	for _, l := range accessLines(t, e.logs.String(), "/v1/plans") {
		if l["remote_ip"] != "127.0.0.1" || l["proxy_ip"] != nil {
			t.Fatalf("access log: %v", l)
		}
	}
}

// TestDuplicateJSONKey: a body holding a key twice, at any depth, answers
// 400 invalid_request naming it, instead of the last value winning; the
// answer is stored with its Idempotency-Key like any 4xx.
func TestDuplicateJSONKey(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	for _, c := range []struct{ path, body, key string }{
		{"/v1/plans", `{"name":"Gold","amount":5000,"interval":"month","amount":1}`, "amount"},
		{"/v1/plans", `{"name":"Gold","amount":5000,"interval":"month","Amount":1}`, "Amount"},
		{"/v1/payments", `{"merchant_ref":"o-1","amount":500,"currency":"XOF","success_url":"https://shop.example/ok",
			"failed_url":"https://shop.example/ko","payer":{"phone":"+221770000001","phone":"+221770000002"}}`, "payer.phone"},
		{"/v1/payments", `{"merchant_ref":"o-2","amount":500,"currency":"XOF","success_url":"https://shop.example/ok",
			"failed_url":"https://shop.example/ko","metadata":{"order":"1","order":"2"}}`, "metadata.order"},
	} {
		idem := "dup-" + c.key
		r := e.do(call{method: "POST", path: c.path, key: keys.SecretTest, idem: idem, body: c.body, invalid: true}).want(t, 400, xaalis.EInvalidRequest)
		if r.err.Context["key"] != c.key || !strings.Contains(r.err.Message, `"`+c.key+`"`) {
			t.Fatalf("%s: %s", c.body, r.body)
		}
		e.do(call{method: "POST", path: c.path, key: keys.SecretTest, idem: idem, body: c.body, invalid: true}).want(t, 400, xaalis.EInvalidRequest).
			replayOf(t, r)
	}
	// Metadata keys differing in case are two keys, as they should be.
	e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "meta-case",
		body: `{"merchant_ref":"o-3","amount":500,"currency":"XOF","success_url":"https://shop.example/ok",
			"failed_url":"https://shop.example/ko","metadata":{"order":"1","Order":"2"}}`}).want(t, 201, "")
}

// TestAuthFailureThrottle: invalid keys from one address are slowed, then
// answered 429 with Retry-After until the window ends; a valid key is
// served from that address and any other, and another address's invalid
// keys are still 401.
func TestAuthFailureThrottle(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), behindProxy, func(cfg *xhttp.Config, _ *xaalis.App) {
			// A delay far from the time of an answer that waits for none,
			// so that a loaded machine tells the two apart.
			cfg.AuthFailureDelay, cfg.AuthFailureMaxDelay = 100*time.Millisecond, 150*time.Millisecond
		})
		_, keys := e.merchant()
		from := func(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }
		bad := func(ip string, i int) (*response, time.Duration) {
			start := time.Now()
			r := e.do(call{method: "GET", path: "/v1/plans", key: fmt.Sprintf("sk_test_%032d", i), header: from(ip)})
			return r, time.Since(start)
		}
		var first429 int
		for i := 1; i <= 50; i++ {
			r, took := bad("198.51.100.1", i)
			switch {
			case i <= 20:
				r.want(t, 401, xaalis.EInvalidAPIKey)
				if i > 6 && took < 100*time.Millisecond {
					t.Errorf("failure %d answered in %v: not slowed", i, took)
				}
			default:
				r.want(t, 429, xaalis.ETooManyRequests)
				ra, err := strconv.Atoi(r.header.Get("Retry-After"))
				if err != nil || ra < 1 || ra > 600 {
					t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
				}
				if took > 75*time.Millisecond && i > 21 {
					t.Errorf("a throttled failure took %v", took)
				}
				if first429 == 0 {
					first429 = i
				}
			}
		}
		if first429 != 21 {
			t.Fatalf("first 429 at %d", first429)
		}
		// A malformed header counts as a failure too, and is throttled.
		e.do(call{method: "GET", path: "/v1/plans", header: map[string]string{"X-Forwarded-For": "198.51.100.1",
			"Authorization": "Basic eDp5"}}).want(t, 429, xaalis.ETooManyRequests)
		// Valid keys are served, from the throttled address too.
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest, header: from("198.51.100.1")}).want(t, 200, "")
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest, header: from("198.51.100.2")}).want(t, 200, "")
		// Another address's failures are its own.
		r, _ := bad("198.51.100.2", 1)
		r.want(t, 401, xaalis.EInvalidAPIKey)
		// The window ends: the address may fail again.
		e.clock.Advance(10 * time.Minute)
		r, _ = bad("198.51.100.1", 99)
		r.want(t, 401, xaalis.EInvalidAPIKey)
		if !strings.Contains(e.logs.String(), "address throttled") {
			t.Error("no log line about the throttled address")
		}
	})
}

// TestAuthFailureThrottleAcrossServers: two servers on one PostgreSQL
// database share the count.
func TestAuthFailureThrottleAcrossServers(t *testing.T) {
	url := pgtest.URL(t)
	cfg := func(cfg *xhttp.Config, _ *xaalis.App) {
		behindProxy(cfg, nil)
		cfg.AuthFailureLimit, cfg.AuthFailureDelay = 10, 0
	}
	a := newEnv(t, openPostgresURL(t, url), cfg)
	b := newEnv(t, openPostgresURL(t, url), cfg)
	_, keys := a.merchant()
	h := map[string]string{"X-Forwarded-For": "198.51.100.1"}
	for i := 1; i <= 10; i++ {
		e := a
		if i%2 == 0 {
			e = b
		}
		e.do(call{method: "GET", path: "/v1/plans", key: fmt.Sprintf("sk_test_%032d", i), header: h}).want(t, 401, xaalis.EInvalidAPIKey)
	}
	for _, e := range []*env{a, b, a} {
		e.do(call{method: "GET", path: "/v1/plans", key: "sk_test_" + strings.Repeat("x", 32), header: h}).want(t, 429, xaalis.ETooManyRequests)
	}
	b.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest, header: h}).want(t, 200, "")
}
