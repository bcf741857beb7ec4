package http_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
)

// TestHostedCheckout walks the hosted page through the real server: the
// payer picks a provider, enters the code, and the page reports success.
func TestHostedCheckout(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.PublishableTest, "hosted-1", "")
		form := func(path string, v url.Values, origin string) *response {
			return e.do(call{method: "POST", path: path, body: v.Encode(), header: map[string]string{
				"Content-Type": "application/x-www-form-urlencoded", "Origin": origin}})
		}
		page := e.do(call{method: "GET", path: "/checkout/" + p.ID + "?lang=en"}).want(t, 200, "")
		for _, want := range []string{"channel_a", "channel_b", "channel_c", p.Reference, "Test mode"} {
			if !strings.Contains(string(page.body), want) {
				t.Fatalf("page lacks %q", want)
			}
		}
		if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Fatalf("CSP = %q", csp)
		}
		// A form posted from another site is refused.
		if r := form("/checkout/"+p.ID+"/provider", url.Values{"provider": {"channel_b"}}, "https://evil.example"); r.status != 403 {
			t.Fatalf("cross-site post: %d", r.status)
		}
		// The payer gives the phone on the page: a publishable key cannot.
		r := form("/checkout/"+p.ID+"/provider", url.Values{"provider": {"channel_b"}, "phone": {"+221771234567"}}, e.srv.URL)
		if r.status != 303 || !strings.HasPrefix(r.header.Get("Location"), "/checkout/"+p.ID) {
			t.Fatalf("choose: %d %s", r.status, r.header.Get("Location"))
		}
		var got txRecord
		e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretTest}).data(t, &got)
		if got.Status != "pending" || got.NextAction == nil || got.NextAction.Type != "otp" {
			t.Fatalf("after the choice: %+v", got)
		}
		page = e.do(call{method: "GET", path: "/checkout/" + p.ID + "?lang=fr"}).want(t, 200, "")
		if !strings.Contains(string(page.body), `name="otp"`) {
			t.Fatal("no OTP form on the page")
		}
		form("/checkout/"+p.ID+"/otp", url.Values{"otp": {provider.TestOTP}}, e.srv.URL)
		st := e.do(call{method: "GET", path: "/checkout/" + p.ID + "/status"}).want(t, 200, "")
		if !strings.Contains(string(st.body), `"status":"success"`) || !strings.Contains(string(st.body), "https://shop.example/ok?reference="+p.Reference) {
			t.Fatalf("status: %s", st.body)
		}
		if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != "payment.success" {
			t.Fatalf("events %v", evs)
		}
		e.do(call{method: "GET", path: "/checkout/00000000-0000-0000-0000-000000000000"}).want(t, 404, "")
		// The status poll's 404 is the API's whole error envelope.
		for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
			r := e.do(call{method: "GET", path: "/checkout/" + id + "/status"}).want(t, 404, "not_found")
			if !strings.Contains(string(r.body), `"documentation_url":"https://docs.xaalis.dev/errors#not_found"`) {
				t.Fatalf("status of %s: %s", id, r.body)
			}
		}
		e.do(call{method: "GET", path: "/v1/checkout.js"}).want(t, 200, "")
		e.do(call{method: "GET", path: "/checkout-assets/checkout.css"}).want(t, 200, "")
	})
}

// TestHostedChoiceAfterExpiry: past its expires_at a payment starts no
// collection, though the expiry job has not run yet: the choice is
// refused and the payment stays as it was.
func TestHostedChoiceAfterExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "late-choice", `"expires_in":60,"payer":{"phone":"+221771234567"}`)
		choose := func() *response {
			return e.do(call{method: "POST", path: "/checkout/" + p.ID + "/provider",
				body:   url.Values{"provider": {"channel_b"}}.Encode(),
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL}})
		}
		e.clock.Advance(61 * time.Second)
		if r := choose(); r.status != 303 || !strings.Contains(r.header.Get("Location"), "e=") {
			t.Fatalf("a choice after expires_at: %d %s", r.status, r.header.Get("Location"))
		}
		var got txRecord
		e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &got)
		if got.Status != "initiated" || got.Provider != nil {
			t.Fatalf("after a refused choice: %+v", got)
		}
		// Before expires_at, the same choice goes through.
		e.clock.Advance(-61 * time.Second)
		if r := choose(); r.status != 303 || strings.Contains(r.header.Get("Location"), "e=") {
			t.Fatalf("a choice in time: %d %s", r.status, r.header.Get("Location"))
		}
	})
}

// TestHostedActionsOnAPayout: the page's actions on the id of a payout
// answer 404, as the page itself does, and move nothing.
func TestHostedActionsOnAPayout(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 10000)
		var po txRecord
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "page-po",
			body: payoutBody("page-po", 1000, "channel_a", provider.TestPhonePending)}).want(t, 201, "").data(t, &po)
		e.do(call{method: "GET", path: "/checkout/" + po.ID}).want(t, 404, "")
		for _, c := range []struct{ path, field, value string }{
			{"provider", "provider", "channel_b"}, {"otp", "otp", "123456"}, {"simulate", "outcome", "success"}, {"cancel", "x", "y"},
		} {
			r := e.do(call{method: "POST", path: "/checkout/" + po.ID + "/" + c.path, body: url.Values{c.field: {c.value}}.Encode(),
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL}})
			if r.status != 404 {
				t.Fatalf("%s on a payout: %d %s", c.path, r.status, r.header.Get("Location"))
			}
		}
		var after txRecord
		e.do(call{method: "GET", path: "/v1/payouts/" + po.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &after)
		if after.Status != po.Status {
			t.Fatalf("the payout moved: %s, then %s", po.Status, after.Status)
		}
	})
}
