package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// The tests of issue 10: what a publishable key (public by design), a
// narrow secret key and the embedded configuration can no longer do.

// TestPublishableStatusView: a publishable key reads a reduced view of a
// payment, by id or TXN reference only; never a payout, never by
// merchant_ref. Secret keys keep the full record.
func TestPublishableStatusView(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "order-1001", `"provider":"channel_b","payer":{"phone":"+221771234567","name":"Awa Ndiaye"},`+
			`"metadata":{"order_id":"1001"},"callback_url":"https://shop.example/hook"`)
		if p.Status != "pending" {
			t.Fatalf("payment %+v", p)
		}
		wantKeys := []string{"amount", "currency", "expires_at", "id", "livemode", "object", "provider", "reference", "status"}
		for _, ref := range []string{p.Reference, p.ID} {
			r := e.do(call{method: "GET", path: "/v1/status/" + ref, key: keys.PublishableTest}).want(t, 200, "")
			var view map[string]any
			r.data(t, &view)
			var got []string
			for k := range view {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, wantKeys) {
				t.Fatalf("publishable view by %s has %v, want %v", ref, got, wantKeys)
			}
			// The id (a UUID, hex) and the reference are random, and may
			// hold "fee" or "1001" by chance (a UUID v7 begins with the
			// time: 01a21fee… for a minute on 2026-11-28): the leaks are
			// looked for in the rest of the view.
			rest := maps.Clone(view)
			delete(rest, "id")
			delete(rest, "reference")
			restJSON, err := json.Marshal(rest)
			if err != nil {
				t.Fatal(err)
			}
			for _, leak := range []string{"771234567", "Awa", "1001", "payment_url", "checkout", "shop.example", "fee"} {
				if strings.Contains(string(restJSON), leak) {
					t.Fatalf("publishable view leaks %q: %s", leak, r.body)
				}
			}
			if view["status"] != "pending" || view["provider"] != "channel_b" || view["amount"] != "5000.00" {
				t.Fatalf("view %v", view)
			}
		}
		// Never by merchant_ref: order numbers are guessable.
		e.do(call{method: "GET", path: "/v1/status/order-1001", key: keys.PublishableTest}).want(t, 404, xaalis.ENotFound)
		// Never a payout, even by its reference.
		e.fund(t, keys.SecretTest, 1, 100000)
		var po txRecord
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-1",
			body: `{"merchant_ref":"po-1","amount":1000,"currency":"XOF","provider":"channel_a","recipient":{"phone":"+221771112233","name":"Moussa"}}`}).
			want(t, 201, "").data(t, &po)
		e.do(call{method: "GET", path: "/v1/status/" + po.Reference, key: keys.PublishableTest}).want(t, 404, xaalis.ENotFound)
		e.do(call{method: "GET", path: "/v1/status/" + po.Reference, key: keys.SecretTest}).want(t, 200, "")
		// The secret key keeps the full record, by merchant_ref too.
		var full txRecord
		e.do(call{method: "GET", path: "/v1/status/order-1001", key: keys.SecretTest}).want(t, 200, "").data(t, &full)
		if full.Payer.Phone == nil || *full.Payer.Phone != "+221771234567" || full.PaymentURL == nil || full.Metadata["order_id"] != "1001" {
			t.Fatalf("secret view %+v", full)
		}
	})
}

// TestPublishablePaymentFields: a publishable key names no payer, provider,
// lifetime, callback URL or metadata (aggregated_merchant_id included),
// and its return URLs are on the merchant's return hosts.
func TestPublishablePaymentFields(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		id, keys := e.merchant()
		for i, c := range []struct{ extra, field string }{
			{`"provider":"channel_c"`, "provider"},
			{`"payer":{"phone":"+221771234567"}`, "payer"},
			{`"phone":"+221771234567"`, "phone"},
			{`"payer_phone":"+221771234567"`, "payer_phone"},
			{`"customer":{"msisdn":"+221771234567"}`, "customer"},
			{`"expires_in":604800`, "expires_in"},
			{`"callback_url":"https://shop.example/hook"`, "callback_url"},
			{`"metadata":{"order_id":"1"}`, "metadata"},
			{`"metadata":{"aggregated_merchant_id":"sub-42"}`, "metadata"},
		} {
			r, _ := e.pay(t, keys.PublishableTest, fmt.Sprint("pk-field-", i), c.extra)
			r.want(t, 422, xaalis.EValidation)
			if len(r.err.Errors[c.field]) == 0 || !strings.Contains(r.err.Errors[c.field][0], "publishable key") {
				t.Fatalf("%s: errors %v", c.extra, r.err.Errors)
			}
		}
		// The same fields are a secret key's to set.
		_, p := e.pay(t, keys.SecretTest, "sk-fields", `"provider":"channel_a","payer":{"phone":"+221771234567"},"expires_in":3600,`+
			`"metadata":{"aggregated_merchant_id":"sub-42"}`)
		if p.Provider == nil || p.Metadata["aggregated_merchant_id"] != "sub-42" {
			t.Fatalf("secret key payment %+v", p)
		}
		// Return URLs off the return hosts are refused.
		r := e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "pk-host",
			body: `{"merchant_ref":"pk-host","amount":5000,"success_url":"https://evil.example/ok","failed_url":"https://shop.example/ko"}`}).
			want(t, 422, xaalis.EValidation)
		if len(r.err.Errors["success_url"]) == 0 || len(r.err.Errors["failed_url"]) != 0 {
			t.Fatalf("errors %v", r.err.Errors)
		}
		// A merchant without return hosts cannot take publishable payments.
		none := []string{}
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{ReturnHosts: &none}); err != nil {
			t.Fatal(err)
		}
		r, _ = e.pay(t, keys.PublishableTest, "pk-nohosts", "")
		r.want(t, 422, xaalis.EValidation)
		if !strings.Contains(r.err.Errors["success_url"][0], "none is registered") {
			t.Fatalf("errors %v", r.err.Errors)
		}
		hosts := []string{"shop.example"}
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{ReturnHosts: &hosts}); err != nil {
			t.Fatal(err)
		}
		_, p = e.pay(t, keys.PublishableTest, "pk-ok", "")
		if p.Status != "initiated" || p.Provider != nil || p.Payer.Phone != nil {
			t.Fatalf("publishable payment %+v", p)
		}
	})
}

