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
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

type balanceRecord struct {
	Object, Currency                         string
	Available, Pending, Reserved, Accounting float64
	LastUpdated                              string `json:"last_updated"`
}

func (e *env) balance(t *testing.T, key string) balanceRecord {
	t.Helper()
	var b balanceRecord
	e.do(call{method: "GET", path: "/v1/balance", key: key}).want(t, 200, "").data(t, &b)
	return b
}

// ledgerOK fails the test when any entry does not sum to zero or any
// balance differs from its postings.
func (e *env) ledgerOK(t *testing.T) {
	t.Helper()
	ps, err := e.app.LedgerCheck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Errorf("ledger: %s", p)
	}
	if len(ps) > 0 {
		t.FailNow()
	}
}

// fund makes n successful channel_a payments of amount XOF (1 % fee).
func (e *env) fund(t *testing.T, key string, n, amount int) {
	t.Helper()
	for i := range n {
		r, p := e.pay(t, key, fmt.Sprintf("fund-%d-%d", time.Now().UnixNano(), i),
			fmt.Sprintf(`"amount":%d,"provider":"channel_a","payer":{"phone":"%s"}`, amount, provider.TestPhoneSuccess))
		r.want(t, 201, "")
		if p.Status != "success" {
			t.Fatalf("funding payment %s", p.Status)
		}
	}
}

func payoutBody(ref string, amount int, prov, phone string) string {
	return fmt.Sprintf(`{"merchant_ref":"%s","amount":%d,"currency":"XOF","provider":"%s","recipient":{"phone":"%s","name":"Moussa"},"description":"salary"}`,
		ref, amount, prov, phone)
}

// TestDisabledCountry: a provider turned off in a country
// (disabled_countries) refuses payouts there as it refuses payments, 422
// provider_country_unsupported: the payout was created, failed at the
// gateway, and took its merchant_ref with it.
func TestDisabledCountry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.Providers = maps.Clone(cfg.Providers)
			spec := cfg.Providers["channel_a"]
			spec.DisabledCountries = []xaalis.Country{"CI"}
			cfg.Providers["channel_a"] = spec
			a.Config = &cfg
		})
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 50000)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "dc-pay",
			body: payBody("dc-pay", `"provider":"channel_a","country":"CI","payer":{"phone":"+2250700000001"}`)}).
			want(t, 422, xaalis.EProviderCountryUnsupported)
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "dc-po",
			body: `{"merchant_ref":"dc-po","amount":1000,"currency":"XOF","provider":"channel_a","country":"CI","recipient":{"phone":"+2250700000001"}}`}).
			want(t, 422, xaalis.EProviderCountryUnsupported)
		// The merchant_ref is free for a payout that can be made.
		var po txRecord
		body := payoutBody("dc-po", 1000, "channel_a", "+221771112233")
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "dc-po-sn", body: body}).
			want(t, 201, "").data(t, &po)
		// The country disabled, then the same request under its key, its
		// answer no longer kept (a day later; or never stored, the
		// process stopped mid-call): it is answered its payout, not
		// refused, which the client would take for "not made" and pay
		// again elsewhere.
		spec := e.app.Config.Providers["channel_a"]
		spec.DisabledCountries = []xaalis.Country{"CI", "SN"}
		cfg := *e.app.Config
		cfg.Providers = maps.Clone(cfg.Providers)
		cfg.Providers["channel_a"] = spec
		e.app.Config = &cfg
		e.clock.Advance(25 * time.Hour)
		var again txRecord
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "dc-po-sn", body: body}).
			want(t, 201, "").data(t, &again)
		if again.ID != po.ID {
			t.Fatalf("the retry: %+v, want %s", again, po.ID)
		}
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "dc-po-sn-2",
			body: payoutBody("dc-po-2", 1000, "channel_a", "+221771112233")}).want(t, 422, xaalis.EProviderCountryUnsupported)
		e.ledgerOK(t)
	})
}

