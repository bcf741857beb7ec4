package http_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// precheckRecord is a precheck's answer as a client reads it.
type precheckRecord struct {
	Object    string
	Allowed   bool
	Providers []precheckVerdict
	Payer     *struct {
		Phone, Country, Currency string
		Tier                     int
		Ceiling                  *string
		CeilingRemaining         *string `json:"ceiling_remaining"`
	}
}

// precheckVerdict is one provider's entry of a precheck.
type precheckVerdict struct {
	Provider string
	Allowed  bool
	Errors   []struct {
		Code    xaalis.Code
		Message string
		Context map[string]any
	}
}

// verdict is the named provider's entry; nil when it is not listed.
func (p precheckRecord) verdict(name string) *precheckVerdict {
	for i := range p.Providers {
		if p.Providers[i].Provider == name {
			return &p.Providers[i]
		}
	}
	return nil
}

// allowedProviders are the providers a precheck allows, in its order.
func (p precheckRecord) allowedProviders() []string {
	var out []string
	for _, v := range p.Providers {
		if v.Allowed {
			out = append(out, v.Provider)
		}
	}
	return out
}

// precheck sends POST /v1/payments/precheck without an Idempotency-Key.
func (e *env) precheck(t *testing.T, key, body string, invalid bool) (*response, precheckRecord) {
	t.Helper()
	r := e.do(call{method: "POST", path: "/v1/payments/precheck", key: key, body: body, invalid: invalid})
	var rec precheckRecord
	if r.status == 200 {
		r.data(t, &rec)
		if rec.Object != "payment_precheck" {
			t.Fatalf("object %q: %s", rec.Object, r.body)
		}
	}
	return r, rec
}

// writeWatch is a store that counts the writes made while armed (the
// precheck must make none) and the round trips reading volumes.
type writeWatch struct {
	xaalis.Store
	armed   atomic.Bool
	writes  atomic.Int64
	volumes atomic.Int64
}

func (w *writeWatch) Volume(ctx context.Context, q xaalis.VolumeQuery) (int64, error) {
	w.volumes.Add(1)
	return w.Store.Volume(ctx, q)
}

func (w *writeWatch) Volumes(ctx context.Context, qs []xaalis.VolumeQuery) ([]int64, error) {
	w.volumes.Add(1)
	return w.Store.Volumes(ctx, qs)
}

var errWatched = errors.New("write refused while the precheck runs")

func (w *writeWatch) write() error {
	if w.armed.Load() {
		w.writes.Add(1)
		return errWatched
	}
	return nil
}

func (w *writeWatch) Update(ctx context.Context, fn func(xaalis.Tx) error) error {
	if err := w.write(); err != nil {
		return err
	}
	return w.Store.Update(ctx, fn)
}

func (w *writeWatch) ClaimIdempotency(ctx context.Context, c xaalis.Claim) (xaalis.ClaimResult, error) {
	if err := w.write(); err != nil {
		return xaalis.ClaimResult{}, err
	}
	return w.Store.ClaimIdempotency(ctx, c)
}

func (w *writeWatch) CompleteIdempotency(ctx context.Context, s xaalis.IdempotencyScope, token string, r xaalis.StoredResponse) error {
	if err := w.write(); err != nil {
		return err
	}
	return w.Store.CompleteIdempotency(ctx, s, token, r)
}

// limitedConfig gives the merchant floor 150, ceiling 100000, daily
// 300000 and monthly 400000 XOF; the phone +221775550000 is tier 1
// (20000 XOF over 30 days), every other tier 2; channel_c's daily limit
// is 15000 XOF.
func limitedConfig(_ *xhttp.Config, a *xaalis.App) {
	cfg := *a.Config
	cfg.MerchantLimits = xaalis.Limits{MinAmount: 150, MaxAmount: 100000, Daily: 300000, Monthly: 400000}
	cfg.BCEAO.Phones = map[string]int{"+221775550000": 1}
	cfg.BCEAO.Tiers = []xaalis.BCEAOTier{{Tier: 1, Ceiling: 20000}, {Tier: 2, Ceiling: 10000000}}
	cfg.BCEAO.DefaultTier = 2
	providers := map[string]xaalis.ProviderSpec{}
	for name, spec := range cfg.Providers {
		providers[name] = spec
	}
	c := providers["channel_c"]
	c.DailyLimit = 15000
	providers["channel_c"] = c
	cfg.Providers = providers
	a.Config = &cfg
}