// TestPendingHoldsThirtyMinutes: a pending payment holds room against the
// payer's BCEAO ceiling (across merchants) and the merchant's provider
// limit for 30 minutes, however long it lives; then only success counts.
func TestPendingHoldsThirtyMinutes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			spec := a.Config.Providers["channel_c"]
			spec.DailyLimit = 20000
			a.Config.Providers["channel_c"] = spec
		})
		_, attacker := e.merchant()
		_, victim := e.merchant()
		// 2,000,000 XOF is the default tier's 30-day ceiling.
		_, p := e.pay(t, attacker.SecretTest, "lock-1", `"amount":2000000,"provider":"channel_a","payer":{"phone":"+221771234101"},"expires_in":604800`)
		if p.Status != "pending" {
			t.Fatalf("payment %+v", p)
		}
		r, _ := e.pay(t, victim.SecretTest, "victim-1", `"amount":1000,"provider":"channel_a","payer":{"phone":"+221771234101"}`)
		r.want(t, 422, xaalis.EBCEAOLimitExceeded)
		// The merchant fills its own channel_c limit with pending payments.
		for i := range 2 {
			_, q := e.pay(t, victim.SecretTest, fmt.Sprint("c-", i), `"amount":10000,"provider":"channel_c","payer":{"phone":"+221771234102"},"expires_in":604800`)
			if q.Status != "pending" {
				t.Fatalf("channel_c payment %+v", q)
			}
		}
		r, _ = e.pay(t, victim.SecretTest, "c-full", `"amount":1000,"provider":"channel_c","payer":{"phone":"+221771234103"}`)
		r.want(t, 422, xaalis.EDailyLimitExceeded)
		e.clock.Advance(29 * time.Minute)
		r, _ = e.pay(t, victim.SecretTest, "victim-2", `"amount":1000,"provider":"channel_a","payer":{"phone":"+221771234101"}`)
		r.want(t, 422, xaalis.EBCEAOLimitExceeded)
		// Past 30 minutes the pending payments hold nothing, though they
		// live for a week.
		e.clock.Advance(2 * time.Minute)
		if r, q := e.pay(t, victim.SecretTest, "victim-3", `"amount":1000,"provider":"channel_a","payer":{"phone":"+221771234101"}`); r.status != 201 || q.Status != "pending" {
			t.Fatalf("after 30 minutes: %d %s", r.status, r.body)
		}
		if r, _ := e.pay(t, victim.SecretTest, "c-after", `"amount":1000,"provider":"channel_c","payer":{"phone":"+221771234103"}`); r.status != 201 {
			t.Fatalf("channel_c after 30 minutes: %d %s", r.status, r.body)
		}
		// Success counts for good: paying the first payment fills the
		// ceiling again.
		e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: attacker.SecretTest,
			idem: "sim-lock-1", body: `{"outcome":"success"}`}).want(t, 200, "")
		r, _ = e.pay(t, victim.SecretTest, "victim-4", `"amount":1000,"provider":"channel_a","payer":{"phone":"+221771234101"}`)
		r.want(t, 422, xaalis.EBCEAOLimitExceeded)
	})
}

