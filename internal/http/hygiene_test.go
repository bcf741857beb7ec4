package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// poisons are the strings no request may carry, as JSON string contents
// (json) and as raw text (raw, for query parameters and headers).
var poisons = []struct {
	name string
	json string // inside a JSON string literal
	raw  string
}{
	{"NUL", `\u0000`, "\x00"},
	{"C0 BEL", `\u0007`, "\x07"},
	{"C0 ESC", `\u001b`, "\x1b"},
	{"DEL", `\u007f`, "\x7f"},
	{"C1 NEL", "\u0085", "\u0085"},
	{"C1 CSI escaped", `\u009b`, "\u009b"},
	{"invalid UTF-8", "\xff", "\xff"},
	{"lone surrogate", `\ud800`, "\xed\xa0\x80"},
	{"tab outside free text", `\t`, "\t"},
	{"newline outside free text", `\n`, "\n"},
}

// hygieneCase poisons one field of one mutating route.
type hygieneCase struct {
	method, path string
	// body holds %s where the poison goes; field is the name the answer
	// must give. An empty body poisons a query parameter instead.
	body, field string
}

// TestInputHygiene sends control characters and invalid UTF-8 in body
// fields, metadata keys and values, query parameters and the
// Idempotency-Key to every mutating route of the API, on both backends:
// each answers 422 validation_error naming the field, and nothing is
// stored. Tab and newline pass in free text only.
func TestInputHygiene(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 1e6, 1e6 })
		ctx := context.Background()
		_, keys := e.merchant()
		benID, _ := e.merchant()
		key := keys.SecretTest
		e.fund(t, key, 1, 100000)
		_, pay := e.pay(t, key, "hy-pay", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		_, pending := e.pay(t, key, "hy-pending", `"amount":10000,"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		_, disputed := e.pay(t, key, "hy-disputed", `"amount":3000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		d, err := e.app.OpenDispute(ctx, xaalis.DisputeOpen{TransactionID: disputed.ID})
		if err != nil {
			t.Fatal(err)
		}
		var plan, ep, sub struct{ ID string }
		e.do(call{method: "POST", path: "/v1/plans", key: key, idem: "hy-plan", body: planBody}).want(t, 201, "").data(t, &plan)
		e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: key, idem: "hy-ep",
			body: `{"url":"https://hooks.example/x"}`}).want(t, 201, "").data(t, &ep)
		var customers []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/customers", key: key}).want(t, 200, "").data(t, &customers)
		e.do(call{method: "POST", path: "/v1/subscriptions", key: key, idem: "hy-sub",
			body: `{"plan_id":"` + plan.ID + `","customer_id":"` + customers[0].ID + `"}`}).want(t, 201, "").data(t, &sub)
		evs, err := e.app.Store.Events(ctx, pay.ID)
		if err != nil || len(evs) == 0 {
			t.Fatalf("events of the payment: %v", err)
		}

		cases := []hygieneCase{
			{"POST", "/v1/payments", payBody(`hy-%s`, ""), "merchant_ref"},
			{"POST", "/v1/payments", payBody("hy-md-1", `"metadata":{"order":"%s"}`), "metadata.order"},
			{"POST", "/v1/payments", payBody("hy-md-2", `"metadata":{"or%sder":"1"}`), "metadata"},
			{"POST", "/v1/payments", payBody("hy-pn", `"payer":{"phone":"+221771234567","name":"Awa%s"}`), "payer.name"},
			{"POST", "/v1/payments", `{"merchant_ref":"hy-su","amount":5000,"success_url":"https://shop.example/%s","failed_url":"https://shop.example/ko"}`, "success_url"},
			{"POST", "/v1/payments/precheck", `{"amount":5000,"payer":{"phone":"+221771234567","name":"Awa%s"}}`, "payer.name"},
			{"POST", "/v1/payments/" + pending.ID + "/verify", "", ""},
			{"POST", "/v1/test-helpers/payments/" + pending.ID + "/simulate", `{"outcome":"success%s"}`, "outcome"},
			{"POST", "/v1/payouts", `{"merchant_ref":"po-%s","amount":1000,"currency":"XOF","provider":"channel_a","recipient":{"phone":"+221771112233"}}`, "merchant_ref"},
			{"POST", "/v1/payouts", `{"merchant_ref":"po-1","amount":1000,"currency":"XOF","provider":"channel_a","recipient":{"phone":"+221771112233","name":"M%s"}}`, "recipient.name"},
			{"POST", "/v1/refunds", `{"transaction_id":"` + pay.ID + `","amount":100,"reason":"late %s"}`, "reason"},
			{"POST", "/v1/payout-requests", `{"amount":1000,"currency":"XOF","destination_phone":"+221771112233","destination_bank":"B%s"}`, "destination_bank"},
			{"POST", "/v1/payments/" + pay.ID + "/splits", `{"items":[{"beneficiary_merchant_id":"` + benID + `","amount":100,"description":"%s"}]}`, "items[0].description"},
			{"POST", "/v1/disputes/" + d.ID + "/respond", `{"evidence":["https://shop.example/%s"],"merchant_response":"ok"}`, "evidence[0]"},
			{"POST", "/v1/subscriptions", `{"plan_id":"` + plan.ID + `","customer_id":"` + customers[0].ID + `","metadata":{"k":"%s"}}`, "metadata.k"},
			{"POST", "/v1/subscriptions/" + sub.ID + "/cancel", "", ""},
			{"POST", "/v1/subscriptions/" + sub.ID + "/cancel-at-period-end", "", ""},
			{"POST", "/v1/plans", `{"name":"Gold%s","amount":5000,"interval":"month"}`, "name"},
			{"POST", "/v1/plans/" + plan.ID + "/deactivate", "", ""},
			{"POST", "/v1/webhook-endpoints", `{"url":"https://hooks.example/%s"}`, "url"},
			{"POST", "/v1/webhook-endpoints", `{"url":"https://hooks.example/y","events":["payment.success%s"]}`, "events[0]"},
			{"DELETE", "/v1/webhook-endpoints/" + ep.ID, "", ""},
			{"POST", "/v1/webhook-endpoints/" + ep.ID + "/rotate-secret", "", ""},
			{"POST", "/v1/webhooks/test", `{"endpoint_id":"` + ep.ID + `%s"}`, "endpoint_id"},
			{"POST", "/v1/events/redeliver", `{"type":"payment.success%s"}`, "type"},
			{"POST", "/v1/events/" + evs[0].ID + "/redeliver", "", ""},
		}

		// Every mutating route of the API is in the table.
		srv := xhttp.NewServer(e.app, slogDiscard(), xhttp.DefaultConfig(), api.OpenAPI, nil)
		for _, rt := range srv.Routes() {
			method, pattern, _ := strings.Cut(rt.Pattern, " ")
			if method == "GET" || !strings.Contains(rt.Access, "key") {
				continue // reads, and routes without an API key (hosted page, provider notifications)
			}
			found := false
			for _, c := range cases {
				if c.method == method && matches(pattern, c.path) {
					found = true
				}
			}
			if !found {
				t.Errorf("mutating route %s has no hygiene case", rt.Pattern)
			}
		}

		before := e.counts(t, key)
		n := 0
		for _, c := range cases {
			for _, p := range poisons {
				n++
				idem := fmt.Sprintf("hy-%d", n)
				var r *response
				field := c.field
				if freeText(field) && (p.raw == "\t" || p.raw == "\n") {
					continue // allowed there: checked below
				}
				if c.body != "" {
					r = e.do(call{method: c.method, path: c.path, key: key, idem: idem, body: fmt.Sprintf(c.body, p.json), invalid: true})
				} else {
					field = "note"
					r = e.do(call{method: c.method, path: c.path + "?note=" + url.QueryEscape("x"+p.raw), key: key, idem: idem, invalid: true})
				}
				if r.status != 422 || r.err.Code != xaalis.EValidation || len(r.err.Errors[field]) == 0 {
					t.Errorf("%s %s with %s in %s: got %d %s, want 422 validation_error naming %q", c.method, c.path, p.name, field, r.status, r.body, field)
				}
				// The query and the Idempotency-Key of the same route.
				r = e.do(call{method: c.method, path: c.path + "?" + url.QueryEscape("x"+p.raw) + "=1", key: key, idem: idem + "-q", invalid: true})
				if r.status != 422 || r.err.Code != xaalis.EValidation {
					t.Errorf("%s %s with %s in a query parameter name: got %d %s", c.method, c.path, p.name, r.status, r.body)
				}
				if p.raw == "\x00" || p.raw == "\n" || p.raw == "\x07" || p.raw == "\x1b" || p.raw == "\x7f" || p.raw == "\t" {
					continue // net/http refuses these in a header before they leave
				}
				r = e.do(call{method: c.method, path: c.path, key: key, idem: "k" + p.raw, body: fmt.Sprintf(c.body, "x"), invalid: true})
				if r.status != 422 || r.err.Code != xaalis.EValidation || len(r.err.Errors["Idempotency-Key"]) == 0 {
					t.Errorf("%s %s with %s in the Idempotency-Key: got %d %s", c.method, c.path, p.name, r.status, r.body)
				}
			}
		}
		if after := e.counts(t, key); after != before {
			t.Errorf("refused requests stored something: before %v, after %v", before, after)
		}
		// Nothing refused reached a list either, through a query.
		e.do(call{method: "GET", path: "/v1/payments?merchant_ref=" + url.QueryEscape("hy-\x00"), key: key, invalid: true}).
			want(t, 422, xaalis.EValidation)

		// Tab and newline (LF, or CR LF) pass in free text.
		text := `line one\nline\ttwo\r\nend`
		var po, rf, pr struct {
			Description  string
			MerchantNote string `json:"merchant_note"`
		}
		e.do(call{method: "POST", path: "/v1/payouts", key: key, idem: "hy-text-po",
			body: `{"merchant_ref":"hy-text","amount":1000,"currency":"XOF","provider":"channel_a","recipient":{"phone":"+221771112233"},"description":"` + text + `"}`}).
			want(t, 201, "").data(t, &po)
		e.do(call{method: "POST", path: "/v1/refunds", key: key, idem: "hy-text-rf",
			body: `{"transaction_id":"` + pay.ID + `","amount":100,"reason":"` + text + `"}`}).want(t, 201, "").data(t, &rf)
		e.do(call{method: "POST", path: "/v1/payout-requests", key: key, idem: "hy-text-pr",
			body: `{"amount":1000,"currency":"XOF","destination_phone":"+221771112233","merchant_note":"` + text + `"}`}).want(t, 201, "").data(t, &pr)
		e.do(call{method: "POST", path: "/v1/disputes/" + d.ID + "/respond", key: key, idem: "hy-text-d",
			body: `{"merchant_response":"` + text + `"}`}).want(t, 200, "")
		e.do(call{method: "POST", path: "/v1/payments/" + pay.ID + "/splits", key: key, idem: "hy-text-sp",
			body: `{"items":[{"beneficiary_merchant_id":"` + benID + `","amount":100,"description":"` + text + `"}]}`, invalid: true}).want(t, 201, "")
		var want string
		_ = json.Unmarshal([]byte(`"`+text+`"`), &want)
		if po.Description != want || pr.MerchantNote != want {
			t.Errorf("free text changed: %q, %q", po.Description, pr.MerchantNote)
		}
		// A bare CR is not a newline.
		e.do(call{method: "POST", path: "/v1/refunds", key: key, idem: "hy-cr",
			body: `{"transaction_id":"` + pay.ID + `","amount":100,"reason":"a\rb"}`}).want(t, 422, xaalis.EValidation)
	})
}