// totals counts what a merchant's key sees: payments, customers, events.
func (e *env) totals(t *testing.T, key string) string {
	t.Helper()
	var out []string
	for _, path := range []string{"/v1/payments", "/v1/customers", "/v1/events"} {
		r := e.do(call{method: "GET", path: path + "?per_page=1", key: key}).want(t, 200, "")
		m := regexp.MustCompile(`"total":(\d+)`).FindSubmatch(r.body)
		if m == nil {
			t.Fatalf("%s: no total: %s", path, r.body)
		}
		out = append(out, path+"="+string(m[1]))
	}
	return strings.Join(out, " ")
}

// payoutOnlyCodes are the codes of the validation group that payment
// creation never answers: payouts' own.
var payoutOnlyCodes = map[xaalis.Code]string{
	xaalis.EPayoutsDisabled:           "payouts only",
	xaalis.EProviderPayoutUnsupported: "payouts only",
	xaalis.EInsufficientBalance:       "payouts and splits only",
}

// agreeCase is a scenario in which creation answers 422 code.
type agreeCase struct {
	name string
	code xaalis.Code
	// setup prepares the scenario for the case's own merchant.
	setup func(t *testing.T, e *env, mid string, keys xaalis.MerchantKeys)
	live  bool   // with the live secret key
	ref   string // merchant_ref; default: one of the case's own
	extra string // fields of the body beside merchant_ref and the URLs
	// refused lists the providers the precheck refuses with code, first
	// of their errors; nil: the precheck answers 422 code itself.
	refused []string
	invalid bool // the body breaks the contract on purpose
}