// openShared opens two stores on one database, as two server processes
// would: two connections to one SQLite file, or two pools on one
// PostgreSQL schema.
func openShared(t *testing.T, b backend) (xaalis.Store, xaalis.Store) {
	if b.name == "PostgreSQL" {
		u := pgtest.URL(t)
		return openPostgresURL(t, u), openPostgresURL(t, u)
	}
	path := filepath.Join(t.TempDir(), "x.db")
	var out [2]xaalis.Store
	for i := range out {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out[0], out[1]
}

// TestPublishableRateLimits: payment creations of publishable keys are
// counted per client address in the database, so two servers share the
// count; the hosted page's phone choices on their payments per phone.
func TestPublishableRateLimits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s1, s2 := openShared(t, b)
		limits := func(_ *xhttp.Config, a *xaalis.App) {
			a.Config.Publishable.PerAddressPerMinute, a.Config.Publishable.PerPhonePerHour = 3, 2
		}
		e1, e2 := newEnv(t, s1, limits), newEnv(t, s2, limits)
		e2.clock = e1.clock
		e2.app.Now = e1.clock.Now
		_, keys := e1.merchant()
		var ids []string
		for i := range 3 {
			e := []*env{e1, e2}[i%2]
			_, p := e.pay(t, keys.PublishableTest, fmt.Sprint("rl-", i), "")
			if p.ID == "" {
				t.Fatalf("creation %d refused", i)
			}
			ids = append(ids, p.ID)
		}
		r, _ := e2.pay(t, keys.PublishableTest, "rl-3", "")
		r.want(t, 429, xaalis.ETooManyRequests)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		// Secret keys are not counted.
		if r, _ := e1.pay(t, keys.SecretTest, "rl-sk", ""); r.status != 201 {
			t.Fatalf("secret key: %d", r.status)
		}
		e1.clock.Advance(time.Minute)
		if r, _ := e1.pay(t, keys.PublishableTest, "rl-4", ""); r.status != 201 {
			t.Fatalf("next minute: %d %s", r.status, r.body)
		}
		// Each phone choice on a publishable payment's page sends a prompt:
		// two an hour for one phone, on any server.
		choose := func(e *env, id, phone string) string {
			r := e.do(call{method: "POST", path: "/checkout/" + id + "/provider", body: url.Values{"provider": {"channel_b"}, "phone": {phone}}.Encode(),
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL}})
			if r.status != 303 {
				t.Fatalf("choose: %d %s", r.status, r.body)
			}
			return r.header.Get("Location")
		}
		for i, id := range ids[:2] {
			if loc := choose([]*env{e1, e2}[i], id, "+221771239999"); strings.Contains(loc, "e=") {
				t.Fatalf("choice %d refused: %s", i, loc)
			}
		}
		if loc := choose(e2, ids[2], "+221771239999"); !strings.Contains(loc, "e=too_many") {
			t.Fatalf("third choice for one phone: %s", loc)
		}
		var got txRecord
		e1.do(call{method: "GET", path: "/v1/payments/" + ids[2], key: keys.SecretTest}).data(t, &got)
		if got.Status != "initiated" || got.Payer.Phone != nil {
			t.Fatalf("refused choice changed the payment: %+v", got)
		}
		if loc := choose(e1, ids[2], "+221771238888"); strings.Contains(loc, "e=") {
			t.Fatalf("another phone refused: %s", loc)
		}
	})
}

// TestIdempotencyKeyTypeScope: a publishable key re-sending a secret key's
// Idempotency-Key and body never gets the stored answer, and spends a
// quota of its own.
func TestIdempotencyKeyTypeScope(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) { c.IdempotencyQuota, c.IdempotencyQuotaPublishable = 5, 2 })
		_, keys := e.merchant()
		body := payBody("idem-1", `"provider":"channel_a","payer":{"phone":"+221771234567","name":"Awa"}`)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "shared", body: body}).want(t, 201, "")
		r := e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "shared", body: body}).want(t, 422, xaalis.EValidation)
		if r.header.Get("Idempotent-Replay") != "" || strings.Contains(string(r.body), "771234567") {
			t.Fatalf("publishable key got the secret key's answer: %s", r.body)
		}
		// The publishable quota (2 new keys, the refused one included) is
		// spent; the secret key's is not.
		e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "pk-2", body: payBody("pk-2", "")}).want(t, 201, "")
		e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "pk-3", body: payBody("pk-3", "")}).want(t, 429, xaalis.ETooManyRequests)
		for i := range 4 {
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: fmt.Sprint("sk-", i), body: payBody(fmt.Sprint("sk-", i), "")}).want(t, 201, "")
		}
	})
}

// TestMerchantRefRace: payments created at once with one merchant_ref and
// different Idempotency-Keys make one payment; every other request gets
// validation_error on merchant_ref, whether it found the payment made
// (the read before the insert) or lost the race for the unique index (at
// the insert, or where PostgreSQL's queued insert surfaces: a later
// statement or the COMMIT).
func TestMerchantRefRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		for round := range 6 {
			ref := fmt.Sprint("race-", round)
			extra := ""
			if round%2 == 1 { // settled in the command's transaction
				extra = `"provider":"channel_a","payer":{"phone":"+221771234567"}`
			}
			var created, refused atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: fmt.Sprint(ref, "-", i),
						body: payBody(ref, extra)})
					switch msgs := r.err.Errors["merchant_ref"]; {
					case r.status == 201:
						created.Add(1)
					case r.status == 422 && r.err.Code == xaalis.EValidation && len(msgs) == 1 &&
						strings.HasPrefix(msgs[0], "is already used"):
						refused.Add(1)
					default:
						t.Errorf("%s: unexpected answer %d: %s", ref, r.status, r.body)
					}
				}()
			}
			close(start)
			wg.Wait()
			if created.Load() != 1 || refused.Load() != 7 {
				t.Fatalf("%s: %d created, %d refused; want 1 and 7", ref, created.Load(), refused.Load())
			}
			list, err := e.app.Store.LookupTransactions(context.Background(), mid, ref)
			if err != nil || len(list) != 1 {
				t.Fatalf("%s: %d payments stored, %v", ref, len(list), err)
			}
		}
	})
}