func TestBalanceAndPayouts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		if bal := e.balance(t, keys.SecretTest); bal.Object != "balance" || bal.Currency != "XOF" || bal.Available != 0 || bal.Pending != 0 {
			t.Fatalf("new balance: %+v", bal)
		}
		// 10 000 XOF through channel_a in SN (1 %): 9 900 available.
		e.fund(t, keys.SecretTest, 1, 10000)
		// A pending payment shows in pending, not in available.
		e.pay(t, keys.SecretTest, "pending-1", `"amount":3000,"provider":"channel_b","payer":{"phone":"+221771234567"}`)
		bal := e.balance(t, keys.SecretTest)
		if bal.Available != 9900 || bal.Pending != 3000 || bal.Reserved != 0 || bal.Accounting != 9900 {
			t.Fatalf("balance: %+v", bal)
		}
		e.ledgerOK(t)

		t.Run("ErrInsufficientBalance", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-big",
				body: payoutBody("po-big", 9850, "channel_a", "+221771112233")}).want(t, 422, xaalis.EInsufficientBalance)
			// 9 850 + 1 % fee (98.50) = 9 948.50 > 9 900.
			if r.err.Context["currency"] != "XOF" || r.err.Context["available"] != float64(9900) || r.err.Context["required"] != 9948.5 {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrProviderPayoutUnsupported", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-c",
				body: payoutBody("po-c", 1000, "channel_c", "+221771112233")}).want(t, 422, xaalis.EProviderPayoutUnsupported)
			if r.err.Context["provider"] != "channel_c" {
				t.Fatalf("context: %v", r.err.Context)
			}
		})
		t.Run("ErrScopeInsufficient", func(t *testing.T) {
			_, secret, err := e.app.CreateKey(context.Background(), xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest,
				Type: xaalis.KeySecret, Scopes: []xaalis.Scope{xaalis.ScopeReadTransactions}})
			if err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "POST", path: "/v1/payouts", key: secret, idem: "po-scope",
				body: payoutBody("po-scope", 1000, "channel_a", "+221771112233")}).want(t, 403, xaalis.EScopeInsufficient)
		})
		t.Run("OKSuccess", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-1",
				body: payoutBody("po-1", 1000, "channel_a", "+221771112233")}).want(t, 201, "")
			var p txRecord
			r.data(t, &p)
			if p.Type != "payout" || p.Status != "success" || p.Amount != "1000.00" || *p.Provider != "channel_a" || *p.Payer.Phone != "+221771112233" {
				t.Fatalf("payout: %s", r.body)
			}
			if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != xaalis.EventPayoutSuccess {
				t.Fatalf("events %v", evs)
			}
			// 9 900 − 1 000 − 10 fee.
			if bal := e.balance(t, keys.SecretTest); bal.Available != 8890 || bal.Reserved != 0 {
				t.Fatalf("after payout: %+v", bal)
			}
			// Replay: same answer, no second payout.
			e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-1",
				body: payoutBody("po-1", 1000, "channel_a", "+221771112233")}).want(t, 201, "").replayOf(t, r)
			var got txRecord
			e.do(call{method: "GET", path: "/v1/payouts/po-1", key: keys.SecretTest}).want(t, 200, "").data(t, &got)
			if got.ID != p.ID {
				t.Fatal("payout by merchant_ref")
			}
			e.do(call{method: "GET", path: "/v1/status/" + p.Reference, key: keys.SecretTest}).want(t, 200, "")
		})
		t.Run("OKFailedReleases", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-2",
				body: payoutBody("po-2", 1000, "channel_b", provider.TestPhoneFailed)}).want(t, 201, "")
			var p txRecord
			r.data(t, &p)
			if p.Status != "failed" {
				t.Fatalf("payout to a failing wallet: %s", r.body)
			}
			if evs := e.events(t, p.ID); len(evs) != 1 || evs[0] != xaalis.EventPayoutFailed {
				t.Fatalf("events %v", evs)
			}
			if bal := e.balance(t, keys.SecretTest); bal.Available != 8890 || bal.Reserved != 0 {
				t.Fatalf("after failed payout: %+v", bal)
			}
		})
		t.Run("OKPendingReserves", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-3",
				body: payoutBody("po-3", 1000, "channel_a", provider.TestPhoneNoPayer)}).want(t, 201, "")
			var p txRecord
			r.data(t, &p)
			if p.Status != "pending" {
				t.Fatalf("payout to a silent wallet: %s", r.body)
			}
			if bal := e.balance(t, keys.SecretTest); bal.Available != 7880 || bal.Reserved != 1010 {
				t.Fatalf("reserved: %+v", bal)
			}
		})
		// A payout settled in the request's own transaction is written once,
		// in the state the provider's answer leaves it in: every answer
		// must leave a stored payout, its ledger entries and its event.
		for _, c := range []struct {
			name, idem, phone, status string
			reason                    xaalis.Code
			events                    []string
			available, reserved       float64
		}{
			{"OKRefusedReleases", "po-4", provider.TestPhoneRefused, "failed", xaalis.EGatewayError,
				[]string{xaalis.EventPayoutFailed}, 7880, 1010},
			{"OKUnknownOutcomeReserves", "po-5", provider.TestPhoneUnreachable, "initiated", xaalis.EGatewayUnavailable,
				nil, 6870, 2020},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: c.idem,
					body: payoutBody(c.idem, 1000, "channel_a", c.phone)}).want(t, 201, "")
				var p, got txRecord
				r.data(t, &p)
				if p.Status != c.status || p.FailureReason == nil || *p.FailureReason != string(c.reason) {
					t.Fatalf("payout: %s", r.body)
				}
				e.do(call{method: "GET", path: "/v1/payouts/" + p.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &got)
				if got.Status != c.status {
					t.Fatalf("stored payout: %+v", got)
				}
				if evs := e.events(t, p.ID); !slices.Equal(evs, c.events) {
					t.Fatalf("events %v, want %v", evs, c.events)
				}
				if bal := e.balance(t, keys.SecretTest); bal.Available != c.available || bal.Reserved != c.reserved {
					t.Fatalf("balance: %+v", bal)
				}
				e.ledgerOK(t)
			})
		}
		t.Run("OKList", func(t *testing.T) {
			var list []txRecord
			e.do(call{method: "GET", path: "/v1/payouts?status=success&provider=channel_a", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 1 || list[0].Type != "payout" {
				t.Fatalf("payouts: %+v", list)
			}
		})
		t.Run("ErrPayoutsDisabled", func(t *testing.T) {
			off := false
			if _, err := e.app.UpdateMerchant(context.Background(), mid, xaalis.MerchantUpdate{PayoutsEnabled: &off}); err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "po-off",
				body: payoutBody("po-off", 100, "channel_a", "+221771112233")}).want(t, 422, xaalis.EPayoutsDisabled)
		})
		e.ledgerOK(t)
	})
}