// freeText reports whether a field is free text (tab and newline allowed).
func freeText(field string) bool {
	for _, f := range []string{"description", "reason", "merchant_note", "merchant_response"} {
		if field == f || strings.HasSuffix(field, "."+f) {
			return true
		}
	}
	return false
}

// matches reports whether a concrete path fits a ServeMux pattern.
func matches(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if !strings.HasPrefix(ps[i], "{") && ps[i] != qs[i] {
			return false
		}
	}
	return true
}

// counts is how many records of each kind the merchant has.
func (e *env) counts(t *testing.T, key string) string {
	t.Helper()
	out := ""
	for _, path := range []string{"/v1/payments", "/v1/payouts", "/v1/plans", "/v1/subscriptions", "/v1/webhook-endpoints", "/v1/events"} {
		var page struct {
			Pagination struct{ Total int }
		}
		r := e.do(call{method: "GET", path: path, key: key}).want(t, 200, "")
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("%s=%d ", path, page.Pagination.Total)
	}
	var prs []struct{ ID string }
	e.do(call{method: "GET", path: "/v1/payout-requests", key: key}).want(t, 200, "").data(t, &prs)
	return out + fmt.Sprintf("payout-requests=%d", len(prs))
}

// TestMalformedQuery: a query string with a pair that does not decode is
// refused (400 invalid_request); the list used to come back unfiltered.
func TestMalformedQuery(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	e.pay(t, keys.SecretTest, "mq-1", "")
	e.pay(t, keys.SecretTest, "mq-2", "")
	for _, q := range []string{"merchant_ref=%zz", "merchant_ref=mq-1%2", "status=pending;x=1", "per_page=1&page=%zz"} {
		r := e.do(call{method: "GET", path: "/v1/payments?" + q, key: keys.SecretTest})
		r.want(t, 400, xaalis.EInvalidRequest)
	}
	var list []struct{ ID string }
	e.do(call{method: "GET", path: "/v1/payments?merchant_ref=mq-1", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
	if len(list) != 1 {
		t.Fatalf("a good filter: %d payments", len(list))
	}
}

// TestPathBytes: an id in a path with a NUL or invalid UTF-8 answered 500
// on PostgreSQL (which refuses such text) and 404 on SQLite; it is 404
// not_found on both. A Last-Event-ID with such bytes is 422 on both.
func TestPathBytes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		for _, c := range []struct{ method, path string }{
			{"GET", "/v1/events/%00"}, {"GET", "/v1/events/%ff"}, {"GET", "/v1/payments/%00"},
			{"GET", "/v1/webhook-endpoints/%C3%28"}, {"DELETE", "/v1/webhook-endpoints/%00"},
			{"POST", "/v1/webhook-endpoints/%00/rotate-secret"}, {"POST", "/v1/events/%00/redeliver"},
			{"GET", "/v1/disputes/%00"}, {"GET", "/v1/status/%00"},
		} {
			e.do(call{method: c.method, path: c.path, key: keys.SecretTest, idem: "pb-" + c.path, body: "{}", invalid: true}).
				want(t, 404, xaalis.ENotFound)
		}
		r := e.do(call{method: "GET", path: "/v1/events/stream", key: keys.SecretTest, invalid: true,
			header: map[string]string{"Last-Event-ID": "\xff\xfe"}}).want(t, 422, xaalis.EValidation)
		if len(r.err.Errors["Last-Event-ID"]) == 0 {
			t.Fatalf("the field: %s", r.body)
		}
	})
}