// TestMerchantRefSquatting: a publishable key cannot take the secret key's
// merchant_ref, and its refusals name no other record.
func TestMerchantRefSquatting(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, squat := e.pay(t, keys.PublishableTest, "order-1002", "")
		r, mine := e.pay(t, keys.SecretTest, "order-1002", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		if r.status != 201 || mine.ID == squat.ID || mine.Status != "pending" {
			t.Fatalf("the merchant's own order-1002: %d %s", r.status, r.body)
		}
		r = e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "again", body: payBody("order-1002", "")}).
			want(t, 422, xaalis.EValidation)
		if strings.Contains(string(r.body), "TXN-") || !slices.Equal(r.err.Errors["merchant_ref"], []string{"is already used"}) {
			t.Fatalf("refusal to a publishable key: %s", r.body)
		}
		// The secret key's lookups by merchant_ref find its own payment.
		var got txRecord
		e.do(call{method: "GET", path: "/v1/status/order-1002", key: keys.SecretTest}).want(t, 200, "").data(t, &got)
		if got.ID != mine.ID {
			t.Fatalf("status by merchant_ref found %s, want the secret key's %s", got.ID, mine.ID)
		}
		// A secret key's duplicate still names its record, for its owner.
		r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "dup", body: payBody("order-1002", "")}).
			want(t, 422, xaalis.EValidation)
		if !strings.Contains(r.err.Errors["merchant_ref"][0], mine.Reference) {
			t.Fatalf("secret duplicate: %s", r.body)
		}
	})
}

// TestWebhookScopes: every webhook route needs can_read_transactions;
// changing endpoints also needs can_initiate_payment.
func TestWebhookScopes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		key := func(scopes ...xaalis.Scope) string {
			_, secret, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest,
				Type: xaalis.KeySecret, Scopes: scopes})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		initiateOnly, readOnly := key(xaalis.ScopeInitiatePayment), key(xaalis.ScopeReadTransactions)
		epBody := `{"url":"https://attacker.example/collect","events":["*"]}`
		var ep struct{ ID string }
		e.do(call{method: "POST", path: "/v1/webhook-endpoints", key: keys.SecretTest, idem: "ep-ok", body: epBody}).want(t, 201, "").data(t, &ep)
		for _, c := range []struct {
			method, path, body, key string
			scope                   xaalis.Scope
		}{
			{"POST", "/v1/webhook-endpoints", epBody, initiateOnly, xaalis.ScopeReadTransactions},
			{"GET", "/v1/webhook-endpoints", "", initiateOnly, xaalis.ScopeReadTransactions},
			{"GET", "/v1/webhook-endpoints/" + ep.ID, "", initiateOnly, xaalis.ScopeReadTransactions},
			{"DELETE", "/v1/webhook-endpoints/" + ep.ID, "", initiateOnly, xaalis.ScopeReadTransactions},
			{"POST", "/v1/webhook-endpoints/" + ep.ID + "/rotate-secret", "", initiateOnly, xaalis.ScopeReadTransactions},
			{"POST", "/v1/webhooks/test", "", initiateOnly, xaalis.ScopeReadTransactions},
			{"GET", "/v1/webhooks/callback-secret", "", initiateOnly, xaalis.ScopeReadTransactions},
			{"POST", "/v1/webhook-endpoints", epBody, readOnly, xaalis.ScopeInitiatePayment},
			{"DELETE", "/v1/webhook-endpoints/" + ep.ID, "", readOnly, xaalis.ScopeInitiatePayment},
			{"POST", "/v1/webhook-endpoints/" + ep.ID + "/rotate-secret", "", readOnly, xaalis.ScopeInitiatePayment},
			{"POST", "/v1/webhooks/test", "", readOnly, xaalis.ScopeInitiatePayment},
		} {
			idem := ""
			if c.method != "GET" {
				idem = "scope-" + c.path + c.key[len(c.key)-4:]
			}
			r := e.do(call{method: c.method, path: c.path, key: c.key, idem: idem, body: c.body}).want(t, 403, xaalis.EScopeInsufficient)
			if r.err.Context["required_scope"] != string(c.scope) {
				t.Fatalf("%s %s: context %v, want required_scope %s", c.method, c.path, r.err.Context, c.scope)
			}
		}
		// Reading endpoints needs the read scope only.
		e.do(call{method: "GET", path: "/v1/webhook-endpoints", key: readOnly}).want(t, 200, "")
		e.do(call{method: "GET", path: "/v1/webhook-endpoints/" + ep.ID, key: readOnly}).want(t, 200, "")
	})
}