// TestPrecheckAgreesWithCreation: for every 422 code that creation can
// answer, the precheck of the same body answers it too (422 for what is
// wrong with the body or the account, else listed under the providers it
// concerns, first in their errors, with creation's message and context),
// writes nothing and creates nothing; then creation answers it.
func TestPrecheckAgreesWithCreation(t *testing.T) {
	all := []string{"channel_a", "channel_b", "channel_c"}
	cases := []agreeCase{
		{name: "ValidationError", code: xaalis.EValidation, extra: `"amount":5000,"currency":"GBP"`, invalid: true},
		{name: "MerchantRefUsed", code: xaalis.EValidation, ref: "taken-1", extra: `"amount":5000`,
			setup: func(t *testing.T, e *env, _ string, keys xaalis.MerchantKeys) {
				e.pay(t, keys.SecretTest, "taken-1", "")
			}},
		{name: "AmountMustBePositive", code: xaalis.EAmountMustBePositive, extra: `"amount":0`},
		{name: "InvalidPhoneNumber", code: xaalis.EInvalidPhoneNumber, extra: `"amount":5000,"payer":{"phone":"+2250707123456"}`},
		{name: "MerchantInactive", code: xaalis.EMerchantInactive, extra: `"amount":5000`,
			setup: func(t *testing.T, e *env, mid string, _ xaalis.MerchantKeys) {
				st := xaalis.MerchantSuspended
				if _, err := e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{Status: &st}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "MerchantKYCRequired", code: xaalis.EMerchantKYCRequired, live: true, extra: `"amount":5000`},
		{name: "ProviderUnavailable", code: xaalis.EProviderUnavailable, extra: `"amount":5000,"provider":"channel_z"`,
			refused: []string{"channel_z"}, invalid: true},
		{name: "ProviderCountryUnsupported", code: xaalis.EProviderCountryUnsupported,
			extra: `"amount":5000,"provider":"channel_c","country":"CI"`, refused: []string{"channel_c"}},
		{name: "MerchantProviderNotAuthorized", code: xaalis.EMerchantProviderNotAuthorized,
			extra: `"amount":5000,"provider":"channel_a"`, refused: []string{"channel_a"},
			setup: func(t *testing.T, e *env, mid string, _ xaalis.MerchantKeys) {
				only := []string{"channel_b"}
				if _, err := e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{AllowedProviders: &only}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "FeesUnavailable", code: xaalis.EFeesUnavailable, extra: `"amount":5000,"provider":"channel_a","country":"GW"`,
			refused: []string{"channel_a"}},
		{name: "AmountBelowMerchantMinimum", code: xaalis.EAmountBelowMerchantMinimum, extra: `"amount":100`, refused: all},
		{name: "AmountBelowProviderMinimum", code: xaalis.EAmountBelowProviderMinimum,
			extra: `"amount":200,"provider":"channel_c"`, refused: []string{"channel_c"}},
		{name: "AmountAboveMerchantMaximum", code: xaalis.EAmountAboveMerchantMaximum, extra: `"amount":100001`, refused: all},
		{name: "DailyLimitExceeded", code: xaalis.EDailyLimitExceeded,
			extra: `"amount":6000,"provider":"channel_c","payer":{"phone":"+221771234501"}`, refused: []string{"channel_c"},
			setup: func(t *testing.T, e *env, _ string, keys xaalis.MerchantKeys) {
				r, _ := e.pay(t, keys.SecretTest, "fill-c", `"amount":10000,"provider":"channel_c","payer":{"phone":"+221771234500"}`)
				r.want(t, 201, "")
			}},
		{name: "MerchantLimitExceeded", code: xaalis.EMerchantLimitExceeded, extra: `"amount":200`, refused: all,
			setup: func(t *testing.T, e *env, _ string, keys xaalis.MerchantKeys) {
				for i := range 3 {
					r, _ := e.pay(t, keys.SecretTest, fmt.Sprint("fill-m-", i), fmt.Sprintf(`"amount":100000,"provider":"channel_a","payer":{"phone":"+22177123460%d"}`, i))
					r.want(t, 201, "")
				}
			}},
		{name: "BCEAOLimitExceeded", code: xaalis.EBCEAOLimitExceeded, extra: `"amount":6000,"payer":{"phone":"+221775550000"}`,
			refused: all,
			setup: func(t *testing.T, e *env, _ string, keys xaalis.MerchantKeys) {
				r, _ := e.pay(t, keys.SecretTest, "fill-p", `"amount":15000,"provider":"channel_b","payer":{"phone":"+221775550000"}`)
				r.want(t, 201, "")
			}},
	}

	// Every code of the payment validation group is in the table, but
	// the payouts' own.
	for _, c := range xaalis.Catalogue {
		if c.Group != "Payment and payout validation" || payoutOnlyCodes[c.Code] != "" {
			continue
		}
		if !slices.ContainsFunc(cases, func(k agreeCase) bool { return k.code == c.Code }) {
			t.Errorf("no case for %s, which payment creation answers", c.Code)
		}
	}

	eachBackend(t, func(t *testing.T, b backend) {
		store := &writeWatch{Store: b.open(t)}
		e := newEnv(t, store, limitedConfig)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				mid, keys := e.merchant()
				if c.setup != nil {
					c.setup(t, e, mid, keys)
				}
				key := keys.SecretTest
				if c.live {
					key = keys.SecretLive
				}
				ref := c.ref
				if ref == "" {
					ref = fmt.Sprint("agree-", i)
				}
				body := payBody(ref, c.extra)
				before := e.totals(t, key)

				store.armed.Store(true)
				r, pre := e.precheck(t, key, body, c.invalid)
				// A key sent anyway is ignored: same answer, nothing stored.
				again := e.do(call{method: "POST", path: "/v1/payments/precheck", key: key, body: body, idem: "pre-" + c.name, invalid: c.invalid})
				store.armed.Store(false)
				if n := store.writes.Load(); n != 0 {
					t.Fatalf("the precheck wrote %d times", n)
				}
				if again.status != r.status || string(again.body) != string(r.body) || again.header.Get("Idempotent-Replay") != "" {
					t.Fatalf("with an Idempotency-Key: %d %s, without: %d %s", again.status, again.body, r.status, r.body)
				}
				if _, err := e.app.Store.IdempotencyKey(context.Background(), xaalis.IdempotencyScope{MerchantID: mid,
					Mode: modeOf(c.live), KeyType: xaalis.KeySecret, Key: "pre-" + c.name}); !errors.Is(err, xaalis.ErrNotFound) {
					t.Fatalf("the precheck's Idempotency-Key was stored: %v", err)
				}
				if after := e.totals(t, key); after != before {
					t.Fatalf("the precheck created something: %s, then %s", before, after)
				}

				var want struct {
					message string
					context map[string]any
				}
				if c.refused == nil {
					r.want(t, 422, c.code)
					want.message, want.context = r.err.Message, r.err.Context
				} else {
					r.want(t, 200, "")
					if pre.Allowed || len(pre.Providers) != len(c.refused) {
						t.Fatalf("precheck: %s", r.body)
					}
					for _, name := range c.refused {
						v := pre.verdict(name)
						if v == nil || v.Allowed || len(v.Errors) == 0 || v.Errors[0].Code != c.code {
							t.Fatalf("%s: %+v: %s", name, v, r.body)
						}
					}
					first := pre.verdict(c.refused[0]).Errors[0]
					want.message, want.context = first.Message, first.Context
				}

				created := e.do(call{method: "POST", path: "/v1/payments", key: key, idem: "create-" + c.name, body: body, invalid: c.invalid})
				created.want(t, 422, c.code)
				if created.err.Message != want.message || !sameContext(created.err.Context, want.context) {
					t.Fatalf("creation answers %q %v, the precheck %q %v", created.err.Message, created.err.Context, want.message, want.context)
				}
				if c.refused == nil && !reflect.DeepEqual(created.err.Errors, r.err.Errors) {
					t.Fatalf("fields: creation %v, precheck %v", created.err.Errors, r.err.Errors)
				}
			})
		}
	})
}