// TestReadEdges: GET /v1/status/{reference} reads payments and payouts
// ("works for payments and payouts"), not refunds; a publishable key finds
// a payment by its id in upper case as a secret key does; a precheck
// refuses an empty merchant_ref or success_url as creation does (it said
// allowed); ?active= takes true or false only; a merchant_ref "." or ".."
// (which no URL path names) is refused.
func TestReadEdges(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "re-1", `"amount":5000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		var rf txRecord
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "re-rf",
			body: `{"transaction_id":"` + p.ID + `","amount":500}`}).want(t, 201, "").data(t, &rf)
		for _, k := range []string{rf.ID, rf.Reference} {
			e.do(call{method: "GET", path: "/v1/status/" + k, key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
		}
		e.do(call{method: "GET", path: "/v1/refunds/" + rf.ID, key: keys.SecretTest}).want(t, 200, "")
		e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: keys.SecretTest}).want(t, 200, "")
		e.do(call{method: "GET", path: "/v1/status/" + strings.ToUpper(p.ID), key: keys.PublishableTest}).want(t, 200, "")
		for _, body := range []string{`{"amount":1000,"provider":"channel_a","merchant_ref":""}`,
			`{"amount":1000,"provider":"channel_a","success_url":""}`} {
			e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.SecretTest, body: body, invalid: true}).
				want(t, 422, xaalis.EValidation)
		}
		for _, v := range []string{"1", "t", "TRUE", "0"} {
			e.do(call{method: "GET", path: "/v1/plans?active=" + v, key: keys.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
		}
		e.do(call{method: "GET", path: "/v1/plans?active=false", key: keys.SecretTest}).want(t, 200, "")
		// An id in upper case is the same id on every route that takes one.
		var plan, cust, ev struct{ ID string }
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "re-plan",
			body: `{"name":"Box","amount":5000,"interval":"month"}`}).want(t, 201, "").data(t, &plan)
		var custs []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/customers", key: keys.SecretTest}).want(t, 200, "").data(t, &custs)
		cust = custs[0]
		var evs []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/events", key: keys.SecretTest}).want(t, 200, "").data(t, &evs)
		ev = evs[0]
		for _, path := range []string{"/v1/plans/" + plan.ID, "/v1/customers/" + cust.ID, "/v1/events/" + ev.ID} {
			i := strings.LastIndex(path, "/")
			e.do(call{method: "GET", path: path[:i+1] + strings.ToUpper(path[i+1:]), key: keys.SecretTest}).want(t, 200, "")
		}
		for _, ref := range []string{".", ".."} {
			r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "re-dot" + ref, invalid: true,
				body: payBody(ref, `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)}).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["merchant_ref"]) == 0 {
				t.Fatalf("merchant_ref %q: %s", ref, r.body)
			}
		}
	})
}