// TestInitiateOnlyKeyReadsNothing: reading needs can_read_transactions
// (DECISIONS), and a key with can_initiate_payment alone, which may verify
// and simulate a payment named by its merchant_ref, gets its reduced view:
// a narrow key read every payer's phone, name and metadata that way. A
// merchant_ref already used is not named to it either.
func TestInitiateOnlyKeyReadsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		_, narrow, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest,
			Type: xaalis.KeySecret, Scopes: []xaalis.Scope{xaalis.ScopeInitiatePayment}})
		if err != nil {
			t.Fatal(err)
		}
		payer := `"provider":"channel_a","payer":{"phone":"+221771234567","name":"Awa Diop"},"metadata":{"order":"secret-order"}`
		e.pay(t, keys.SecretTest, "order-1", payer)
		e.do(call{method: "GET", path: "/v1/payments/order-1", key: narrow}).want(t, 403, xaalis.EScopeInsufficient)
		hidden := func(what string, body []byte) {
			t.Helper()
			for _, s := range []string{"771234567", "Awa", "secret-order", "payment_url", "callback_url", "fee_amount"} {
				if strings.Contains(string(body), s) {
					t.Fatalf("%s shows %q to a key without the read scope: %s", what, s, body)
				}
			}
		}
		var v struct{ Status, Reference string }
		r := e.do(call{method: "POST", path: "/v1/payments/order-1/verify", key: narrow, idem: "v-1"}).want(t, 200, "")
		r.data(t, &v)
		hidden("verify", r.body)
		if v.Status != "pending" || !strings.HasPrefix(v.Reference, "TXN-") {
			t.Fatalf("verify: %s", r.body)
		}
		r = e.do(call{method: "POST", path: "/v1/test-helpers/payments/order-1/simulate", key: narrow, idem: "s-1",
			body: `{"outcome":"success"}`}).want(t, 200, "")
		r.data(t, &v)
		hidden("simulate", r.body)
		if v.Status != "success" {
			t.Fatalf("simulate: %s", r.body)
		}
		// A refund copies the payment's payer and metadata: its answer is
		// the reduced view too.
		r = e.do(call{method: "POST", path: "/v1/refunds", key: narrow, idem: "r-1",
			body: `{"transaction_id":"` + v.Reference + `","amount":1000}`}).want(t, 201, "")
		hidden("refund", r.body)
		// A key is the merchant's, not one API key's: replaying the full
		// key's request under its key gives the narrow key the reduced view.
		refund := `{"transaction_id":"` + v.Reference + `","amount":500}`
		full := e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "order-42-refund", body: refund}).want(t, 201, "")
		if !strings.Contains(string(full.body), "secret-order") {
			t.Fatalf("the full key's refund: %s", full.body)
		}
		r = e.do(call{method: "POST", path: "/v1/refunds", key: narrow, idem: "order-42-refund", body: refund}).want(t, 201, "")
		if r.header.Get("Idempotent-Replay") != "true" {
			t.Fatalf("not a replay: %v", r.header)
		}
		hidden("a replayed refund", r.body)
		var rv struct{ ID, Status string }
		r.data(t, &rv)
		var fv struct{ ID string }
		full.data(t, &fv)
		if rv.ID != fv.ID || rv.Status != "success" {
			t.Fatalf("the replay's reduced view: %s", r.body)
		}
		r = e.do(call{method: "POST", path: "/v1/payments", key: narrow, idem: "c-1",
			body: `{"merchant_ref":"order-1","amount":7000,"provider":"channel_a","payer":{"phone":"+221771234567"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`}).want(t, 422, xaalis.EValidation)
		if strings.Contains(string(r.body), "TXN-") {
			t.Fatalf("a used merchant_ref named to a key without the read scope: %s", r.body)
		}
		// The full key still reads it all; its verify and simulate,
		// replayed by the narrow key, are reduced as its refund was.
		r = e.do(call{method: "POST", path: "/v1/payments/order-1/verify", key: keys.SecretTest, idem: "v-2"}).want(t, 200, "")
		if !strings.Contains(string(r.body), "secret-order") {
			t.Fatalf("verify with the read scope: %s", r.body)
		}
		r = e.do(call{method: "POST", path: "/v1/payments/order-1/verify", key: narrow, idem: "v-2"}).want(t, 200, "")
		hidden("a replayed verify", r.body)
		simulate := `{"outcome":"failed"}`
		e.do(call{method: "POST", path: "/v1/test-helpers/payments/order-1/simulate", key: keys.SecretTest, idem: "s-2", body: simulate}).want(t, 200, "")
		r = e.do(call{method: "POST", path: "/v1/test-helpers/payments/order-1/simulate", key: narrow, idem: "s-2", body: simulate}).want(t, 200, "")
		hidden("a replayed simulate", r.body)
		// Its own payment creation, replayed, is whole: it made it, and
		// the payment URL is what it needs.
		own := `{"merchant_ref":"own-1","amount":7000,"provider":"channel_a","payer":{"phone":"+221771234567"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`
		first := e.do(call{method: "POST", path: "/v1/payments", key: narrow, idem: "own-1", body: own}).want(t, 201, "")
		again := e.do(call{method: "POST", path: "/v1/payments", key: narrow, idem: "own-1", body: own}).want(t, 201, "")
		if !strings.Contains(string(again.body), "payment_url") || string(again.body) != string(first.body) {
			t.Fatalf("its own creation, replayed: %s, first %s", again.body, first.body)
		}
		r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "c-2",
			body: `{"merchant_ref":"order-1","amount":7000,"provider":"channel_a","payer":{"phone":"+221771234567"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`}).want(t, 422, xaalis.EValidation)
		if !strings.Contains(string(r.body), "TXN-") {
			t.Fatalf("the used merchant_ref, to a full key: %s", r.body)
		}
	})
}

