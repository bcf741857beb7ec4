package http_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestDatabaseAway: while PostgreSQL cannot be reached, every request
// answers 503 service_unavailable with Retry-After (never a 500), /readyz
// is 503, and nothing is half written; once it answers again /readyz is
// ready without a restart and a retry with the same Idempotency-Key runs
// the command once.
func TestDatabaseAway(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewCutProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	e := newEnv(t, openPostgresURL(t, u.String()))
	_, keys := e.merchant()
	key := keys.SecretTest
	body := payBody("away-1", `"amount":5000,"provider":"channel_a","payer":{"phone":"+221770000001"}`)
	e.do(call{method: "GET", path: "/readyz"}).want(t, 200, "")

	proxy.Cut()
	for _, c := range []call{
		{method: "POST", path: "/v1/payments", key: key, idem: "away", body: body},
		{method: "GET", path: "/v1/payments", key: key},
		{method: "GET", path: "/v1/balance", key: key},
		{method: "GET", path: "/readyz"},
	} {
		r := e.do(c).want(t, 503, xaalis.EServiceUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
	proxy.Resume()
	deadline := time.Now().Add(15 * time.Second)
	for e.do(call{method: "GET", path: "/readyz"}).status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never turned ready again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The refused attempt left nothing: the retry creates the payment.
	var p txRecord
	e.do(call{method: "POST", path: "/v1/payments", key: key, idem: "away", body: body}).want(t, 201, "").data(t, &p)
	var list []txRecord
	e.do(call{method: "GET", path: "/v1/payments?merchant_ref=away-1", key: key}).want(t, 200, "").data(t, &list)
	if len(list) != 1 || list[0].ID != p.ID || p.Status != "success" {
		t.Fatalf("payments %+v", list)
	}
	e.ledgerOK(t)
}