func modeOf(live bool) xaalis.Mode {
	if live {
		return xaalis.ModeLive
	}
	return xaalis.ModeTest
}

// sameContext compares two error contexts, absent and empty alike.
func sameContext(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// TestPrecheckAllowed: a body every check accepts is allowed, with the
// payer's room, without merchant_ref or URLs and without Idempotency-Key;
// the payer's room shrinks with a payment; creation then succeeds.
func TestPrecheckAllowed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := &writeWatch{Store: b.open(t)}
		e := newEnv(t, store, limitedConfig)
		_, keys := e.merchant()
		const phone = "+221775550000" // tier 1: 20000 XOF over 30 days
		body := `{"amount":5000,"provider":"channel_b","payer":{"phone":"77 555 00 00"}}`

		r, pre := e.precheck(t, keys.SecretTest, body, false)
		r.want(t, 200, "")
		if !pre.Allowed || len(pre.Providers) != 1 || !pre.Providers[0].Allowed || pre.Providers[0].Provider != "channel_b" ||
			pre.Providers[0].Errors == nil || len(pre.Providers[0].Errors) != 0 || strings.Contains(string(r.body), `"livemode":true`) ||
			!strings.HasSuffix(strings.TrimSpace(string(r.body)), `"livemode":false}`) {
			t.Fatalf("precheck: %s", r.body)
		}
		p := pre.Payer
		if p == nil || p.Phone != phone || p.Country != "SN" || p.Tier != 1 || p.Currency != "XOF" ||
			p.Ceiling == nil || *p.Ceiling != "20000.00" || p.CeilingRemaining == nil || *p.CeilingRemaining != "20000.00" {
			t.Fatalf("payer: %s", r.body)
		}

		// A pending payment of the payer holds room.
		e.pay(t, keys.SecretTest, "room-1", `"amount":5000,"provider":"channel_b","payer":{"phone":"`+phone+`"}`)
		_, pre = e.precheck(t, keys.SecretTest, body, false)
		if !pre.Allowed || pre.Payer == nil || *pre.Payer.CeilingRemaining != "15000.00" {
			t.Fatalf("after a payment: %+v", pre.Payer)
		}

		// Every volume of every provider, the merchant and the payer is
		// read in one round trip.
		store.volumes.Store(0)
		_, pre = e.precheck(t, keys.SecretTest, `{"amount":5000,"payer":{"phone":"`+phone+`"}}`, false)
		if n := store.volumes.Load(); n != 1 || len(pre.Providers) != 3 || !pre.Allowed {
			t.Fatalf("%d reads of volumes for %+v", n, pre)
		}
		// Without a provider: every provider of the country, each allowed;
		// without a phone: no payer block.
		r, pre = e.precheck(t, keys.SecretTest, `{"amount":5000}`, false)
		if !pre.Allowed || !slices.Equal(pre.allowedProviders(), []string{"channel_a", "channel_b", "channel_c"}) || pre.Payer != nil ||
			!strings.Contains(string(r.body), `"payer":null`) {
			t.Fatalf("hosted checkout: %s", r.body)
		}
		// In Côte d'Ivoire channel_c does not serve: it is not listed.
		_, pre = e.precheck(t, keys.SecretTest, `{"amount":5000,"country":"CI"}`, false)
		if got := pre.allowedProviders(); !slices.Equal(got, []string{"channel_a", "channel_b"}) || len(pre.Providers) != 2 {
			t.Fatalf("CI: %v", got)
		}
		// merchant_ref and the URLs are checked when given.
		for _, c := range []struct {
			body, field string
			invalid     bool
		}{
			{`{"amount":5000,"success_url":"ftp://x"}`, "success_url", false},
			{`{"amount":5000,"merchant_ref":"` + strings.Repeat("r", 101) + `"}`, "merchant_ref", false},
			{`{}`, "amount", true},
		} {
			r, _ := e.precheck(t, keys.SecretTest, c.body, c.invalid)
			if r.want(t, 422, xaalis.EValidation); len(r.err.Errors[c.field]) == 0 || len(r.err.Errors) != 1 {
				t.Fatalf("%s: %v", c.body, r.err.Errors)
			}
		}

		r2, rec := e.pay(t, keys.SecretTest, "room-2", `"amount":5000,"provider":"channel_b","payer":{"phone":"77 555 00 00"}`)
		r2.want(t, 201, "")
		if rec.Status != "pending" {
			t.Fatalf("creation after the precheck: %s", r2.body)
		}
		// Its merchant_ref is taken now: the precheck refuses it as
		// creation would, naming the payment.
		r, _ = e.precheck(t, keys.SecretTest, payBody("room-2", `"amount":5000`), false)
		if r.want(t, 422, xaalis.EValidation); !strings.Contains(r.err.Errors["merchant_ref"][0], rec.Reference) {
			t.Fatalf("merchant_ref used: %v", r.err.Errors)
		}
	})
}

