package http_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// txRecord is the transaction record as a client reads it.
type txRecord struct {
	ID, Object, Type, Reference, Status, Amount, Currency, Country string
	MerchantRef                                                    *string `json:"merchant_ref"`
	MerchantReference                                              *string `json:"merchant_reference"`
	Provider                                                       *string
	Route                                                          *struct{ Name, Reason string }
	PaymentURL                                                     *string `json:"payment_url"`
	CheckoutURL                                                    *string `json:"checkout_url"`
	NextAction                                                     *struct {
		Type, USSDCode, RedirectURL string
	} `json:"next_action"`
	Payer              struct{ Phone, Name *string }
	CustomerID         *string `json:"customer_id"`
	Metadata           map[string]string
	FailureReason      *string `json:"failure_reason"`
	ExchangeRate       string  `json:"exchange_rate"`
	SettlementAmount   string  `json:"settlement_amount"`
	SettlementCurrency string  `json:"settlement_currency"`
	Livemode           bool
	ExpiresAt          time.Time `json:"expires_at"`
}

// payBody is a valid creation body; extra fields are merged in.
func payBody(ref string, extra string) string {
	amount := `"amount":5000,`
	if strings.Contains(extra, `"amount":`) {
		amount = "" // the extra fields carry their own
	}
	b := `{"merchant_ref":"` + ref + `",` + amount + `"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

func (e *env) pay(t *testing.T, key, ref, extra string) (*response, txRecord) {
	t.Helper()
	r := e.do(call{method: "POST", path: "/v1/payments", key: key, idem: "pay-" + ref, body: payBody(ref, extra)})
	var rec txRecord
	if r.status == 201 {
		r.data(t, &rec)
	}
	return r, rec
}

func (e *env) events(t *testing.T, id string) []string {
	t.Helper()
	evs, err := e.app.Store.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func TestPaymentCreate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()

		t.Run("OKHostedCheckout", func(t *testing.T) {
			r, p := e.pay(t, keys.SecretTest, "order-1", `"metadata":{"order_id":"A1","n":3}`)
			r.want(t, 201, "")
			if p.Object != "transaction" || p.Type != "payment" || p.Status != "initiated" || p.Amount != "5000.00" ||
				p.Currency != "XOF" || p.Country != "SN" || p.Provider != nil || p.NextAction != nil || p.Livemode ||
				len(p.Reference) != 20 || !strings.HasPrefix(p.Reference, "TXN-") || *p.MerchantRef != "order-1" ||
				*p.MerchantReference != "order-1" || p.Metadata["order_id"] != "A1" || p.Metadata["n"] != "3" {
				t.Fatalf("record: %s", r.body)
			}
			if p.PaymentURL == nil || *p.PaymentURL != e.srv.URL+"/checkout/"+p.ID || *p.CheckoutURL != *p.PaymentURL {
				t.Fatalf("payment_url: %v", p.PaymentURL)
			}
			if d := time.Until(p.ExpiresAt); d < 29*time.Minute || d > 31*time.Minute {
				t.Fatalf("expires_at %v: not 1800 s away", p.ExpiresAt)
			}
		})
		t.Run("OKProviderGiven", func(t *testing.T) {
			for i, c := range []struct {
				provider, next string
			}{{"channel_a", "redirect"}, {"channel_b", "otp"}, {"channel_c", "ussd"}} {
				r, p := e.pay(t, keys.SecretTest, fmt.Sprint("prov-", i), `"provider":"`+c.provider+`","payer":{"phone":"77 123 45 67","name":"Awa"}`)
				r.want(t, 201, "")
				if p.Status != "pending" || *p.Provider != c.provider || p.NextAction == nil || p.NextAction.Type != c.next ||
					p.Route == nil || p.Route.Name != "simulator" || *p.Payer.Phone != "+221771234567" || *p.Payer.Name != "Awa" || p.CustomerID == nil {
					t.Fatalf("%s: %s", c.provider, r.body)
				}
			}
		})
		t.Run("OKPayerForms", func(t *testing.T) {
			var customers []string
			for i, form := range []string{
				`"payer":{"phone":"+221771112233"}`, `"phone":"771112233"`, `"payer_phone":"+221 77 111 22 33"`,
				`"customer":{"msisdn":"00221771112233"}`,
			} {
				r, p := e.pay(t, keys.SecretTest, fmt.Sprint("form-", i), form)
				r.want(t, 201, "")
				if p.Payer.Phone == nil || *p.Payer.Phone != "+221771112233" || p.CustomerID == nil {
					t.Fatalf("%s: %s", form, r.body)
				}
				customers = append(customers, *p.CustomerID)
			}
			for _, c := range customers {
				if c != customers[0] {
					t.Fatal("one phone, several customers")
				}
			}
			// One number in two forms agrees (DECISIONS: "two forms that
			// disagree" are refused).
			r, p := e.pay(t, keys.SecretTest, "form-same", `"payer":{"phone":"+221771112233"},"phone":"77 111 22 33","customer":{"msisdn":"00221771112233"}`)
			r.want(t, 201, "")
			if p.Payer.Phone == nil || *p.Payer.Phone != "+221771112233" {
				t.Fatalf("one number in three forms: %s", r.body)
			}
			r, _ = e.pay(t, keys.SecretTest, "form-x", `"payer":{"phone":"+221771112233"},"phone":"+221779998877"`)
			r.want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["phone"]) == 0 {
				t.Fatalf("disagreeing forms: %v", r.err.Errors)
			}
		})
		t.Run("OKPublishableKey", func(t *testing.T) {
			_, p := e.pay(t, keys.PublishableTest, "pk-1", "")
			if p.Status != "initiated" {
				t.Fatalf("pk payment: %+v", p)
			}
			e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: keys.PublishableTest}).want(t, 200, "")
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.PublishableTest}).want(t, 403, xaalis.EForbidden)
		})
		t.Run("OKFX", func(t *testing.T) {
			r, p := e.pay(t, keys.SecretTest, "fx-1", `"currency":"EUR","amount":10`)
			r.want(t, 201, "")
			// 10 EUR at the fixed parity 655.957 is 6559.57 XOF.
			if p.Currency != "EUR" || p.Amount != "10.00" || p.ExchangeRate != "655.957" || p.SettlementAmount != "6559.57" || p.SettlementCurrency != "XOF" {
				t.Fatalf("fx: %s", r.body)
			}
		})
		t.Run("OKMerchantRefResume", func(t *testing.T) {
			e.pay(t, keys.SecretTest, "dup-1", "")
			r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "dup-1-again", body: payBody("dup-1", "")})
			r.want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["merchant_ref"]) == 0 {
				t.Fatalf("duplicate merchant_ref: %s", r.body)
			}
		})
	})
}

func TestPaymentValidation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.MerchantLimits = xaalis.Limits{MinAmount: 150, MaxAmount: 100000, Daily: 300000, Monthly: 400000}
			cfg.BCEAO.Phones = map[string]int{"+221775550000": 1}
			cfg.BCEAO.Tiers = []xaalis.BCEAOTier{{Tier: 1, Ceiling: 20000}, {Tier: 2, Ceiling: 10000000}}
			cfg.BCEAO.DefaultTier = 2
			p := cfg.Providers["channel_c"]
			p.DailyLimit = 15000
			cfg.Providers = map[string]xaalis.ProviderSpec{"channel_a": cfg.Providers["channel_a"], "channel_b": cfg.Providers["channel_b"], "channel_c": p}
			a.Config = &cfg
		})
		mid, keys := e.merchant()
		n := 0
		post := func(key, extra string, amount int) *response {
			n++
			body := strings.Replace(payBody(fmt.Sprint("v-", n), extra), `"amount":5000`, fmt.Sprintf(`"amount":%d`, amount), 1)
			return e.do(call{method: "POST", path: "/v1/payments", key: key, idem: fmt.Sprint("v-", n), body: body, invalid: true})
		}
		ctxOf := func(r *response, k string) any { return r.err.Context[k] }

		t.Run("ErrValidation", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "val-0", body: `{"amount":5000,"currency":"GBP","country":"FR","success_url":"ftp://x","expires_in":5}`, invalid: true}).
				want(t, 422, xaalis.EValidation)
			for _, f := range []string{"merchant_ref", "currency", "country", "success_url", "failed_url", "expires_in"} {
				if len(r.err.Errors[f]) == 0 {
					t.Errorf("no error for %s: %v", f, r.err.Errors)
				}
			}
			var sb strings.Builder
			for i := range 21 {
				fmt.Fprintf(&sb, `"k%d":"v",`, i)
			}
			r = post(keys.SecretTest, `"metadata":{`+strings.TrimSuffix(sb.String(), ",")+`}`, 5000).want(t, 422, xaalis.EValidation)
			// Told once: the request's count and the kept metadata's both
			// find it.
			if got := r.err.Errors["metadata"]; len(got) != 1 {
				t.Errorf("21 metadata keys: want one message on metadata, got %v", r.err.Errors)
			}
			// Lengths are counted in characters, not bytes: a merchant_ref
			// of 100 characters, a metadata key of 40 and a value of 500,
			// each twice as many bytes, pass; one character more does not.
			e1 := func(n int) string { return strings.Repeat("é", n) }
			n++
			r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: fmt.Sprint("v-", n),
				body: payBody(e1(100), `"metadata":{"`+e1(40)+`":"`+e1(500)+`"}`)}).want(t, 201, "")
			for field, extra := range map[string]string{"merchant_ref": "", "metadata.k": `"metadata":{"k":"` + e1(501) + `"}`} {
				ref := "len-" + field
				if field == "merchant_ref" {
					ref = e1(101)
				}
				n++
				r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: fmt.Sprint("v-", n),
					body: payBody(ref, extra), invalid: true}).want(t, 422, xaalis.EValidation)
				if len(r.err.Errors[field]) == 0 {
					t.Errorf("%s one character too long: %s", field, r.body)
				}
			}
		})
		t.Run("ErrAmountMustBePositive", func(t *testing.T) {
			post(keys.SecretTest, "", 0).want(t, 422, xaalis.EAmountMustBePositive)
			post(keys.SecretTest, "", -100).want(t, 422, xaalis.EAmountMustBePositive)
			// docs/payments.md's order: validation_error comes first.
			r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "amt-order",
				body: `{"merchant_ref":"amt-order","amount":0,"success_url":"not a url","failed_url":"https://shop.example/ko"}`, invalid: true}).
				want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["success_url"]) == 0 {
				t.Fatalf("errors %v", r.err.Errors)
			}
		})
		t.Run("ErrInvalidPhoneNumber", func(t *testing.T) {
			r := post(keys.SecretTest, `"payer":{"phone":"12"}`, 5000).want(t, 422, xaalis.EInvalidPhoneNumber)
			if ctxOf(r, "reason") == nil {
				t.Fatalf("no reason: %s", r.body)
			}
			r = post(keys.SecretTest, `"country":"BJ","payer":{"phone":"97 12 34 56"}`, 5000).want(t, 422, xaalis.EInvalidPhoneNumber)
			if ctxOf(r, "reason") != "old_numbering_plan" || !strings.Contains(r.err.Message, "10 digits") {
				t.Fatalf("old Benin plan: %s", r.body)
			}
			r = post(keys.SecretTest, `"payer":{"phone":"+2250707123456"}`, 5000).want(t, 422, xaalis.EInvalidPhoneNumber)
			if ctxOf(r, "reason") != "wrong_country" {
				t.Fatalf("CI number for SN: %s", r.body)
			}
		})
		t.Run("ErrProviderUnavailable", func(t *testing.T) {
			r := post(keys.SecretTest, `"provider":"channel_z"`, 5000).want(t, 422, xaalis.EProviderUnavailable)
			if ctxOf(r, "provider") != "channel_z" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrProviderCountryUnsupported", func(t *testing.T) {
			r := post(keys.SecretTest, `"provider":"channel_c","country":"CI"`, 5000).want(t, 422, xaalis.EProviderCountryUnsupported)
			if ctxOf(r, "provider") != "channel_c" || ctxOf(r, "country") != "CI" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrFeesUnavailable", func(t *testing.T) {
			post(keys.SecretTest, `"provider":"channel_a","country":"GW"`, 5000).want(t, 422, xaalis.EFeesUnavailable)
		})
		t.Run("ErrAmountLimits", func(t *testing.T) {
			r := post(keys.SecretTest, "", 100).want(t, 422, xaalis.EAmountBelowMerchantMinimum)
			if ctxOf(r, "minimum") != float64(150) || ctxOf(r, "currency") != "XOF" {
				t.Fatalf("context: %v", r.err.Context)
			}
			r = post(keys.SecretTest, `"provider":"channel_c"`, 200).want(t, 422, xaalis.EAmountBelowProviderMinimum)
			if ctxOf(r, "minimum") != float64(500) || ctxOf(r, "provider") != "channel_c" || ctxOf(r, "currency") != "XOF" {
				t.Fatalf("context: %v", r.err.Context)
			}
			r = post(keys.SecretTest, "", 100001).want(t, 422, xaalis.EAmountAboveMerchantMaximum)
			if ctxOf(r, "maximum") != float64(100000) {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrPayoutAmountLimits", func(t *testing.T) {
			// The merchant's floor and ceiling bound payouts too, checked
			// before the balance (this merchant has none).
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "vpo-min",
				body: payoutBody("vpo-min", 120, "channel_a", "+221771112233")}).want(t, 422, xaalis.EAmountBelowMerchantMinimum)
			if ctxOf(r, "minimum") != float64(150) || ctxOf(r, "currency") != "XOF" {
				t.Fatalf("context: %v", r.err.Context)
			}
			r = e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "vpo-max",
				body: payoutBody("vpo-max", 100001, "channel_a", "+221771112233")}).want(t, 422, xaalis.EAmountAboveMerchantMaximum)
			if ctxOf(r, "maximum") != float64(100000) {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrDailyLimitExceeded", func(t *testing.T) {
			post(keys.SecretTest, `"provider":"channel_c","payer":{"phone":"+221771234500"}`, 10000).want(t, 201, "")
			r := post(keys.SecretTest, `"provider":"channel_c","payer":{"phone":"+221771234501"}`, 6000).want(t, 422, xaalis.EDailyLimitExceeded)
			if ctxOf(r, "limit") != float64(15000) || ctxOf(r, "currency") != "XOF" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrBCEAOLimitExceeded", func(t *testing.T) {
			post(keys.SecretTest, `"provider":"channel_b","payer":{"phone":"+221775550000"}`, 15000).want(t, 201, "")
			r := post(keys.SecretTest, `"provider":"channel_b","payer":{"phone":"+221775550000"}`, 6000).want(t, 422, xaalis.EBCEAOLimitExceeded)
			if ctxOf(r, "tier") != float64(1) || ctxOf(r, "ceiling") != float64(20000) {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrMerchantLimitExceeded", func(t *testing.T) {
			id2, k2 := e.merchant()
			_ = id2
			for i := range 3 {
				post(k2.SecretTest, fmt.Sprintf(`"provider":"channel_a","payer":{"phone":"+22177123460%d"}`, i), 100000).want(t, 201, "")
			}
			r := post(k2.SecretTest, `"provider":"channel_a","payer":{"phone":"+221771234609"}`, 100).want(t, 422, xaalis.EAmountBelowMerchantMinimum)
			_ = r
			r = post(k2.SecretTest, `"provider":"channel_a","payer":{"phone":"+221771234609"}`, 200).want(t, 422, xaalis.EMerchantLimitExceeded)
			if !strings.Contains(r.err.Message, "daily") {
				t.Fatalf("message does not name the cause: %s", r.err.Message)
			}
		})
		t.Run("ErrMerchantProviderNotAuthorized", func(t *testing.T) {
			only := []string{"channel_b"}
			if _, err := e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{AllowedProviders: &only}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				none := []string{}
				_, _ = e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{AllowedProviders: &none})
			}()
			r := post(keys.SecretTest, `"provider":"channel_a"`, 5000).want(t, 422, xaalis.EMerchantProviderNotAuthorized)
			if ctxOf(r, "provider") != "channel_a" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrMerchantKYCRequired", func(t *testing.T) {
			post(keys.SecretLive, "", 5000).want(t, 422, xaalis.EMerchantKYCRequired)
		})
		t.Run("ErrMerchantInactive", func(t *testing.T) {
			id3, k3 := e.merchant()
			st := xaalis.MerchantSuspended
			if _, err := e.app.UpdateMerchant(context.Background(), id3, xaalis.MerchantUpdate{Status: &st}); err != nil {
				t.Fatal(err)
			}
			r := post(k3.SecretTest, "", 5000).want(t, 422, xaalis.EMerchantInactive)
			if ctxOf(r, "status") != "suspended" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrGateway", func(t *testing.T) {
			r := post(keys.SecretTest, `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneRefused+`"}`, 5000).want(t, 502, xaalis.EGatewayError)
			_ = r
			r = post(keys.SecretTest, `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneUnreachable+`"}`, 5000).want(t, 503, xaalis.EGatewayUnavailable)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			// The payment the provider did not take stays initiated: sent
			// again with the same fields it is resumed (one payment), with a
			// field changed it is another payment, whose merchant_ref is
			// taken.
			same := payBody("resume-x", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneUnreachable+`"}`)
			for i := range 2 {
				e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: fmt.Sprint("rs-", i), body: same}).
					want(t, 503, xaalis.EGatewayUnavailable)
			}
			var list []txRecord
			e.do(call{method: "GET", path: "/v1/payments?merchant_ref=resume-x", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 1 || list[0].Status != "initiated" {
				t.Fatalf("after two tries: %+v", list)
			}
			changed := payBody("resume-x", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneUnreachable+`"},"metadata":{"order_id":"other"}`)
			r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "rs-changed", body: changed}).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["merchant_ref"]) == 0 {
				t.Fatalf("a changed retry: %s", r.body)
			}
		})
	})
}

func TestPaymentLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()

		t.Run("OKMagicNumbers", func(t *testing.T) {
			for i, c := range []struct {
				phone, status, event, reason string
			}{
				{provider.TestPhoneSuccess, "success", xaalis.EventPaymentSuccess, ""},
				{provider.TestPhoneFailed, "failed", xaalis.EventPaymentFailed, provider.ReasonInsufficientFunds},
				{provider.TestPhoneCancelled, "cancelled", xaalis.EventPaymentCancelled, provider.ReasonPayerCancelled},
				{provider.TestPhoneNoPayer, "pending", "", ""},
			} {
				_, p := e.pay(t, keys.SecretTest, fmt.Sprint("magic-", i), `"provider":"channel_a","payer":{"phone":"`+c.phone+`"}`)
				if p.Status != c.status {
					t.Fatalf("%s: status %s, want %s", c.phone, p.Status, c.status)
				}
				// docs/payments.md's table names the reason of each.
				if got := p.FailureReason; (c.reason == "") != (got == nil) || got != nil && *got != c.reason {
					t.Fatalf("%s: failure_reason %v, want %q", c.phone, got, c.reason)
				}
				evs := e.events(t, p.ID)
				if (c.event == "" && len(evs) != 0) || (c.event != "" && (len(evs) != 1 || evs[0] != c.event)) {
					t.Fatalf("%s: events %v", c.phone, evs)
				}
			}
		})
		t.Run("OKSimulate", func(t *testing.T) {
			for i, outcome := range []string{"success", "failed", "cancelled"} {
				_, p := e.pay(t, keys.SecretTest, fmt.Sprint("sim-", i), `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
				if p.NextAction == nil {
					t.Fatal("a pending payment with nothing for the payer to do")
				}
				r := e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: keys.SecretTest,
					idem: fmt.Sprint("sim-", i), body: `{"outcome":"` + outcome + `"}`}).want(t, 200, "")
				var after, read txRecord
				r.data(t, &after)
				e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &read)
				// Settled, the payer has nothing left to do.
				if after.Status != outcome || after.NextAction != nil || read.NextAction != nil {
					t.Fatalf("simulate %s: %s", outcome, r.body)
				}
				if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != "payment."+outcome {
					t.Fatalf("events %v", evs)
				}
				// The simulator's own notification arrives too, and changes nothing.
				time.Sleep(20 * time.Millisecond)
				if evs := e.events(t, p.ID); len(evs) != 1 {
					t.Fatalf("events after the notification: %v", evs)
				}
			}
			_, p := e.pay(t, keys.SecretTest, "sim-bad", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
			e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: keys.SecretTest,
				idem: "sim-bad", body: `{"outcome":"maybe"}`}).want(t, 422, xaalis.EValidation)
			e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: keys.SecretLive,
				idem: "sim-live", body: `{"outcome":"success"}`}).want(t, 403, xaalis.ELivemodeMismatch)
		})
		t.Run("OKVerify", func(t *testing.T) {
			_, p := e.pay(t, keys.SecretTest, "ver-1", `"provider":"channel_c","payer":{"phone":"+221771234567"}`)
			r := e.do(call{method: "POST", path: "/v1/payments/" + p.ID + "/verify", key: keys.SecretTest, idem: "ver-1"}).want(t, 200, "")
			var v txRecord
			r.data(t, &v)
			if v.Status != "pending" {
				t.Fatalf("verify: %s", r.body)
			}
			// The payer confirms at the provider, but the notification is lost:
			// verify finds the outcome.
			g := e.app.Gateway
			if err := g.PayerAction(context.Background(), "channel_c", providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil {
				t.Fatal(err)
			}
			r = e.do(call{method: "POST", path: "/v1/payments/" + p.ReferenceOrID() + "/verify", key: keys.SecretTest, idem: "ver-2"}).want(t, 200, "")
			r.data(t, &v)
			if v.Status != "success" {
				t.Fatalf("verify after payment: %s", r.body)
			}
		})
		t.Run("OKStatusLookup", func(t *testing.T) {
			_, p := e.pay(t, keys.SecretTest, "status-1", "")
			for _, key := range []string{p.ID, p.Reference, "status-1"} {
				var got txRecord
				e.do(call{method: "GET", path: "/v1/status/" + key, key: keys.SecretTest}).want(t, 200, "").data(t, &got)
				if got.ID != p.ID {
					t.Fatalf("status/%s: %s", key, got.ID)
				}
			}
			e.do(call{method: "GET", path: "/v1/status/TXN-NOPE", key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
			e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: keys.SecretLive}).want(t, 403, xaalis.ELivemodeMismatch)
			_, other := e.merchant()
			e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: other.SecretTest}).want(t, 404, xaalis.ENotFound)
		})
		t.Run("OKExpiry", func(t *testing.T) {
			_, p := e.pay(t, keys.SecretTest, "exp-1", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneNoPayer+`"},"expires_in":60`)
			_, q := e.pay(t, keys.SecretTest, "exp-2", `"expires_in":120`)
			e.clock.Advance(61 * time.Second)
			n, err := e.app.ExpireDue(context.Background(), 100)
			if err != nil || n < 1 {
				t.Fatalf("expired %d, %v", n, err)
			}
			var got txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretTest}).data(t, &got)
			if got.Status != "expired" {
				t.Fatalf("status %s", got.Status)
			}
			if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != xaalis.EventPaymentExpired {
				t.Fatalf("events %v", evs)
			}
			e.do(call{method: "GET", path: "/v1/payments/" + q.ID, key: keys.SecretTest}).data(t, &got)
			if got.Status != "initiated" {
				t.Fatalf("a payment expired early: %s", got.Status)
			}
			e.clock.Advance(-61 * time.Second)
		})
		t.Run("OKList", func(t *testing.T) {
			_, k := e.merchant()
			for i := range 3 {
				e.pay(t, k.SecretTest, fmt.Sprint("list-", i), `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
			}
			e.pay(t, k.SecretTest, "list-3", "")
			var list []txRecord
			r := e.do(call{method: "GET", path: "/v1/payments?status=pending&provider=channel_b&per_page=2", key: k.SecretTest}).want(t, 200, "")
			r.data(t, &list)
			if len(list) != 2 || !strings.Contains(string(r.body), `"total":3`) {
				t.Fatalf("list: %s", r.body)
			}
			e.do(call{method: "GET", path: "/v1/payments?merchant_ref=list-3", key: k.SecretTest}).data(t, &list)
			if len(list) != 1 || list[0].Status != "initiated" {
				t.Fatalf("by merchant_ref: %+v", list)
			}
			today := e.clock.Now().Format("2006-01-02")
			e.do(call{method: "GET", path: "/v1/payments?from=" + today + "&to=" + today, key: k.SecretTest}).data(t, &list)
			if len(list) != 4 {
				t.Fatalf("today: %d", len(list))
			}
			// RFC 3339 times, T and Z in either case (RFC 3339, 5.6).
			start := today + "t00:00:00z"
			e.do(call{method: "GET", path: "/v1/payments?from=" + start + "&to=" + strings.ToUpper(e.clock.Now().Add(time.Hour).Format(time.RFC3339)),
				key: k.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 4 {
				t.Fatalf("today in RFC 3339 times: %d", len(list))
			}
			e.do(call{method: "GET", path: "/v1/payments?status=bogus", key: k.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
			e.do(call{method: "GET", path: "/v1/payments?from=yesterday", key: k.SecretTest}).want(t, 422, xaalis.EValidation)
		})
		t.Run("OKProviders", func(t *testing.T) {
			var list []struct {
				ID        string
				Countries []string
				Healthy   bool
				Allowed   bool
			}
			e.do(call{method: "GET", path: "/v1/providers", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			// channel_a serves the eight countries, but has no fee grid in GW
			// (fees_unavailable there): it is not open there.
			if len(list) != 3 || !list[0].Healthy || !list[0].Allowed || len(list[0].Countries) != 7 || slices.Contains(list[0].Countries, "GW") {
				t.Fatalf("providers: %+v", list)
			}
			e.do(call{method: "GET", path: "/v1/providers?country=CI", key: keys.SecretTest}).data(t, &list)
			if len(list) != 2 {
				t.Fatalf("providers in CI: %+v", list)
			}
			e.do(call{method: "GET", path: "/v1/providers?country=GW", key: keys.SecretTest}).data(t, &list)
			if len(list) != 1 || list[0].ID != "channel_b" {
				t.Fatalf("providers in GW: %+v", list)
			}
		})
	})
}

func providerRef(t *testing.T, e *env, id string) string {
	t.Helper()
	tx, err := e.app.Store.Transaction(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return tx.ProviderRef
}

// ReferenceOrID lets a test use the reference where an id is expected.
func (p txRecord) ReferenceOrID() string { return p.Reference }

func TestPaymentMonthlyLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.MerchantLimits = xaalis.Limits{MinAmount: 100, MaxAmount: 1000000, Monthly: 250000}
			a.Config = &cfg
		})
		_, keys := e.merchant()
		for i := range 2 {
			r, _ := e.pay(t, keys.SecretTest, fmt.Sprint("month-", i), `"amount":100000,"provider":"channel_a","payer":{"phone":"+22177123470`+fmt.Sprint(i)+`"}`)
			r.want(t, 201, "")
		}
		r, _ := e.pay(t, keys.SecretTest, "month-2", `"amount":60000,"provider":"channel_a","payer":{"phone":"+221771234709"}`)
		r.want(t, 422, xaalis.EMerchantLimitExceeded)
		if !strings.Contains(r.err.Message, "monthly") || r.err.Context["period"] != "monthly" {
			t.Fatalf("monthly limit: %s", r.body)
		}
		// A failed payment frees its share of the limit.
		_, p := e.pay(t, keys.SecretTest, "month-3", `"amount":50000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneFailed+`"}`)
		if p.Status != "failed" {
			t.Fatalf("status %s", p.Status)
		}
		r, _ = e.pay(t, keys.SecretTest, "month-4", `"amount":50000,"provider":"channel_a","payer":{"phone":"+221771234710"}`)
		r.want(t, 201, "")
	})
}