// TestAllowOnConcretePaths: a concrete path that a templated one also
// matches answers every other method 405 with its own Allow, POST, not
// the template's GET merged in; GET /v1/events/redeliver is not the event
// "redeliver".
func TestAllowOnConcretePaths(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	for _, path := range []string{"/v1/payments/precheck", "/v1/events/redeliver"} {
		for _, m := range []string{"GET", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"} {
			r := e.do(call{method: m, path: path, key: keys.SecretTest})
			if r.status != 405 || r.header.Get("Allow") != "POST" {
				t.Errorf("%s %s: %d, Allow %q", m, path, r.status, r.header.Get("Allow"))
			}
		}
	}
}

// TestNoStore: the API's answers, errors included, are never cached;
// the contract and checkout.js may be.
func TestNoStore(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	for _, c := range []struct {
		path, key, want string
	}{
		{"/v1/balance", keys.SecretTest, "no-store"},
		{"/v1/webhooks/callback-secret", keys.SecretTest, "no-store"},
		{"/v1/balance", "", "no-store"},
		{"/v1/openapi.yaml", "", ""},
	} {
		r := e.do(call{method: "GET", path: c.path, key: c.key, invalid: true})
		if got := r.header.Get("Cache-Control"); got != c.want {
			t.Errorf("%s (key %v): Cache-Control %q, want %q", c.path, c.key != "", got, c.want)
		}
	}
	// The hosted page's limit answers 429 uncached, on checkout.js too
	// (whose 200 may be cached).
	limited := newEnv(t, openSQLite(t), func(cfg *xhttp.Config, _ *xaalis.App) { cfg.PageRateLimit, cfg.PageRateBurst = 0.001, 1 })
	limited.do(call{method: "GET", path: "/v1/checkout.js", invalid: true}).want(t, 200, "")
	r := limited.do(call{method: "GET", path: "/v1/checkout.js", invalid: true}).want(t, 429, xaalis.ETooManyRequests)
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the page limit's 429: Cache-Control %q", got)
	}
}