// TestPrecheckAccess: secret keys with can_initiate_payment only; the
// route is not captured by /v1/payments/{id} patterns, nor captures them;
// its body is bounded.
func TestPrecheckAccess(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		body := `{"amount":5000,"payer":{"phone":"+221771234567"}}`

		// A publishable key is public: it must not learn a payer's room.
		r := e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.PublishableTest, body: body}).want(t, 403, xaalis.EForbidden)
		if strings.Contains(string(r.body), "ceiling") {
			t.Fatalf("publishable key: %s", r.body)
		}
		_, readOnly, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest,
			Type: xaalis.KeySecret, Scopes: []xaalis.Scope{xaalis.ScopeReadTransactions}})
		if err != nil {
			t.Fatal(err)
		}
		r = e.do(call{method: "POST", path: "/v1/payments/precheck", key: readOnly, body: body}).want(t, 403, xaalis.EScopeInsufficient)
		if r.err.Context["required_scope"] != "can_initiate_payment" {
			t.Fatalf("context %v", r.err.Context)
		}
		e.do(call{method: "POST", path: "/v1/payments/precheck", body: body}).want(t, 401, xaalis.ECredentialsMissing)
		e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.SecretTest, body: `{"amount":`, invalid: true}).want(t, 400, xaalis.EInvalidRequest)
		big := `{"amount":5000,"metadata":{"k":"` + strings.Repeat("x", 2<<20) + `"}}`
		e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.SecretTest, body: big}).want(t, 413, xaalis.ERequestTooLarge)

		// A payment whose merchant_ref is "precheck" is verified at
		// /v1/payments/{id}/verify and read by /v1/status; GET on the
		// precheck's concrete path is 405, as the contract routes it.
		e.pay(t, keys.SecretTest, "precheck", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		var got txRecord
		e.do(call{method: "GET", path: "/v1/status/precheck", key: keys.SecretTest}).want(t, 200, "").data(t, &got)
		if got.MerchantRef == nil || *got.MerchantRef != "precheck" {
			t.Fatalf("GET /v1/status/precheck: %+v", got)
		}
		r = e.do(call{method: "GET", path: "/v1/payments/precheck", key: keys.SecretTest}).want(t, 405, xaalis.EMethodNotAllowed)
		if r.header.Get("Allow") != "POST" {
			t.Fatalf("Allow: %q", r.header.Get("Allow"))
		}
		e.do(call{method: "GET", path: "/v1/payments/" + got.ID, key: keys.SecretTest}).want(t, 200, "")
		e.do(call{method: "POST", path: "/v1/payments/precheck/verify", key: keys.SecretTest, idem: "verify-precheck"}).want(t, 200, "").data(t, &got)
		if got.Status != "pending" {
			t.Fatalf("verify: %+v", got)
		}
		e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.SecretTest, body: body}).want(t, 200, "")
	})
}