// TestSimulateAfterPayerActed: a simulate whose first attempt reached the
// provider but never moved the payment (its commit failed: a full disk, a
// crash) is retried: the payer's action is already done at the provider,
// and the retry applies its outcome instead of answering the provider's
// refusal.
func TestSimulateAfterPayerActed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "sim-again", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		if p.Status != "pending" {
			t.Fatalf("payment %s", p.Status)
		}
		if err := e.app.Gateway.PayerAction(context.Background(), "channel_b", providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil {
			t.Fatal(err)
		}
		var got txRecord
		e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: keys.SecretTest, idem: "sim-again",
			body: `{"outcome":"success"}`}).want(t, 200, "").data(t, &got)
		if got.Status != "success" {
			t.Fatalf("status %s", got.Status)
		}
		if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != "payment.success" {
			t.Fatalf("events %v", evs)
		}
	})
}

// TestLimitsUnderConcurrency: payments sent together do not pass a limit
// together. Thirty payments of 1,000 XOF at once, against a provider's
// daily limit of 15,000, a merchant's of 12,000 and a payer's ceiling of
// 9,000: at most as many pass as fit, and the ones sent after them one by
// one fill the room exactly. (Each read the counters before the others
// committed: all thirty passed.)
func TestLimitsUnderConcurrency(t *testing.T) {
	cases := []struct {
		name   string
		fit    int
		code   xaalis.Code
		config func(*xaalis.Config)
		phone  func(i int) string
	}{
		{"provider", 15, xaalis.EDailyLimitExceeded, func(cfg *xaalis.Config) {
			p := cfg.Providers["channel_c"]
			p.DailyLimit = 15000
			cfg.Providers = map[string]xaalis.ProviderSpec{"channel_a": cfg.Providers["channel_a"], "channel_b": cfg.Providers["channel_b"], "channel_c": p}
		}, func(i int) string { return fmt.Sprintf("+22177%03d0001", i) }},
		{"merchant", 12, xaalis.EMerchantLimitExceeded, func(cfg *xaalis.Config) {
			cfg.MerchantLimits.Daily = 12000
		}, func(i int) string { return fmt.Sprintf("+22177%03d0001", i) }},
		{"payer", 9, xaalis.EBCEAOLimitExceeded, func(cfg *xaalis.Config) {
			cfg.BCEAO.Tiers = []xaalis.BCEAOTier{{Tier: 1, Ceiling: 9000}}
			cfg.BCEAO.DefaultTier = 1
		}, func(int) string { return "+221776660001" }},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
					cfg := *a.Config
					c.config(&cfg)
					a.Config = &cfg
				})
				_, keys := e.merchant()
				post := func(i int) *response {
					ref := fmt.Sprint(c.name, "-", i)
					body := strings.Replace(payBody(ref, `"provider":"channel_c","payer":{"phone":"`+c.phone(i)+`"}`), `"amount":5000`, `"amount":1000`, 1)
					return e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: ref, body: body, invalid: true})
				}
				var wg sync.WaitGroup
				status := make([]int, 30)
				codes := make([]xaalis.Code, 30)
				for i := range status {
					wg.Go(func() {
						r := post(i)
						status[i], codes[i] = r.status, r.err.Code
					})
				}
				wg.Wait()
				passed := 0
				for i, st := range status {
					switch {
					case st == 201:
						passed++
					case st != 422 || codes[i] != c.code:
						t.Fatalf("payment %d: %d %s", i, st, codes[i])
					}
				}
				if passed > c.fit {
					t.Fatalf("%d payments of 1,000 passed a limit that fits %d", passed, c.fit)
				}
				for i := 30; ; i++ {
					r := post(i)
					if r.status != 201 {
						r.want(t, 422, c.code)
						break
					}
					passed++
				}
				if passed != c.fit {
					t.Fatalf("%d payments passed in all; %d fit", passed, c.fit)
				}
			})
		}
	})
}