// concurrentPayouts fires n payouts of 1 000 XOF at once across servers.
func concurrentPayouts(t *testing.T, envs []*env, key string, n int) (created, refused int) {
	var ok, no atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ref := fmt.Sprintf("race-%d", i)
			r := envs[i%len(envs)].do(call{method: "POST", path: "/v1/payouts", key: key, idem: ref,
				body: payoutBody(ref, 1000, "channel_a", "+221771112233")})
			switch {
			case r.status == 201:
				ok.Add(1)
			case r.status == 422 && r.err.Code == xaalis.EInsufficientBalance:
				no.Add(1)
			default:
				t.Errorf("payout %d: %d %s", i, r.status, r.body)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(ok.Load()), int(no.Load())
}

func TestPayoutConcurrency(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 10000, 10000 })
		_, keys := e.merchant()
		// 10 100 XOF net covers exactly ten payouts of 1 000 + 10 fee.
		e.fund(t, keys.SecretTest, 1, 10203)
		if bal := e.balance(t, keys.SecretTest); bal.Available < 10100 || bal.Available >= 11110 {
			t.Fatalf("funded %+v", bal)
		}
		created, refused := concurrentPayouts(t, []*env{e}, keys.SecretTest, 100)
		if created != 10 || refused != 90 {
			t.Fatalf("%d payouts created, %d refused; want 10 and 90", created, refused)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available < 0 || bal.Available >= 1010 {
			t.Fatalf("after: %+v", bal)
		}
		e.ledgerOK(t)
	})
}

// TestPayoutConcurrencyAcrossProcesses: two servers with their own pools
// on one PostgreSQL database share one balance.
func TestPayoutConcurrencyAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	big := func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 10000, 10000 }
	e1 := newEnv(t, openPostgresURL(t, url), big)
	e2 := newEnv(t, openPostgresURL(t, url), big)
	_, keys := e1.merchant()
	e1.fund(t, keys.SecretTest, 1, 10203)
	created, refused := concurrentPayouts(t, []*env{e1, e2}, keys.SecretTest, 100)
	if created != 10 || refused != 90 {
		t.Fatalf("%d payouts created, %d refused; want 10 and 90", created, refused)
	}
	e1.ledgerOK(t)
}

// apiEvent is an event as GET /v1/events and GET /v1/events/{id} answer
// it.
type apiEvent struct {
	ID, Type   string
	Sequence   int64
	Data       json.RawMessage
	Deliveries []struct{ URL string }
}

// payload renders ev in format f with the dispatcher's own
// webhook.Payload: the body a delivery of it carries.
func (ev apiEvent) payload(t *testing.T, f xaalis.PayloadFormat, objectType, objectID string, at time.Time) []byte {
	t.Helper()
	body, err := webhook.Payload(f, &xaalis.Event{ID: ev.ID, Type: ev.Type, ObjectType: objectType, ObjectID: objectID,
		Seq: ev.Sequence, Data: ev.Data, Mode: xaalis.ModeTest, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestRefundCarriesPaymentMetadata: a refund takes its payment's
// metadata, so that its record and its refund.success event name the
// merchant's order (metadata.order_id), in both webhook formats.
func TestRefundCarriesPaymentMetadata(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "rmd-pay", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+
			provider.TestPhoneSuccess+`"},"metadata":{"order_id":"A-1001","channel":"web"}`)
		var rf struct {
			ID       string
			Metadata map[string]string
		}
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "rmd-1",
			body: `{"transaction_id":"` + p.ID + `","amount":1000}`}).want(t, 201, "").data(t, &rf)
		if rf.Metadata["order_id"] != "A-1001" || rf.Metadata["channel"] != "web" || len(rf.Metadata) != 2 {
			t.Fatalf("refund metadata %v", rf.Metadata)
		}
		var evs []apiEvent
		e.do(call{method: "GET", path: "/v1/events?type=" + xaalis.EventRefundSuccess, key: keys.SecretTest}).want(t, 200, "").data(t, &evs)
		if len(evs) != 1 {
			t.Fatalf("refund.success events: %d", len(evs))
		}
		legacy := evs[0].payload(t, xaalis.FormatLegacy, "transaction", rf.ID, e.clock.Now())
		modern := evs[0].payload(t, xaalis.Format20260601, "transaction", rf.ID, e.clock.Now())
		var l struct {
			Data struct{ Metadata map[string]string }
		}
		var m struct {
			Data struct {
				Object struct{ Metadata map[string]string }
			}
		}
		if json.Unmarshal(legacy, &l) != nil || l.Data.Metadata["order_id"] != "A-1001" {
			t.Errorf("legacy: %s", legacy)
		}
		if json.Unmarshal(modern, &m) != nil || m.Data.Object.Metadata["order_id"] != "A-1001" {
			t.Errorf("2026-06-01: %s", modern)
		}
	})
}