// TestBrowserCORS: a merchant's web page on its own origin creates a
// payment with its publishable key and polls its status: the preflights
// answer, and the answers (errors too) may be read by the page's script.
// Other routes answer no CORS.
func TestBrowserCORS(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		origin := map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type, idempotency-key"}
		r := e.do(call{method: "OPTIONS", path: "/v1/payments", header: origin}).want(t, 204, "")
		if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Methods") != "POST" ||
			!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Idempotency-Key") {
			t.Fatalf("preflight of POST /v1/payments: %v", r.header)
		}
		origin["Access-Control-Request-Method"] = "GET"
		r = e.do(call{method: "OPTIONS", path: "/v1/status/TXN-ANY", header: origin}).want(t, 204, "")
		if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Methods") != "GET" {
			t.Fatalf("preflight of GET /v1/status: %v", r.header)
		}
		page := map[string]string{"Origin": "https://shop.example"}
		r = e.do(call{method: "POST", path: "/v1/payments", key: keys.PublishableTest, idem: "cors-1", header: page,
			body: `{"merchant_ref":"cors-1","amount":5000,"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`}).want(t, 201, "")
		if r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
			t.Fatalf("payment creation from a page: %v", r.header)
		}
		var p struct{ Reference string }
		r.data(t, &p)
		r = e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: keys.PublishableTest, header: page}).want(t, 200, "")
		if r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("status from a page: %v", r.header)
		}
		// An error is readable too: the page can show why.
		r = e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: "pk_test_wrong", header: page}).want(t, 401, xaalis.EInvalidAPIKey)
		if r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("401 from a page: %v", r.header)
		}
		// A secret key's routes answer no CORS.
		r = e.do(call{method: "GET", path: "/v1/balance", key: keys.SecretTest, header: page}).want(t, 200, "")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("GET /v1/balance answered CORS: %v", r.header)
		}
	})
}

// TestReturnHostsOnPage: the hosted page returns the payer of a
// publishable payment only to the merchant's registered return hosts.
func TestReturnHostsOnPage(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		id, keys := e.merchant()
		_, p := e.pay(t, keys.PublishableTest, "ret-1", "")
		_, q := e.pay(t, keys.PublishableTest, "ret-2", "")
		for _, x := range []string{p.ID, q.ID} {
			e.cancelOnPage(x)
		}
		st := e.do(call{method: "GET", path: "/checkout/" + p.ID + "/status"}).want(t, 200, "")
		if !strings.Contains(string(st.body), `"redirect_url":"https://shop.example/ko?`) {
			t.Fatalf("status on a return host: %s", st.body)
		}
		// The merchant drops the host: the page no longer sends payers there.
		hosts := []string{"pay.shop.example"}
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{ReturnHosts: &hosts}); err != nil {
			t.Fatal(err)
		}
		st = e.do(call{method: "GET", path: "/checkout/" + q.ID + "/status"}).want(t, 200, "")
		if strings.Contains(string(st.body), "shop.example/ko") {
			t.Fatalf("status off the return hosts: %s", st.body)
		}
		page := e.do(call{method: "GET", path: "/checkout/" + q.ID + "?lang=en"}).want(t, 200, "")
		if strings.Contains(string(page.body), "https://shop.example/ko") {
			t.Fatal("the page links to a host that is no longer registered")
		}
	})
}

// TestPageNumbers: a page past the last is an empty list with the true
// current_page; past 1,000,000 a validation_error; never a 500.
func TestPageNumbers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.pay(t, keys.SecretTest, "pg-1", "")
		for _, path := range []string{"/v1/payments", "/v1/payouts", "/v1/disputes", "/v1/events", "/v1/plans", "/v1/customers",
			"/v1/subscriptions", "/v1/settlements", "/v1/webhook-endpoints"} {
			for _, page := range []int{5, 999_999, 1_000_000} {
				r := e.do(call{method: "GET", path: fmt.Sprintf("%s?page=%d&per_page=100", path, page), key: keys.SecretTest}).want(t, 200, "")
				var env struct {
					Data       []json.RawMessage
					Pagination xaalis.Pagination
				}
				if err := json.Unmarshal(r.body, &env); err != nil {
					t.Fatal(err)
				}
				if len(env.Data) != 0 || env.Pagination.CurrentPage != page {
					t.Fatalf("%s page %d: %d items, pagination %+v", path, page, len(env.Data), env.Pagination)
				}
			}
			r := e.do(call{method: "GET", path: path + "?page=1000001", key: keys.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["page"]) == 0 {
				t.Fatalf("%s: %v", path, r.err.Errors)
			}
			e.do(call{method: "GET", path: path + "?page=99999999999999999999", key: keys.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
		}
	})
}