// TestRefusalOrderWithVolumes: a payment refused both by a volume limit
// and by a later check gets the volume limit's refusal, as the precheck
// lists them (creation answers the first): its first checks without
// counters must not reorder them.
func TestRefusalOrderWithVolumes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.MerchantLimits.Daily = 1000
			a.Config = &cfg
		})
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "ro-1", `"amount":1000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		if p.Status != "success" {
			t.Fatalf("the first payment: %+v", p)
		}
		// 200 XOF is also below channel_c's minimum (500).
		body := strings.Replace(payBody("ro-2", `"provider":"channel_c","payer":{"phone":"+221771234599"}`), `"amount":5000`, `"amount":200`, 1)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "ro-2", body: body, invalid: true}).
			want(t, 422, xaalis.EMerchantLimitExceeded)
	})
}

// TestLateCollectionPolled: a payment collected after it was cancelled
// or expired whose notification was lost as well stayed closed until a
// verify asked: reconciliation polled pending payments only. It now asks
// the provider about closed ones, at doubling intervals for a day:
// a success found succeeds the payment with its event; another final
// answer, or the day's end, stops the polls.
func TestLateCollectionPolled(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		ctx := context.Background()
		pay := func(ref, prov, phone string) txRecord {
			var p txRecord
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "pay-" + ref,
				body: payBody(ref, `"amount":5000,"provider":"`+prov+`","payer":{"phone":"`+phone+`"},"expires_in":60`)}).
				want(t, 201, "").data(t, &p)
			return p
		}
		paid := pay("poll-paid", "channel_a", "+221771234567")
		failed := pay("poll-failed", "channel_a", "+221771234568")
		never := pay("poll-never", "channel_a", "+221771234569")
		cancelled := pay("poll-cancelled", "channel_a", "+221771234570")
		e.cancelOnPage(cancelled.ID)
		// Cancelled by its provider (the payer declined in the wallet): its
		// collection is over, and it is never asked again.
		declined := pay("poll-declined", "channel_a", "+221771234572")
		if d, err := emu.PayerAct(providerRef(t, e, declined.ID), xaalis.ProviderCancelled); err != nil || d.Status != 200 {
			t.Fatalf("the payer declines: %+v %v", d, err)
		}
		if st := e.status(t, keys.SecretLive, declined.ID); st != "cancelled" {
			t.Fatalf("declined: %s", st)
		}
		// The initiation's answer lost: cancelled without a provider id.
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
			t.Fatal(err)
		}
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "pay-poll-lost",
			body: payBody("poll-lost", `"amount":5000,"provider":"channel_c","payer":{"phone":"+221771234571"}`)}).
			want(t, 503, xaalis.EGatewayUnavailable)
		var lost txRecord
		e.do(call{method: "GET", path: "/v1/payments/poll-lost", key: keys.SecretLive}).want(t, 200, "").data(t, &lost)
		e.cancelOnPage(lost.ID)
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Minute)
		if _, err := e.app.ExpireDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
		for _, p := range []txRecord{paid, failed, never} {
			if st := e.status(t, keys.SecretLive, p.ID); st != "expired" {
				t.Fatalf("%s before the payer acts: %s", p.Reference, st)
			}
		}
		// Every notification is lost from now on.
		for _, prov := range []string{"channel_a", "channel_c"} {
			if err := emu.SetProvider(prov, provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
				t.Fatal(err)
			}
		}
		cols := map[string]string{}
		for _, c := range emu.Collections() {
			cols[c.Reference] = c.ID
		}
		for id, act := range map[string]xaalis.ProviderState{
			providerRef(t, e, paid.ID): xaalis.ProviderSuccess, providerRef(t, e, failed.ID): xaalis.ProviderFailed,
			providerRef(t, e, cancelled.ID): xaalis.ProviderSuccess, cols[lost.Reference]: xaalis.ProviderSuccess,
		} {
			if d, err := emu.PayerAct(id, act); err != nil || !d.Lost {
				t.Fatalf("the lost notification: %+v %v", d, err)
			}
		}
		due := func() map[string]bool { return e.latePolls(t, xaalis.LatePollWindow) }
		if d := due(); len(d) != 5 || d[declined.ID] {
			t.Fatalf("late polls scheduled for %v, want the five payments Xaalis closed", d)
		}
		// A payment is asked about reconcile_after_seconds (60 s here)
		// after it closed: the cancelled ones two minutes ago, the expired
		// ones just now.
		if n, err := e.app.ReconcileDue(ctx, 100); err != nil || n != 2 {
			t.Fatalf("the cancelled payments' polls changed %d (%v), want 2", n, err)
		}
		if st := e.status(t, keys.SecretLive, paid.ID); st != "expired" {
			t.Fatalf("a poll before its time: %s", st)
		}
		e.clock.Advance(time.Minute)
		if n, err := e.app.ReconcileDue(ctx, 100); err != nil || n != 1 {
			t.Fatalf("the expired payments' polls changed %d (%v), want 1", n, err)
		}
		for id, want := range map[string]string{paid.ID: "success", cancelled.ID: "success", lost.ID: "success",
			failed.ID: "expired", never.ID: "expired"} {
			if st := e.status(t, keys.SecretLive, id); st != want {
				t.Fatalf("%s after the late poll: %s, want %s", id, st, want)
			}
			if evs := e.events(t, id); want == "success" && (len(evs) != 2 || evs[1] != xaalis.EventPaymentSuccess) {
				t.Fatalf("%s events %v", id, evs)
			}
		}
		// The provider's failure is final: only the unpaid one is asked
		// again, fewer than a dozen times, until the day is over.
		if d := due(); len(d) != 1 || !d[never.ID] {
			t.Fatalf("late polls left: %v, want only %s", d, never.ID)
		}
		polls := 0
		for range 24 * 60 {
			e.clock.Advance(time.Minute)
			if len(due()) == 0 {
				break
			}
			if len(e.latePolls(t, 0)) > 0 {
				polls++
			}
			if _, err := e.app.ReconcileDue(ctx, 100); err != nil {
				t.Fatal(err)
			}
		}
		if d := due(); len(d) != 0 || polls < 5 || polls > 12 {
			t.Fatalf("the unpaid payment was asked %d more times, and is still due: %v", polls, d)
		}
		// channel_a in SN: 1 % fee on the two 5,000 XOF payments, channel_c
		// 1.2 % on the third.
		if got := e.balance(t, keys.SecretLive).Available; got != 2*4950+4940 {
			t.Fatalf("available %v", got)
		}
		e.ledgerOK(t)
	})
}

// TestPaymentRetriedAfterItMovedTestMode: test mode answers as live mode
// does a creation retried under its key after a 503 once the payment moved
// on (here cancelled on the hosted page): the payment, 201, where it
// answered 422 (its merchant_ref taken) and live mode 201.
func TestPaymentRetriedAfterItMovedTestMode(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		body := payBody("tm-moved", `"provider":"channel_c","payer":{"phone":"`+provider.TestPhoneUnreachable+`"}`)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "tm-moved", body: body}).
			want(t, 503, xaalis.EGatewayUnavailable)
		var p txRecord
		e.do(call{method: "GET", path: "/v1/payments/tm-moved", key: keys.SecretTest}).want(t, 200, "").data(t, &p)
		e.cancelOnPage(p.ID)
		var again txRecord
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "tm-moved", body: body}).
			want(t, 201, "").data(t, &again)
		if again.ID != p.ID || again.Status != "cancelled" {
			t.Fatalf("the retry: %+v", again)
		}
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "tm-moved-2", body: body, invalid: true}).
			want(t, 422, xaalis.EValidation)
	})
}

// TestLatePollStops: a collection the provider refused (502), or one it
// never received (its routes down), stops being asked about at the first
// poll after its payment closed, when the provider says it never received
// it; both were asked for a day.
func TestLatePollStops(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		ctx := context.Background()
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "ls-refused",
			body: payBody("ls-refused", `"amount":5000,"provider":"channel_c","payer":{"phone":"+221770000005"},"expires_in":60`)}).
			want(t, 502, xaalis.EGatewayError)
		for _, r := range []string{"direct", "aggregator"} {
			if err := emu.SetRoute("channel_a", r, provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
		}
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "ls-unseen",
			body: payBody("ls-unseen", `"amount":5000,"provider":"channel_a","payer":{"phone":"+221771234567"},"expires_in":60`)}).
			want(t, 503, xaalis.EGatewayUnavailable)
		for _, r := range []string{"direct", "aggregator"} {
			if err := emu.SetRoute("channel_a", r, provider.RouteSwitches{}); err != nil {
				t.Fatal(err)
			}
		}
		var refused, unseen txRecord
		e.do(call{method: "GET", path: "/v1/payments/ls-refused", key: keys.SecretLive}).want(t, 200, "").data(t, &refused)
		e.do(call{method: "GET", path: "/v1/payments/ls-unseen", key: keys.SecretLive}).want(t, 200, "").data(t, &unseen)
		e.clock.Advance(2 * time.Minute)
		if _, err := e.app.ExpireDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
		due := func() map[string]bool { return e.latePolls(t, xaalis.LatePollWindow) }
		if d := due(); !d[refused.ID] || !d[unseen.ID] {
			t.Fatalf("late polls %v: want %s and %s", d, refused.ID, unseen.ID)
		}
		e.clock.Advance(2 * time.Minute)
		if _, err := e.app.ReconcileDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if d := due(); len(d) != 0 {
			t.Fatalf("late polls after the provider said it never received it: %v", d)
		}
	})
}

// TestPaymentRetriedAfterItMoved: a live payment whose provider took the
// collection but whose answer was lost is answered 503 (the key released);
// the provider's notification then settles it. The same request retried
// with its Idempotency-Key was refused 422 (its merchant_ref taken, by
// itself): it is answered the payment as it now is. Another key, or
// another body under the key, still finds the merchant_ref taken.
func TestPaymentRetriedAfterItMoved(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		route := func(sw provider.RouteSwitches) {
			t.Helper()
			if err := emu.SetRoute("channel_c", "direct", sw); err != nil {
				t.Fatal(err)
			}
		}
		// answerLost sends body under each key in turn, each answered 503
		// (the provider took the collection, its answer timed out), then
		// has the payer pay: the notification settles the payment.
		answerLost := func(ref, body string, idems ...string) txRecord {
			t.Helper()
			route(provider.RouteSwitches{Timeout: true})
			for _, idem := range idems {
				e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: idem, body: body}).
					want(t, 503, xaalis.EGatewayUnavailable)
			}
			route(provider.RouteSwitches{})
			var p txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + ref, key: keys.SecretLive}).want(t, 200, "").data(t, &p)
			col := ""
			for _, c := range emu.Collections() {
				if c.Reference == p.Reference {
					col = c.ID
				}
			}
			if d, err := emu.PayerAct(col, xaalis.ProviderSuccess); err != nil || d.Status != 200 {
				t.Fatalf("the notification of %s: %+v %v", ref, d, err)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("%s after the notification: %s", ref, st)
			}
			return p
		}
		retried := func(idem, body string, want txRecord) {
			t.Helper()
			var again txRecord
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: idem, body: body}).
				want(t, 201, "").data(t, &again)
			if again.ID != want.ID || again.Status != "success" {
				t.Fatalf("the retry under %s: %+v, want %s in success", idem, again, want.ID)
			}
		}
		body := payBody("moved-1", `"amount":5000,"provider":"channel_c","payer":{"phone":"+221771234567"}`)
		first := answerLost("moved-1", body, "create-moved-1")
		retried("create-moved-1", body, first)
		// Its answer is the key's from now on.
		retried("create-moved-1", body, first)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "create-moved-2", body: body, invalid: true}).
			want(t, 422, xaalis.EValidation)
		// The key released again (a 5xx) with another amount: another
		// payment, whose merchant_ref is taken.
		body2 := payBody("moved-2", `"amount":5000,"provider":"channel_c","payer":{"phone":"+221771234568"}`)
		answerLost("moved-2", body2, "create-moved-3")
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "create-moved-3", invalid: true,
			body: strings.Replace(body2, `"amount":5000`, `"amount":6000`, 1)}).want(t, 422, xaalis.EValidation)
		// A retry that a check refuses, because the payment itself now
		// counts against the merchant's day (10,000 XOF collected, a
		// ceiling of 12,000), is answered the payment too.
		body3 := payBody("moved-3", `"amount":2000,"provider":"channel_c","payer":{"phone":"+221771234569"}`)
		third := answerLost("moved-3", body3, "create-moved-4")
		cfg := *e.app.Config
		cfg.MerchantLimits.Daily = 12000
		e.app.Config = &cfg
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "create-moved-5",
			body: payBody("moved-5", `"amount":2000,"provider":"channel_c","payer":{"phone":"+221771234569"}`)}).
			want(t, 422, xaalis.EMerchantLimitExceeded)
		retried("create-moved-4", body3, third)
		cfg.MerchantLimits.Daily = 0
		e.app.Config = &cfg
		// The client changed keys between its retries: the key of the last
		// attempt is the payment's.
		e.clock.Advance(2 * time.Minute) // channel_c's breaker, opened by the timeouts, half-open again
		body4 := payBody("moved-4", `"amount":1000,"provider":"channel_c","payer":{"phone":"+221771234560"}`)
		fourth := answerLost("moved-4", body4, "create-moved-6", "create-moved-7")
		retried("create-moved-7", body4, fourth)
		// Another expires_in is another request.
		e.clock.Advance(2 * time.Minute)
		body5 := payBody("moved-5b", `"amount":1000,"provider":"channel_c","payer":{"phone":"+221771234561"}`)
		answerLost("moved-5b", body5, "create-moved-8")
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "create-moved-8", invalid: true,
			body: strings.Replace(body5, `"amount":1000`, `"amount":1000,"expires_in":600`, 1)}).want(t, 422, xaalis.EValidation)
		if got := e.balance(t, keys.SecretLive).Available; got != 2*4940+1976+2*988 {
			t.Fatalf("available %v", got)
		}
		e.ledgerOK(t)
	})
}

// TestLateCollection: a payer who pays at the provider after the payment
// was cancelled on the hosted page (which reaches no provider) or expired
// was charged, and the payment stayed cancelled or expired without a word.
// The late success, notified or found by verify, now succeeds it, with
// its event, and credits the merchant; a late failure changes nothing.
func TestLateCollection(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		pending := `"amount":5000,"provider":"channel_a","payer":{"phone":"+221771234567"}`
		pay := func(ref, extra string) string {
			var p txRecord
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "pay-" + ref,
				body: payBody(ref, pending+extra)}).want(t, 201, "").data(t, &p)
			return p.ID
		}
		cancelled := pay("late-cancel", "")
		e.cancelOnPage(cancelled)
		expired := pay("late-expire", `,"expires_in":60`)
		unseen := pay("late-verify", `,"expires_in":60`)
		failed := pay("late-fail", "")
		e.cancelOnPage(failed)
		e.clock.Advance(2 * time.Minute)
		if _, err := e.app.ExpireDue(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
		// Their reasons are codes, as the providers' are.
		reasons := map[string]string{"cancelled": xaalis.ReasonPayerCancelled, "expired": xaalis.ReasonNotPaidBeforeExpiry}
		for id, want := range map[string]string{cancelled: "cancelled", expired: "expired", unseen: "expired", failed: "cancelled"} {
			var rec txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + id, key: keys.SecretLive}).want(t, 200, "").data(t, &rec)
			if rec.Status != want || rec.FailureReason == nil || *rec.FailureReason != reasons[want] {
				t.Fatalf("%s before the payer acts: %+v, want %s", id, rec, want)
			}
		}
		// The provider notifies the late success of two; the third's
		// notification is lost, and verify finds it.
		for _, id := range []string{cancelled, expired} {
			if d, err := emu.PayerAct(providerRef(t, e, id), xaalis.ProviderSuccess); err != nil || d.Status != 200 {
				t.Fatalf("the late notification: %+v %v", d, err)
			}
		}
		if err := emu.SetProvider("channel_a", provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
			t.Fatal(err)
		}
		if d, err := emu.PayerAct(providerRef(t, e, unseen), xaalis.ProviderSuccess); err != nil || !d.Lost {
			t.Fatalf("the lost notification: %+v %v", d, err)
		}
		e.do(call{method: "POST", path: "/v1/payments/" + unseen + "/verify", key: keys.SecretLive, idem: "v-late"}).want(t, 200, "")
		if _, err := emu.PayerAct(providerRef(t, e, failed), xaalis.ProviderFailed); err != nil {
			t.Fatal(err)
		}
		e.do(call{method: "POST", path: "/v1/payments/" + failed + "/verify", key: keys.SecretLive, idem: "v-fail"}).want(t, 200, "")
		for id, want := range map[string]string{cancelled: "success", expired: "success", unseen: "success", failed: "cancelled"} {
			var rec txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + id, key: keys.SecretLive}).want(t, 200, "").data(t, &rec)
			if rec.Status != want || (want == "success" && rec.FailureReason != nil) {
				t.Fatalf("%s after the payer acted: %+v, want %s", id, rec, want)
			}
			if evs := e.events(t, id); want == "success" && (len(evs) != 2 || evs[1] != xaalis.EventPaymentSuccess) {
				t.Fatalf("%s events %v", id, evs)
			}
		}
		// Cancelled while the provider's answer to the initiation was lost
		// (no provider id yet): the provider names it by its reference,
		// in its notification or to verify.
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
			t.Fatal(err)
		}
		var lost [2]txRecord
		for i := range lost {
			ref := fmt.Sprint("late-lost-", i)
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "pay-" + ref,
				body: payBody(ref, `"amount":5000,"provider":"channel_c","payer":{"phone":"+22177123459`+fmt.Sprint(i)+`"}`)}).
				want(t, 503, xaalis.EGatewayUnavailable)
			e.do(call{method: "GET", path: "/v1/payments/" + ref, key: keys.SecretLive}).want(t, 200, "").data(t, &lost[i])
			e.cancelOnPage(lost[i].ID)
		}
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range lost {
			if st := e.status(t, keys.SecretLive, p.ID); st != "cancelled" || providerRef(t, e, p.ID) != "" {
				t.Fatalf("%s cancelled before its provider's answer: %s", p.Reference, st)
			}
		}
		cols := map[string]string{}
		for _, c := range emu.Collections() {
			cols[c.Reference] = c.ID
		}
		if d, err := emu.PayerAct(cols[lost[0].Reference], xaalis.ProviderSuccess); err != nil || d.Status != 200 {
			t.Fatalf("the late notification of an unanswered payment: %+v %v", d, err)
		}
		if err := emu.SetProvider("channel_c", provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
			t.Fatal(err)
		}
		if d, err := emu.PayerAct(cols[lost[1].Reference], xaalis.ProviderSuccess); err != nil || !d.Lost {
			t.Fatalf("the lost notification of an unanswered payment: %+v %v", d, err)
		}
		e.do(call{method: "POST", path: "/v1/payments/" + lost[1].ID + "/verify", key: keys.SecretLive, idem: "v-lost"}).want(t, 200, "")
		for _, p := range lost {
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("%s, cancelled unanswered, then paid: %s", p.Reference, st)
			}
			if evs := e.events(t, p.ID); len(evs) != 2 || evs[0] != xaalis.EventPaymentCancelled || evs[1] != xaalis.EventPaymentSuccess {
				t.Fatalf("%s events %v", p.Reference, evs)
			}
		}
		// Verify of a closed payment whose provider cannot answer is the
		// record as it is (200), as before verify asked about closed ones.
		if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
			t.Fatal(err)
		}
		if err := emu.SetRoute("channel_a", "aggregator", provider.RouteSwitches{Down: true}); err != nil {
			t.Fatal(err)
		}
		var rec txRecord
		e.do(call{method: "POST", path: "/v1/payments/" + failed + "/verify", key: keys.SecretLive, idem: "v-down"}).want(t, 200, "").data(t, &rec)
		if rec.Status != "cancelled" {
			t.Fatalf("verify of a closed payment, its provider down: %+v", rec)
		}
		for _, r := range []string{"direct", "aggregator"} {
			if err := emu.SetRoute("channel_a", r, provider.RouteSwitches{}); err != nil {
				t.Fatal(err)
			}
		}
		// channel_a in SN: 1 % fee on each of the three 5,000 XOF payments;
		// channel_c: 1.2 % on the two.
		if got := e.balance(t, keys.SecretLive).Available; got != 3*4950+2*4940 {
			t.Fatalf("available %v", got)
		}
		e.ledgerOK(t)
	})
}

// cancelOnPage is the payer's cancel on the hosted page (a same-origin
// form post), which reaches no provider.
func (e *env) cancelOnPage(id string) {
	e.do(call{method: "POST", path: "/checkout/" + id + "/cancel", body: "lang=en",
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL}})
}

// latePolls is the set of payments whose late poll is due within ahead
// of the test's clock.
func (e *env) latePolls(t *testing.T, ahead time.Duration) map[string]bool {
	t.Helper()
	list, err := e.app.Store.DueTransactions(context.Background(),
		xaalis.DueQuery{Now: e.clock.Now().Add(ahead), Limit: 100, LatePoll: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, x := range list {
		out[x.ID] = true
	}
	return out
}