// TestFXPartialRefunds: the refunds of a payment in another currency than
// its merchant's are worth, together, exactly what the payment was worth:
// ten refunds of 1 EUR of a 10 EUR payment (6559.57 XOF) debit 6559.57,
// where each rounded on its own debited 6559.60.
func TestFXPartialRefunds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		for _, c := range []struct {
			ref    string
			amount int
		}{{"fx-r1", 1}, {"fx-r2", 2}, {"fx-r3", 3}} {
			_, p := e.pay(t, keys.SecretTest, c.ref, `"currency":"EUR","amount":10,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			if p.Status != "success" || p.SettlementAmount != "6559.57" {
				t.Fatalf("payment: %+v", p)
			}
			var total int64
			for left, i := 10, 0; left > 0; i++ {
				amount := min(c.amount, left)
				left -= amount
				var rf txRecord
				e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: fmt.Sprint(c.ref, "-", i),
					body: fmt.Sprintf(`{"transaction_id":"%s","amount":%d}`, p.ID, amount)}).want(t, 201, "").data(t, &rf)
				var whole, cents int64
				if _, err := fmt.Sscanf(rf.SettlementAmount, "%d.%d", &whole, &cents); err != nil || rf.SettlementCurrency != "XOF" {
					t.Fatalf("refund %d: %+v", i, rf)
				}
				total += whole*100 + cents
			}
			if total != 655957 {
				t.Fatalf("refunds of %d EUR: worth %d XOF cents together, the payment 655957", c.amount, total)
			}
			if st := e.status(t, keys.SecretTest, p.ID); st != "refunded" {
				t.Fatalf("payment %s", st)
			}
		}
		e.ledgerOK(t)
	})
}

// TestFXRefundsWorthNothing: a refund of a payment settled in another
// currency whose worth there rounds to 0.00 (the last 3 XOF of a 1,000 XOF
// payment settled in EUR, or refunds of 1 XOF) is made, moving nothing on
// the merchant's balance; it answered 500, and what was left of the
// payment could never be refunded.
func TestFXRefundsWorthNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys, err := e.app.CreateMerchant(context.Background(), xaalis.MerchantCreate{Name: "Boutique Paris", SettlementCurrency: xaalis.EUR})
		if err != nil {
			t.Fatal(err)
		}
		refund := func(idem, id string, amount int) txRecord {
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: idem,
				body: fmt.Sprintf(`{"transaction_id":"%s","amount":%d}`, id, amount)}).want(t, 201, "").data(t, &rf)
			return rf
		}
		_, p := e.pay(t, keys.SecretTest, "eur-1", `"amount":1000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		if p.Status != "success" || p.SettlementAmount != "1.52" {
			t.Fatalf("payment: %+v", p)
		}
		if rf := refund("r-1", p.ID, 997); rf.SettlementAmount != "1.52" {
			t.Fatalf("refund of 997: %+v", rf)
		}
		if rf := refund("r-2", p.ID, 3); rf.Status != "success" || rf.SettlementAmount != "0.00" {
			t.Fatalf("refund of the last 3: %+v", rf)
		}
		if st := e.status(t, keys.SecretTest, p.ID); st != "refunded" {
			t.Fatalf("payment %s", st)
		}
		_, q := e.pay(t, keys.SecretTest, "eur-2", `"amount":1000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		for i := range 4 {
			refund(fmt.Sprint("r1-", i), q.ID, 1)
		}
		// A dispute of 2 XOF holds nothing in EUR, and its loss moves nothing.
		d, err := e.app.OpenDispute(context.Background(), xaalis.DisputeOpen{TransactionID: q.ID, Amount: 200})
		if err != nil {
			t.Fatal(err)
		}
		if d, err = e.app.DecideDispute(context.Background(), d.ID, xaalis.DisputeLost, ""); err != nil || d.Status != xaalis.DisputeLost {
			t.Fatalf("dispute decided: %+v %v", d, err)
		}
		e.ledgerOK(t)
	})
}

// TestFXPaymentWorthNothing: with the floors at 0, a payment of 1 to 3
// XOF to a merchant settled in EUR is worth 0.00 EUR, which the ledger
// cannot post: it answered 500 api_error. It is a validation_error on
// amount; 4 XOF (0.01 EUR) is a payment.
func TestFXPaymentWorthNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.MerchantLimits.MinAmount = 0
			cfg.Providers = maps.Clone(cfg.Providers)
			spec := cfg.Providers["channel_a"]
			spec.MinAmount = 0
			cfg.Providers["channel_a"] = spec
			a.Config = &cfg
		})
		_, keys, err := e.app.CreateMerchant(context.Background(), xaalis.MerchantCreate{Name: "Boutique Paris", SettlementCurrency: xaalis.EUR})
		if err != nil {
			t.Fatal(err)
		}
		r := e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "eur-3",
			body: payBody("eur-3", `"amount":3,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)}).
			want(t, 422, xaalis.EValidation)
		if len(r.err.Errors["amount"]) == 0 {
			t.Fatalf("the error names no amount: %s", r.body)
		}
		if _, p := e.pay(t, keys.SecretTest, "eur-4", `"amount":4,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`); p.Status != "success" || p.SettlementAmount != "0.01" {
			t.Fatalf("payment of 4 XOF: %+v", p)
		}
		e.ledgerOK(t)
	})
}