// TestUnauthenticatedRoutesThrottled: the hosted page and provider
// notifications are limited per client address.
func TestUnauthenticatedRoutesThrottled(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) {
			c.PageRateLimit, c.PageRateBurst, c.NotifyRateLimit, c.NotifyRateBurst = 1, 5, 1, 3
		})
		_, keys := e.merchant()
		_, p := e.pay(t, keys.PublishableTest, "thr-1", "")
		limited := func(c call, n int) *response {
			for i := range n {
				r := e.do(c)
				if r.status == 429 {
					return r.want(t, 429, xaalis.ETooManyRequests)
				}
				if i == n-1 {
					t.Fatalf("%s %s: no 429 after %d requests (last %d)", c.method, c.path, n, r.status)
				}
			}
			return nil
		}
		r := limited(call{method: "GET", path: "/checkout/" + p.ID}, 10)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		limited(call{method: "POST", path: "/v1/providers/channel_a/notifications", body: `{}`}, 10)
		// API keys are limited by key, not by this address's page limit.
		e.do(call{method: "GET", path: "/v1/payments", key: keys.SecretTest}).want(t, 200, "")
	})
}

// TestLiveRoutesNeedCredentials: the embedded configuration carries no
// secrets, so live mode offers no provider until credentials are
// configured; and the emulator's published notification secret, which
// anyone can read, never settles a payment on a route with real
// credentials.
func TestLiveRoutesNeedCredentials(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t)) // the embedded configuration
		id, keys := e.merchant()
		kyc := xaalis.KYCApproved
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
			t.Fatal(err)
		}
		r, _ := e.pay(t, keys.SecretLive, "live-1", `"provider":"channel_a","payer":{"phone":"+221771234567"}`)
		r.want(t, 422, xaalis.EProviderUnavailable)
		var list []struct {
			ID      string
			Healthy bool
		}
		e.do(call{method: "GET", path: "/v1/providers", key: keys.SecretLive}).want(t, 200, "").data(t, &list)
		for _, p := range list {
			if p.Healthy {
				t.Fatalf("live provider %s offered without credentials", p.ID)
			}
		}
		// The test mode, simulated in process, needs no credentials.
		if r, _ := e.pay(t, keys.SecretTest, "test-1", `"provider":"channel_a","payer":{"phone":"+221771234567"}`); r.status != 201 {
			t.Fatalf("test mode: %d %s", r.status, r.body)
		}
	})
	eachBackend(t, func(t *testing.T, b backend) {
		// A provider reached with real credentials (the emulator plays it).
		emu := provider.NewEmulator(provider.EmulatorOptions{
			APIKeys:       map[string]string{"channel_b": "real-api-key-b"},
			NotifySecrets: map[string]string{"channel_b": "real-notify-secret-b"},
		})
		emuSrv := httptest.NewServer(emu)
		t.Cleanup(func() { emuSrv.Close(); emu.Close() })
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg, err := provider.EmulatorConfig(emuSrv.URL)
			if err != nil {
				t.Fatal(err)
			}
			spec := cfg.Providers["channel_b"]
			for i := range spec.Routes {
				spec.Routes[i].APIKey, spec.Routes[i].NotifySecret = "real-api-key-b", "real-notify-secret-b"
			}
			cfg.Providers["channel_b"] = spec
			a.Config = cfg
			a.Gateway = provider.New(cfg, provider.Options{})
		})
		id, keys := e.merchant()
		kyc := xaalis.KYCApproved
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
			t.Fatal(err)
		}
		_, p := e.pay(t, keys.SecretLive, "forge-1", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		if p.Status != "pending" {
			t.Fatalf("live payment %+v", p)
		}
		ev := provider.Event{EventID: "ev-forged", Type: provider.EventCollectionUpdated, Country: "SN",
			Collection: provider.EventCollection{ID: providerRef(t, e, p.ID), Status: "success"}}
		e.postNotification(t, "channel_b", xaalis.EmulatorNotifySecret("channel_b"), ev, time.Now()).want(t, 401, xaalis.EInvalidSignature)
		if st := e.status(t, keys.SecretLive, p.ID); st != "pending" {
			t.Fatalf("a forged notification moved the payment to %s", st)
		}
		var bal struct{ Available float64 }
		e.do(call{method: "GET", path: "/v1/balance", key: keys.SecretLive}).want(t, 200, "").data(t, &bal)
		if bal.Available != 0 {
			t.Fatalf("live balance credited: %v", bal.Available)
		}
		// The provider's own secret still works.

		if r := e.postNotification(t, "channel_b", "real-notify-secret-b", ev, time.Now()).want(t, 200, ""); !strings.Contains(string(r.body), `"ok"`) {
			t.Fatalf("genuine notification answered %s", r.body)
		}
		if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
			t.Fatalf("genuine notification: %s", st)
		}
	})
}