// TestPrecheckRouteHealth: a live provider whose every route's circuit
// breaker is open is refused with gateway_unavailable, as creation then
// answers (503); the others stay allowed, and the hosted page does not
// offer it.
func TestPrecheckRouteHealth(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Down: true}); err != nil {
			t.Fatal(err)
		}
		body := `{"amount":5000,"provider":"channel_c","payer":{"phone":"+221771234580"}}`
		_, pre := e.precheck(t, keys.SecretLive, body, false)
		if !pre.Allowed {
			t.Fatal("refused before any failure: the breaker is closed")
		}
		// Three failures open channel_c's only route's breaker.
		for i := range 3 {
			r, _ := e.pay(t, keys.SecretLive, fmt.Sprint("down-", i), `"provider":"channel_c","payer":{"phone":"+22177123458`+fmt.Sprint(i+1)+`"}`)
			r.want(t, 503, xaalis.EGatewayUnavailable)
		}
		r, pre := e.precheck(t, keys.SecretLive, body, false)
		v := pre.verdict("channel_c")
		if pre.Allowed || v == nil || len(v.Errors) != 1 || v.Errors[0].Code != xaalis.EGatewayUnavailable ||
			v.Errors[0].Context["provider"] != "channel_c" || r.header.Get("Retry-After") != "" {
			t.Fatalf("precheck: %s", r.body)
		}
		created, _ := e.pay(t, keys.SecretLive, "down-9", `"amount":5000,"provider":"channel_c","payer":{"phone":"+221771234580"}`)
		created.want(t, 503, xaalis.EGatewayUnavailable)

		_, pre = e.precheck(t, keys.SecretLive, `{"amount":5000}`, false)
		if got := pre.allowedProviders(); !pre.Allowed || !slices.Equal(got, []string{"channel_a", "channel_b"}) {
			t.Fatalf("allowed: %v", got)
		}
		_, p := e.pay(t, keys.SecretLive, "hosted-down", "")
		if got := offered(t, e, p.ID); !slices.Equal(got, []string{"channel_a", "channel_b"}) {
			t.Fatalf("the page offers %v", got)
		}
	})
}

// offered are the providers the hosted page of a payment offers.
func offered(t *testing.T, e *env, id string) []string {
	t.Helper()
	page := e.do(call{method: "GET", path: "/checkout/" + id + "?lang=en"}).want(t, 200, "")
	var out []string
	for _, m := range regexp.MustCompile(`data-provider="([a-z_]+)"`).FindAllSubmatch(page.body, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// TestHostedPageAgreesWithPrecheck: the hosted page offers exactly the
// providers the precheck of the payment's body allows, none when the
// payer's ceiling is reached.
func TestHostedPageAgreesWithPrecheck(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), limitedConfig)
		mid, keys := e.merchant()
		for i, c := range []struct {
			name, extra string
			allow       []string // the merchant's allow-list; nil: all
			fill        string   // a payment made after this one's creation
			want        []string
		}{
			{"all", `"amount":5000`, nil, "", []string{"channel_a", "channel_b", "channel_c"}},
			// channel_c's floor is 500 XOF, channel_b's 200.
			{"floors", `"amount":300`, nil, "", []string{"channel_a", "channel_b"}},
			{"allow-list", `"amount":300`, []string{"channel_a", "channel_c"}, "", []string{"channel_a"}},
			// Since the payment was made, the payer paid 15000 more of a
			// 20000 ceiling.
			{"payer ceiling", `"amount":6000,"payer":{"phone":"+221775550000"}`, nil,
				`"amount":15000,"provider":"channel_b","payer":{"phone":"+221775550000"}`, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				allow := c.allow
				if allow == nil {
					allow = []string{}
				}
				if _, err := e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{AllowedProviders: &allow}); err != nil {
					t.Fatal(err)
				}
				r, p := e.pay(t, keys.SecretTest, fmt.Sprint("page-", i), c.extra)
				r.want(t, 201, "")
				if c.fill != "" {
					r, _ := e.pay(t, keys.SecretTest, fmt.Sprint("page-fill-", i), c.fill)
					r.want(t, 201, "")
				}
				_, pre := e.precheck(t, keys.SecretTest, "{"+c.extra+"}", false)
				if got := pre.allowedProviders(); !slices.Equal(got, c.want) {
					t.Fatalf("the precheck allows %v, want %v", got, c.want)
				}
				page := e.do(call{method: "GET", path: "/checkout/" + p.ID + "?lang=en"}).want(t, 200, "")
				if got := offered(t, e, p.ID); !slices.Equal(got, c.want) {
					t.Fatalf("the page offers %v, the precheck allows %v", got, c.want)
				}
				if c.want == nil && !strings.Contains(string(page.body), `id="step-no-provider"`) {
					t.Fatalf("no provider, and the page does not say so")
				}
			})
		}
	})
}