// TestFXDisputeAfterRefund: a dispute after a refund of a payment settled
// in another currency is worth, with the refunds, what the payment
// credited: rounded on its own, a 2 EUR payment (1,311.91 XOF) refunded
// 1 EUR (655.96) then disputed held 655.96 more, 0.01 past it.
func TestFXDisputeAfterRefund(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "fxd-1", `"amount":2,"currency":"EUR","provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		if p.Status != "success" || p.SettlementAmount != "1311.91" {
			t.Fatalf("payment: %+v", p)
		}
		var rf txRecord
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "fxd-r",
			body: `{"transaction_id":"` + p.ID + `","amount":1}`}).want(t, 201, "").data(t, &rf)
		if rf.SettlementAmount != "655.96" {
			t.Fatalf("refund: %+v", rf)
		}
		d, err := e.app.OpenDispute(context.Background(), xaalis.DisputeOpen{TransactionID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		if d.LedgerAmount.Minor != 65595 {
			t.Fatalf("the dispute holds %v, want 655.95", d.LedgerAmount)
		}
		e.ledgerOK(t)
	})
}

func TestRefunds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 50000) // available 49 500
		_, p := e.pay(t, keys.SecretTest, "ref-pay", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		refund := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: idem, body: body, invalid: true})
		}

		t.Run("ErrValidation", func(t *testing.T) {
			r := refund("rv-1", `{"transaction_id":"ref-pay","amount":100}`).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["transaction_id"]) == 0 {
				t.Fatalf("merchant_ref accepted as transaction_id: %s", r.body)
			}
			refund("rv-2", `{"transaction_id":"`+p.ID+`","amount":0}`).want(t, 422, xaalis.EAmountMustBePositive)
		})
		t.Run("ErrTransactionNotFound", func(t *testing.T) {
			r := refund("rn-1", `{"transaction_id":"TXN-ZZZZZZZZZZZZZZZZ","amount":100}`).want(t, 404, xaalis.ETransactionNotFound)
			if r.err.Context["transaction_id"] != "TXN-ZZZZZZZZZZZZZZZZ" {
				t.Fatalf("context %v", r.err.Context)
			}
			// "Older references, 14 characters, stay valid": with or
			// without the prefix, they pass the format and are looked up.
			for i, ref := range []string{"TXN-ZZZZZZZZZZZZZZ", "TXN-ZZZZZZZZZZ"} {
				refund(fmt.Sprint("rn-old-", i), `{"transaction_id":"`+ref+`","amount":100}`).want(t, 404, xaalis.ETransactionNotFound)
			}
		})
		t.Run("OKUpperCaseID", func(t *testing.T) {
			_, k2 := e.merchant() // apart: the balances below are this merchant's
			_, q := e.pay(t, k2.SecretTest, "ref-upper", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			var rf struct {
				Type      string
				PaymentID *string `json:"payment_id"`
			}
			e.do(call{method: "POST", path: "/v1/refunds", key: k2.SecretTest, idem: "ru-1",
				body: `{"transaction_id":"` + strings.ToUpper(q.ID) + `","amount":100}`}).want(t, 201, "").data(t, &rf)
			if rf.Type != "refund" || rf.PaymentID == nil || *rf.PaymentID != q.ID {
				t.Fatalf("refund of %s: %+v", q.ID, rf)
			}
			// Reads take the id in upper case too.
			var got txRecord
			for _, path := range []string{"/v1/payments/", "/v1/status/"} {
				e.do(call{method: "GET", path: path + strings.ToUpper(q.ID), key: k2.SecretTest}).want(t, 200, "").data(t, &got)
				if got.ID != q.ID {
					t.Fatalf("%s%s: %+v", path, strings.ToUpper(q.ID), got)
				}
			}
		})
		t.Run("ErrTransactionNotRefundable", func(t *testing.T) {
			_, q := e.pay(t, keys.SecretTest, "ref-pending", `"provider":"channel_a","payer":{"phone":"+221771234567"}`)
			r := refund("rp-1", `{"transaction_id":"`+q.Reference+`","amount":100}`).want(t, 422, xaalis.ETransactionNotRefundable)
			if r.err.Context["status"] != "pending" {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("ErrRefundNotSupported", func(t *testing.T) {
			_, q := e.pay(t, keys.SecretTest, "ref-b", `"provider":"channel_b","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			r := refund("rb-1", `{"transaction_id":"`+q.ID+`","amount":100}`).want(t, 422, xaalis.ERefundNotSupported)
			if r.err.Context["provider"] != "channel_b" || !strings.Contains(r.err.Message, "payout") {
				t.Fatalf("refund_not_supported: %s", r.body)
			}
			// The operator marks it refunded by hand; asked again, the same
			// record answers, its payment_url and checkout_url included.
			admin, token := adminEnv(t, e)
			for i := range 2 {
				st, out := operatorDo(t, admin, token, "POST", "/admin/v1/payments/"+q.ID+"/mark-refunded", `{"note":"paid back by payout"}`)
				d, _ := out["data"].(map[string]any)
				if st != 200 || d["status"] != "refunded" || q.PaymentURL == nil || d["payment_url"] != *q.PaymentURL || d["checkout_url"] != *q.PaymentURL {
					t.Fatalf("mark-refunded, call %d: %d %v", i+1, st, out)
				}
			}
			// The note is kept in the audit entry (once: the second call
			// changed nothing).
			_, log := operatorDo(t, admin, token, "GET", "/admin/v1/audit-log", "")
			entries, _ := log["data"].([]any)
			first, _ := entries[0].(map[string]any)
			if first["action"] != "payment.mark_refunded" || first["note"] != "paid back by payout" {
				t.Fatalf("audit log: %v", log)
			}
			for _, x := range entries[1:] {
				if e, _ := x.(map[string]any); e["action"] == "payment.mark_refunded" {
					t.Fatalf("two audit entries for one change: %v", log)
				}
			}
		})
		t.Run("OKPartialThenFull", func(t *testing.T) {
			r := refund("r-1", `{"transaction_id":"`+p.Reference+`","amount":4000,"reason":"returned item"}`).want(t, 201, "")
			var rf txRecord
			r.data(t, &rf)
			if rf.Type != "refund" || rf.Status != "success" || rf.Amount != "4000.00" {
				t.Fatalf("refund: %s", r.body)
			}
			if evs := e.events(t, rf.ID); len(evs) != 1 || evs[0] != xaalis.EventRefundSuccess {
				t.Fatalf("refund events %v", evs)
			}
			if evs := e.events(t, p.ID); len(evs) != 2 || evs[1] != xaalis.EventPaymentPartiallyRefunded {
				t.Fatalf("payment events %v", evs)
			}
			r = refund("r-2", `{"transaction_id":"`+p.ID+`","amount":7000}`).want(t, 422, xaalis.ERefundExceedsRefundable)
			c := r.err.Context
			if c["requested"] != float64(7000) || c["refundable"] != float64(6000) || c["already_refunded"] != float64(4000) {
				t.Fatalf("context %v", c)
			}
			refund("r-3", `{"transaction_id":"`+p.ID+`","amount":6000}`).want(t, 201, "")
			var got txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretTest}).data(t, &got)
			if got.Status != "refunded" {
				t.Fatalf("payment %s", got.Status)
			}
			if evs := e.events(t, p.ID); evs[len(evs)-1] != xaalis.EventPaymentRefunded {
				t.Fatalf("payment events %v", evs)
			}
			refund("r-4", `{"transaction_id":"`+p.ID+`","amount":1}`).want(t, 422, xaalis.ETransactionAlreadyFullyRefunded)
			// 49 500 funded + 9 900 (this payment) + 4 925 (the channel_b one,
			// 1.5 %) − 10 000 refunded; the pending payment is in pending.
			if bal := e.balance(t, keys.SecretTest); bal.Available != 54325 || bal.Reserved != 0 || bal.Pending != 5000 {
				t.Fatalf("balance after refunds: %+v", bal)
			}
		})
		t.Run("ErrNonPaymentTransactionRefund", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "np-1",
				body: payoutBody("np-1", 100, "channel_a", "+221771112233")}).want(t, 201, "")
			var po txRecord
			r.data(t, &po)
			r = refund("np-2", `{"transaction_id":"`+po.ID+`","amount":100}`).want(t, 422, xaalis.ENonPaymentTransactionRefund)
			if r.err.Context["type"] != "payout" {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("OKConcurrent", func(t *testing.T) {
			_, q := e.pay(t, keys.SecretTest, "ref-conc", `"amount":1000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			var ok atomic.Int32
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := refund(fmt.Sprint("rc-", i), `{"transaction_id":"`+q.ID+`","amount":300}`)
					if r.status == 201 {
						ok.Add(1)
					} else if r.err.Code != xaalis.ERefundExceedsRefundable {
						t.Errorf("refund %d: %d %s\n%s", i, r.status, r.body, e.logs.String())
					}
				}()
			}
			wg.Wait()
			if ok.Load() != 3 {
				t.Fatalf("%d refunds of 300 on a 1 000 payment", ok.Load())
			}
		})
		e.ledgerOK(t)
	})
}

// adminEnv serves the operator API beside e's API and returns its URL and
// an operator token.
func adminEnv(t *testing.T, e *env) (*httptest.Server, string) {
	srv := httptest.NewServer(xhttp.NewAdmin(e.app, nil, xhttp.NewServer(e.app, slogDiscard(), xhttp.DefaultConfig(), api.OpenAPI, nil), nil))
	t.Cleanup(srv.Close)
	_, token, err := e.app.CreateOperatorToken(context.Background(), "ops", nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, token
}

func TestPayoutRequests(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 200000) // available 198 000
		admin, token := adminEnv(t, e)
		move := func(id, action, body, tok string) (int, string) {
			req := mustRequest(t, "POST", admin.URL+"/admin/v1/payout-requests/"+id+"/"+action, body)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var out struct {
				Data  struct{ Status string }
				Error struct{ Code string }
			}
			_ = json.NewDecoder(res.Body).Decode(&out)
			return res.StatusCode, out.Data.Status + out.Error.Code
		}
		submit := func(idem string, amount int) *response {
			return e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: idem,
				body: fmt.Sprintf(`{"amount":%d,"currency":"XOF","destination_phone":"+221771112233","destination_bank":null,"merchant_note":"weekly"}`, amount)})
		}
		var pr struct {
			ID, Reference, Status, Amount string
			FeeAmount                     string `json:"fee_amount"`
			NetAmount                     string `json:"net_amount"`
			Destination                   struct{ Phone *string }
		}
		submit("pr-1", 50000).want(t, 201, "").data(t, &pr)
		// 0.5 % fee, at least 500.
		if pr.Status != "submitted" || !strings.HasPrefix(pr.Reference, "PR-") || pr.FeeAmount != "500.00" || pr.NetAmount != "49500.00" ||
			pr.Destination.Phone == nil {
			t.Fatalf("payout request: %+v", pr)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available != 148000 || bal.Reserved != 50000 {
			t.Fatalf("reserved at submission: %+v", bal)
		}
		if evs := e.events(t, pr.ID); len(evs) != 1 || evs[0] != xaalis.EventPRSubmitted {
			t.Fatalf("events %v", evs)
		}
		if st, code := move(pr.ID, "approve", "", ""); st != 401 {
			t.Fatalf("no token: %d %s", st, code)
		}
		if st, code := move(pr.ID, "complete", "", token); st != 422 || code != "validation_error" {
			t.Fatalf("complete before approval: %d %s", st, code)
		}
		if st, s := move(pr.ID, "approve", "", token); st != 200 || s != "approved" {
			t.Fatalf("approve: %d %s", st, s)
		}
		if st, s := move(pr.ID, "complete", "", token); st != 200 || s != "completed" {
			t.Fatalf("complete: %d %s", st, s)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available != 148000 || bal.Reserved != 0 {
			t.Fatalf("after settlement: %+v", bal)
		}
		var sets []struct{ Object, Status, PayoutRequestID string }
		r := e.do(call{method: "GET", path: "/v1/settlements", key: keys.SecretTest}).want(t, 200, "")
		r.data(t, &sets)
		if len(sets) != 1 || sets[0].Object != "settlement" {
			t.Fatalf("settlements: %s", r.body)
		}

		var rej struct{ ID string }
		submit("pr-2", 10000).want(t, 201, "").data(t, &rej)
		if st, code := move(rej.ID, "reject", `{}`, token); st != 422 || code != "validation_error" {
			t.Fatalf("reject without reason: %d %s", st, code)
		}
		if st, s := move(rej.ID, "reject", `{"reason":"unknown account"}`, token); st != 200 || s != "rejected" {
			t.Fatalf("reject: %d %s", st, s)
		}
		var fl struct{ ID string }
		submit("pr-3", 10000).want(t, 201, "").data(t, &fl)
		move(fl.ID, "approve", "", token)
		if st, s := move(fl.ID, "fail", `{"reason":"bank refused"}`, token); st != 200 || s != "failed" {
			t.Fatalf("fail: %d %s", st, s)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available != 148000 || bal.Reserved != 0 {
			t.Fatalf("after reject and fail: %+v", bal)
		}
		evs := e.events(t, fl.ID)
		if strings.Join(evs, ",") != "payout_request.submitted,payout_request.approved,payout_request.failed" {
			t.Fatalf("events %v", evs)
		}
		var got struct{ Status string }
		e.do(call{method: "GET", path: "/v1/payout-requests/" + rej.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &got)
		if got.Status != "rejected" {
			t.Fatalf("status %s", got.Status)
		}
		var list []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/payout-requests", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
		if len(list) != 3 || list[0].ID != fl.ID {
			t.Fatalf("list: %+v", list)
		}
		// One page of the last 50: a page past it is empty, with its own
		// number; a page past 1,000,000 is refused, as on every list.
		r = e.do(call{method: "GET", path: "/v1/payout-requests?page=2", key: keys.SecretTest}).want(t, 200, "")
		r.data(t, &list)
		if len(list) != 0 || !strings.Contains(string(r.body), `"current_page":2`) || !strings.Contains(string(r.body), `"total":3`) {
			t.Fatalf("page 2: %s", r.body)
		}
		for _, bad := range []string{"1000001", "0", "x"} {
			e.do(call{method: "GET", path: "/v1/payout-requests?page=" + bad, key: keys.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
		}
		submit("pr-big", 1000000).want(t, 422, xaalis.EInsufficientBalance)
		e.ledgerOK(t)
	})
}

func TestPayoutRequestThrottle(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		id, keys := e.merchant()
		kyc := xaalis.KYCApproved
		if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
			t.Fatal(err)
		}
		e.fund(t, keys.SecretTest, 1, 100000)
		for i := range 10 {
			e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: fmt.Sprint("th-", i),
				body: `{"amount":1000,"destination_phone":"+221771112233"}`}).want(t, 201, "")
		}
		r := e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: "th-10",
			body: `{"amount":1000,"destination_phone":"+221771112233"}`}).want(t, 429, xaalis.ETooManyRequests)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		// Test and live are counted apart: test requests never hold back
		// a live withdrawal (refused here for the live balance, 0).
		e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretLive, idem: "th-live",
			body: `{"amount":1000,"destination_phone":"+221771112233"}`}).want(t, 422, xaalis.EInsufficientBalance)
		e.clock.Advance(61 * time.Second)
		e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: "th-11",
			body: `{"amount":1000,"destination_phone":"+221771112233"}`}).want(t, 201, "")
	})
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// TestIdempotencyKeyReusedAfterExpiry: an Idempotency-Key is kept 24 hours;
// after it, the same key names a new request. A payout, a refund and a
// payment made under a key used a day before are new ones: a payout or a
// refund answered the old one (the new was never made), and another
// record under the key could not be written at all.
func TestIdempotencyKeyReusedAfterExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		e.fund(t, keys.SecretTest, 1, 50000)
		_, p := e.pay(t, keys.SecretTest, "reuse-pay", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		create := func(path, key, body string) txRecord {
			var rec txRecord
			e.do(call{method: "POST", path: path, key: keys.SecretTest, idem: key, body: body}).want(t, 201, "").data(t, &rec)
			return rec
		}
		payout := func(ref string, amount int) string {
			return fmt.Sprintf(`{"merchant_ref":"%s","amount":%d,"provider":"channel_a","recipient":{"phone":"%s"}}`, ref, amount, provider.TestPhoneSuccess)
		}
		po1 := create("/v1/payouts", "day-key-1", payout("po-reuse-1", 1000))
		rf1 := create("/v1/refunds", "day-key-2", `{"transaction_id":"`+p.ID+`","amount":1000}`)
		e.clock.Advance(25 * time.Hour)
		if _, err := e.app.Store.PurgeIdempotency(context.Background(), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		po2 := create("/v1/payouts", "day-key-1", payout("po-reuse-2", 2000))
		if po2.ID == po1.ID || po2.Amount != "2000.00" {
			t.Fatalf("a payout under a key of yesterday: %+v, yesterday's %+v", po2, po1)
		}
		rf2 := create("/v1/refunds", "day-key-2", `{"transaction_id":"`+p.ID+`","amount":2000}`)
		if rf2.ID == rf1.ID || rf2.Amount != "2000.00" {
			t.Fatalf("a refund under a key of yesterday: %+v, yesterday's %+v", rf2, rf1)
		}
		// The same refund asked again a day later (a client retrying long
		// after a crash) is that refund: a late retry never refunds twice.
		e.clock.Advance(25 * time.Hour)
		if _, err := e.app.Store.PurgeIdempotency(context.Background(), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if rf3 := create("/v1/refunds", "day-key-2", `{"transaction_id":"`+p.ID+`","amount":2000}`); rf3.ID != rf2.ID {
			t.Fatalf("the same refund a day later: %+v, the first %+v", rf3, rf2)
		}
		// Another kind of record under a key a payout had.
		create("/v1/refunds", "day-key-1-b", `{"transaction_id":"`+p.ID+`","amount":500}`)
		e.clock.Advance(25 * time.Hour)
		if _, err := e.app.Store.PurgeIdempotency(context.Background(), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		create("/v1/payouts", "day-key-1-b", payout("po-reuse-3", 1500))
		// Within its day, a key whose request's answer was not kept (a
		// 5xx lets it go) and comes back with another request is a
		// conflict, not the first request's record.
		amt := func(n int64) *xaalis.Number {
			var v xaalis.Number
			_ = v.UnmarshalJSON([]byte(fmt.Sprint(n)))
			return &v
		}
		_, err := e.app.CreateRefund(context.Background(), e.principal(keys.SecretTest), "day-key-1-b",
			xaalis.RefundInput{TransactionID: &p.ID, Amount: amt(300)})
		if xaalis.ErrorCode(err) != xaalis.EIdempotencyConflict {
			t.Fatalf("another refund under a key of the day: %v", err)
		}
		e.ledgerOK(t)
	})
}