// TestOperatorTokens: operator tokens expire and are revoked; the admin
// access log and the audit log name the token used; the admin listener
// bounds bodies as the API does.
func TestOperatorTokens(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 200000)
		log := slog.New(slog.NewJSONHandler(e.logs, nil))
		cfg := xhttp.DefaultConfig()
		cfg.MaxBodyBytes = 1 << 10
		admin := httptest.NewServer(xhttp.NewAdmin(e.app, log, xhttp.NewServer(e.app, log, cfg, api.OpenAPI, nil), nil))
		t.Cleanup(admin.Close)
		ctx := context.Background()
		exp := e.clock.Now().Add(time.Hour)
		tok, secret, err := e.app.CreateOperatorToken(ctx, "night shift", &exp)
		if err != nil {
			t.Fatal(err)
		}
		post := func(path, body, token string) (int, []byte) {
			req := mustRequest(t, "POST", admin.URL+path, body)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(res.Body)
			return res.StatusCode, out
		}
		var pr struct{ ID string }
		for i := range 3 {
			e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: fmt.Sprint("pr-", i),
				body: `{"amount":10000,"currency":"XOF","destination_phone":"+221771112233","destination_bank":null,"merchant_note":"weekly"}`}).
				want(t, 201, "").data(t, &pr)
		}
		if st, body := post("/admin/v1/payout-requests/"+pr.ID+"/approve", "", secret); st != 200 {
			t.Fatalf("approve: %d %s", st, body)
		}
		// The access log names the token; the audit log too, with the
		// request and the record before and after.
		if !e.logged(`"operator_token_id":"` + tok.ID + `"`) {
			t.Fatal("the admin access log does not name the token")
		}
		entries, _, err := e.app.AuditLog(ctx, xaalis.PageRequest{Page: 1, PerPage: 10})
		if err != nil || len(entries) == 0 {
			t.Fatalf("audit log: %v %v", entries, err)
		}
		a := entries[0]
		if a.Action != "payout_request.approve" || a.TokenID != tok.ID || a.Actor != "night shift" || a.ObjectID != pr.ID ||
			!strings.Contains(string(a.Before), `"submitted"`) || !strings.Contains(string(a.After), `"approved"`) || a.RequestID == "" {
			t.Fatalf("audit entry %+v", a)
		}
		// Bodies are bounded as on the API.
		big := `{"reason":"` + strings.Repeat("x", 4<<10) + `"}`
		if st, body := post("/admin/v1/payout-requests/"+pr.ID+"/reject", big, secret); st != 413 {
			t.Fatalf("large body: %d %s", st, body)
		}
		// An expired token is refused; so is a revoked one.
		e.clock.Advance(2 * time.Hour)
		if st, _ := post("/admin/v1/payout-requests/"+pr.ID+"/complete", "", secret); st != 401 {
			t.Fatalf("expired token: %d", st)
		}
		_, other, err := e.app.CreateOperatorToken(ctx, "day shift", nil)
		if err != nil {
			t.Fatal(err)
		}
		list, err := e.app.OperatorTokens(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "day shift" {
			t.Fatalf("tokens %v %v", list, err)
		}
		if _, err := e.app.RevokeOperatorToken(ctx, list[0].ID); err != nil {
			t.Fatal(err)
		}
		if st, _ := post("/admin/v1/payout-requests/"+pr.ID+"/complete", "", other); st != 401 {
			t.Fatalf("revoked token: %d", st)
		}
		entries, _, _ = e.app.AuditLog(ctx, xaalis.PageRequest{Page: 1, PerPage: 1})
		if entries[0].Action != "operator_token.revoke" {
			t.Fatalf("revocation not audited: %+v", entries[0])
		}
	})
}

// TestConsoleAccessLog: the access log line of a console page names the
// operator token of its session, as an operator API request's does.
func TestConsoleAccessLog(t *testing.T) {
	e := newEnv(t, backends[0].open(t))
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	admin := httptest.NewServer(xhttp.NewAdmin(e.app, log, xhttp.NewServer(e.app, log, xhttp.DefaultConfig(), api.OpenAPI, nil), nil))
	t.Cleanup(admin.Close)
	ctx := context.Background()
	tok, secret, err := e.app.CreateOperatorToken(ctx, "console", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, cookie, err := e.app.SignIn(ctx, secret, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	req := mustRequest(t, "GET", admin.URL+"/console/", "")
	req.AddCookie(&http.Cookie{Name: "xaalis_console", Value: cookie})
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("console page: %d", res.StatusCode)
	}
	if !e.logged(`"operator_token_id":"` + tok.ID + `"`) {
		t.Fatal("the console's access log line does not name its session's token")
	}
}

// logged reports whether the server's log holds s within a few seconds:
// an access line is written once the answer has gone.
func (e *env) logged(s string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(e.logs.String(), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
