package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// liveEnv is a server whose live mode reaches the provider emulator over
// HTTP, and a merchant whose KYC is approved.
func liveEnv(t *testing.T, b backend) (*env, *provider.Emulator, xaalis.MerchantKeys) {
	emu := provider.NewEmulator(provider.EmulatorOptions{})
	emuSrv := httptest.NewServer(emu)
	t.Cleanup(func() { emuSrv.Close(); emu.Close() })
	e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
		cfg, err := provider.EmulatorConfig(emuSrv.URL)
		if err != nil {
			t.Fatal(err)
		}
		for name, spec := range cfg.Providers {
			for i := range spec.Routes {
				spec.Routes[i].TimeoutMS = 2000
			}
			cfg.Providers[name] = spec
		}
		cfg.ReconcileAfterSeconds = 60
		a.Config = cfg
		// The breakers follow the test's clock: a test that moves past a
		// breaker's cool-down finds it half-open.
		a.Gateway = provider.New(cfg, provider.Options{BreakerThreshold: 3, BreakerCooldown: time.Minute, Now: a.Now})
	})
	id, keys := e.merchant()
	kyc := xaalis.KYCApproved
	if _, err := e.app.UpdateMerchant(context.Background(), id, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
		t.Fatal(err)
	}
	return e, emu, keys
}

func (e *env) status(t *testing.T, key, id string) string {
	t.Helper()
	var p txRecord
	e.do(call{method: "GET", path: "/v1/payments/" + id, key: key}).want(t, 200, "").data(t, &p)
	return p.Status
}

// payerPays has the emulator's payer approve collection col of payment
// id: its notification delivered, the payment is success, with one event.
func (e *env) payerPays(t *testing.T, emu *provider.Emulator, key, id, col string) provider.Delivery {
	t.Helper()
	d, err := emu.PayerAct(col, xaalis.ProviderSuccess)
	if err != nil || !d.Sent || d.Status != http.StatusOK {
		t.Fatalf("the provider's notification: %+v, %v", d, err)
	}
	if st := e.status(t, key, id); st != "success" {
		t.Fatalf("after the payer paid: %s", st)
	}
	if evs := e.events(t, id); len(evs) != 1 || evs[0] != xaalis.EventPaymentSuccess {
		t.Fatalf("events %v", evs)
	}
	return d
}

// paidThenDirect makes a live channel_a payment that its payer paid, then
// sets channel_a's direct route to sw until the test ends (Timeout: a
// refund of it has an unknown outcome there).
func (e *env) paidThenDirect(t *testing.T, emu *provider.Emulator, key, ref, phone string, sw provider.RouteSwitches) txRecord {
	t.Helper()
	r, p := e.pay(t, key, ref, `"provider":"channel_a","payer":{"phone":"`+phone+`"}`)
	r.want(t, 201, "")
	if _, err := emu.PayerAct(providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.SetRoute("channel_a", "direct", provider.RouteSwitches{}) })
	if err := emu.SetRoute("channel_a", "direct", sw); err != nil {
		t.Fatal(err)
	}
	return p
}

// paidThenAllDown is paidThenDirect with both of channel_a's routes down
// afterwards, until the test ends: what is sent to its provider reaches
// none.
func (e *env) paidThenAllDown(t *testing.T, emu *provider.Emulator, key, ref, phone string) txRecord {
	t.Helper()
	p := e.paidThenDirect(t, emu, key, ref, phone, provider.RouteSwitches{Down: true})
	if err := emu.SetRoute("channel_a", "aggregator", provider.RouteSwitches{Down: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.SetRoute("channel_a", "aggregator", provider.RouteSwitches{}) })
	return p
}

// heldPayout is a pending live payout of 1,000 XOF on channel_a (merchant
// ref), funded by a payment from payer (payRef), which the emulator holds
// (hold_payouts) and whose notifications it loses, both until the test
// ends: only a lookup by its reference, or the operator, settles it.
func (e *env) heldPayout(t *testing.T, emu *provider.Emulator, key, payRef, payer, ref, recipient string) txRecord {
	t.Helper()
	e.paidThenDirect(t, emu, key, payRef, payer, provider.RouteSwitches{})
	if err := emu.SetProvider("channel_a", provider.ProviderSwitches{HoldPayouts: true, LoseCallbacks: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.SetProvider("channel_a", provider.ProviderSwitches{}) })
	var po txRecord
	e.do(call{method: "POST", path: "/v1/payouts", key: key, idem: ref,
		body: payoutBody(ref, 1000, "channel_a", recipient)}).want(t, 201, "").data(t, &po)
	return po
}

// dispatchDue moves the clock past DispatchAfter and runs the dispatcher
// once: every payout and refund due is sent, or asked about.
func (e *env) dispatchDue(t *testing.T) {
	t.Helper()
	e.clock.Advance(xaalis.DispatchAfter + time.Second)
	if _, err := e.app.DispatchDue(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
}

// postGivingUp posts body to path as a client that gives up after
// timeout, before the answer.
func (e *env) postGivingUp(t *testing.T, path, key, idem, body string, timeout time.Duration) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idem)
	req.Header.Set("Content-Type", "application/json")
	if _, err := (&http.Client{Timeout: timeout}).Do(req); err == nil {
		t.Fatalf("%s answered before the client gave up", path)
	}
}

// retryPastInFlight posts the same request again until the first one's
// handler has finished (409 while it is at work), and returns the answer.
func (e *env) retryPastInFlight(t *testing.T, path, key, idem, body string) *response {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := e.do(call{method: "POST", path: path, key: key, idem: idem, body: body, invalid: true})
		if r.status != 409 || time.Now().After(deadline) {
			return r
		}
	}
}

// postNotification sends a provider notification signed with secret.
func (e *env) postNotification(t *testing.T, prov, secret string, ev provider.Event, at time.Time) *response {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e.do(call{method: "POST", path: "/v1/providers/" + prov + "/notifications", body: string(body),
		header: map[string]string{provider.SignatureHeader: provider.Sign(secret, at, body)}})
}

func TestLivePayments(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		secretB := e.app.Config.Providers["channel_b"].Routes[0].NotifySecret

		t.Run("OKNotification", func(t *testing.T) {
			r, p := e.pay(t, keys.SecretLive, "live-1", `"provider":"channel_b","payer":{"phone":"+221771234567"}`)
			r.want(t, 201, "")
			if p.Status != "pending" || !p.Livemode || p.Route == nil || p.Route.Name != "direct" || p.NextAction == nil || p.NextAction.Type != "otp" {
				t.Fatalf("live payment: %s", r.body)
			}
			ref := providerRef(t, e, p.ID)
			d := e.payerPays(t, emu, keys.SecretLive, p.ID, ref)
			// The same notification again: 200 duplicate, nothing done.
			ev := provider.Event{EventID: d.EventID, Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: ref, Status: "failed"}}
			r = e.postNotification(t, "channel_b", secretB, ev, time.Now()).want(t, 200, "")
			if !strings.Contains(string(r.body), `"duplicate"`) {
				t.Fatalf("duplicate: %s", r.body)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("a duplicate changed the payment: %s", st)
			}
		})
		t.Run("ErrNotificationControlCharacter", func(t *testing.T) {
			// A signed notification carrying a control character is refused
			// before anything of it is stored: the same event, clean, then
			// applies.
			r, p := e.pay(t, keys.SecretLive, "ctl-1", `"provider":"channel_b","payer":{"phone":"+221771234590"}`)
			r.want(t, 201, "")
			ref := providerRef(t, e, p.ID)
			ev := provider.Event{EventID: "ev-ctl-1", Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: ref, Status: "failed", Reason: "bad\areason"}}
			e.postNotification(t, "channel_b", secretB, ev, time.Now()).want(t, 422, xaalis.EValidation)
			if st := e.status(t, keys.SecretLive, p.ID); st != "pending" {
				t.Fatalf("after a refused notification: %s", st)
			}
			ev.Collection.Reason = "payer_declined"
			if r := e.postNotification(t, "channel_b", secretB, ev, time.Now()).want(t, 200, ""); strings.Contains(string(r.body), "duplicate") {
				t.Fatalf("the refused notification was recorded: %s", r.body)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "failed" {
				t.Fatalf("after the clean notification: %s", st)
			}
		})
		t.Run("ErrInvalidSignature", func(t *testing.T) {
			ev := provider.Event{EventID: "ev-x", Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: "nope", Status: "success"}}
			e.postNotification(t, "channel_b", "wrong-secret", ev, time.Now()).want(t, 401, xaalis.EInvalidSignature)
			e.postNotification(t, "channel_b", secretB, ev, time.Now().Add(-10*time.Minute)).want(t, 401, xaalis.EInvalidSignature)
			r := e.do(call{method: "POST", path: "/v1/providers/channel_b/notifications", body: `{"event_id":"x"}`}).want(t, 401, xaalis.EInvalidSignature)
			// RFC 9110 11.6.1: every 401 names its scheme, here the
			// signature's, not a Bearer key's.
			if got := r.header.Get("WWW-Authenticate"); got != xhttp.ProviderSignatureChallenge {
				t.Fatalf("WWW-Authenticate %q", got)
			}
		})
		t.Run("ErrProviderUnavailableWebhook", func(t *testing.T) {
			ev := provider.Event{EventID: "ev-z", Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: "col-1", Status: "success"}}
			e.postNotification(t, "channel_z", secretB, ev, time.Now()).want(t, 404, xaalis.EProviderUnavailableWebhook)
			// channel_c serves Senegal only.
			ev.Country = "CI"
			e.postNotification(t, "channel_c", e.app.Config.Providers["channel_c"].Routes[0].NotifySecret, ev, time.Now()).
				want(t, 404, xaalis.EProviderUnavailableWebhook)
		})
		t.Run("OKFailover", func(t *testing.T) {
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetRoute("channel_a", "direct", provider.RouteSwitches{})
			r, p := e.pay(t, keys.SecretLive, "failover-1", `"provider":"channel_a","payer":{"phone":"+221771234568"}`)
			r.want(t, 201, "")
			if p.Status != "pending" || p.Route == nil || p.Route.Name != "aggregator" || !strings.Contains(p.Route.Reason, "failover") {
				t.Fatalf("failover: %s", r.body)
			}
			if _, err := emu.PayerAct(providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil {
				t.Fatal(err)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("failed-over payment: %s", st)
			}
		})
		t.Run("OKTimedOutInitiationPaid", func(t *testing.T) {
			// The provider takes the collection and its answer never comes
			// back: the payment stays initiated, without the provider's id.
			// Its notifications name it by reference: the payer's
			// confirmation settles it (a pending one first hands it to
			// reconciliation).
			secretC := e.app.Config.Providers["channel_c"].Routes[0].NotifySecret
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
				t.Fatal(err)
			}
			r, _ := e.pay(t, keys.SecretLive, "timeout-1", `"provider":"channel_c","payer":{"phone":"+221771234570"}`)
			r.want(t, 503, xaalis.EGatewayUnavailable)
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}); err != nil {
				t.Fatal(err)
			}
			var p txRecord
			e.do(call{method: "GET", path: "/v1/payments/timeout-1", key: keys.SecretLive}).want(t, 200, "").data(t, &p)
			if p.Status != "initiated" || providerRef(t, e, p.ID) != "" {
				t.Fatalf("after the timeout: %+v", p)
			}
			var col provider.EmulatedCollection
			for _, c := range emu.Collections() {
				if c.Reference == p.Reference {
					col = c
				}
			}
			if col.ID == "" {
				t.Fatal("the emulator did not take the collection")
			}
			ev := provider.Event{EventID: "ev-timeout-pending", Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: col.ID, Reference: p.Reference, Status: "pending"}}
			e.postNotification(t, "channel_c", secretC, ev, time.Now()).want(t, 200, "")
			if st := e.status(t, keys.SecretLive, p.ID); st != "pending" || providerRef(t, e, p.ID) != col.ID {
				t.Fatalf("after a pending notification: %s %q", st, providerRef(t, e, p.ID))
			}
			e.payerPays(t, emu, keys.SecretLive, p.ID, col.ID)
			// Another provider's notification with that reference names
			// nothing of its own.
			ev = provider.Event{EventID: "ev-timeout-other", Type: provider.EventCollectionUpdated, Country: "SN",
				Collection: provider.EventCollection{ID: "col-other", Reference: p.Reference, Status: "failed"}}
			e.postNotification(t, "channel_b", secretB, ev, time.Now()).want(t, 404, xaalis.ENotFound)
			e.ledgerOK(t)
		})
		t.Run("OKRefundFailover", func(t *testing.T) {
			// A refund names the route that took it: the aggregator, when
			// the payment's direct route is down.
			r, p := e.pay(t, keys.SecretLive, "refund-fo-1", `"provider":"channel_a","payer":{"phone":"+221771234571"}`)
			r.want(t, 201, "")
			if p.Route == nil || p.Route.Name != "direct" {
				t.Fatalf("payment route: %s", r.body)
			}
			if _, err := emu.PayerAct(providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil {
				t.Fatal(err)
			}
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetRoute("channel_a", "direct", provider.RouteSwitches{})
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "refund-fo-1",
				body: `{"transaction_id":"` + p.ID + `","amount":2000}`}).want(t, 201, "").data(t, &rf)
			if rf.Route == nil || rf.Route.Name != "aggregator" || !strings.Contains(rf.Route.Reason, "failover") || rf.FailureReason != nil {
				t.Fatalf("refund: %+v %+v", rf, rf.Route)
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundPinnedAfterUnknownOutcome", func(t *testing.T) {
			// A refund whose answer never came back on direct is sent again
			// on direct only: when direct is down, the aggregator (which may
			// not share the provider's idempotency) is not asked, and the
			// refund waits, naming the route.
			p := e.paidThenDirect(t, emu, keys.SecretLive, "refund-unk-1", "+221771234574", provider.RouteSwitches{Timeout: true})
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "refund-unk-1",
				body: `{"transaction_id":"` + p.ID + `","amount":1500}`}).data(t, &rf)
			if rf.Status != "initiated" || rf.Route == nil || rf.Route.Name != "direct" || rf.Route.Reason != provider.RouteOutcomeUnknown {
				t.Fatalf("after the timeout: %+v %+v", rf, rf.Route)
			}
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			refunds := func() (n int) {
				for _, x := range emu.Refunds() {
					if x.Reference == rf.Reference {
						n++
						if x.Route != "direct" {
							t.Fatalf("the refund reached %s", x.Route)
						}
					}
				}
				return n
			}
			e.dispatchDue(t)
			var again txRecord
			e.do(call{method: "GET", path: "/v1/refunds/" + rf.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &again)
			if again.Status != "initiated" || again.Route == nil || again.Route.Name != "direct" || refunds() != 1 {
				t.Fatalf("with direct down: %+v %+v, %d refunds", again, again.Route, refunds())
			}
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{}); err != nil {
				t.Fatal(err)
			}
			e.dispatchDue(t)
			e.do(call{method: "GET", path: "/v1/refunds/" + rf.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &again)
			if again.Status != "success" || again.Route == nil || again.Route.Name != "direct" || refunds() != 1 {
				t.Fatalf("once direct answers: %+v %+v, %d refunds", again, again.Route, refunds())
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundPinnedWhenItsRequestIsCancelled", func(t *testing.T) {
			// The client gives up while the provider has not answered: the
			// route is recorded all the same, and the retry with the same
			// key goes there only, not to the aggregator while direct is
			// down.
			p := e.paidThenDirect(t, emu, keys.SecretLive, "refund-cancel-1", "+221771234576", provider.RouteSwitches{Timeout: true})
			body := `{"transaction_id":"` + p.ID + `","amount":1000}`
			e.postGivingUp(t, "/v1/refunds", keys.SecretLive, "refund-cancel-1", body, 300*time.Millisecond)
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			var rf txRecord
			e.retryPastInFlight(t, "/v1/refunds", keys.SecretLive, "refund-cancel-1", body).data(t, &rf)
			if rf.Status != "initiated" || rf.Route == nil || rf.Route.Name != "direct" {
				t.Fatalf("the refund after a cancelled request: %+v %+v", rf, rf.Route)
			}
			for _, x := range emu.Refunds() {
				if x.Reference == rf.Reference && x.Route != "direct" {
					t.Fatalf("the refund reached %s", x.Route)
				}
			}
		})
		t.Run("OKRefundCompletesWhenItsClientGivesUp", func(t *testing.T) {
			// The client hangs up while the provider is slow to answer: the
			// provider is asked to the end and the refund settles at once,
			// not a minute later as an unknown outcome.
			p := e.paidThenDirect(t, emu, keys.SecretLive, "refund-giveup-1", "+221771234578", provider.RouteSwitches{LatencyMS: 800})
			body := `{"transaction_id":"` + p.ID + `","amount":1000}`
			e.postGivingUp(t, "/v1/refunds", keys.SecretLive, "refund-giveup-1", body, 200*time.Millisecond)
			var rf txRecord
			e.retryPastInFlight(t, "/v1/refunds", keys.SecretLive, "refund-giveup-1", body).data(t, &rf)
			if rf.Status != "success" {
				t.Fatalf("the refund after its client gave up: %+v", rf)
			}
		})
		t.Run("ErrSecondChoiceWhileTheFirstIsSent", func(t *testing.T) {
			// Two choices on the hosted page at once: the second, made while
			// the first provider has not answered, is refused, and one
			// collection is started, not two; also after an earlier choice
			// was refused, whose reason the payment still carried.
			r, p := e.pay(t, keys.SecretLive, "choice-1", `"payer":{"phone":"+221771234575"}`)
			r.want(t, 201, "")
			choose := func(prov, phone string) *response {
				return e.do(call{method: "POST", path: "/checkout/" + p.ID + "/provider",
					body:   url.Values{"provider": {prov}, "phone": {phone}}.Encode(),
					header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.srv.URL}})
			}
			if r := choose("channel_b", provider.TestPhone("SN", "0005")); !strings.Contains(r.header.Get("Location"), "e=gateway_error") {
				t.Fatalf("a refused choice: %d %s", r.status, r.header.Get("Location"))
			}
			if err := emu.SetRoute("channel_b", "direct", provider.RouteSwitches{LatencyMS: 1500}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetRoute("channel_b", "direct", provider.RouteSwitches{})
			first := make(chan *response, 1)
			go func() { first <- choose("channel_b", "+221771234575") }()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				cur, err := e.app.Store.Transaction(context.Background(), "", p.ID)
				if err != nil {
					t.Fatal(err)
				}
				if cur.Provider == "channel_b" && cur.PayerPhone == "+221771234575" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the first choice was not recorded")
				}
			}
			if r := choose("channel_c", "+221771234575"); r.status != 303 || !strings.Contains(r.header.Get("Location"), "e=") {
				t.Fatalf("the second choice: %d %s", r.status, r.header.Get("Location"))
			}
			select {
			case <-first:
				t.Fatal("the first choice ended before the second was answered: the test did not race them")
			default:
			}
			if r := <-first; r.status != 303 || strings.Contains(r.header.Get("Location"), "e=") {
				t.Fatalf("the first choice: %d %s", r.status, r.header.Get("Location"))
			}
			var got txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &got)
			if got.Status != "pending" || *got.Provider != "channel_b" || got.NextAction == nil || got.NextAction.Type != "otp" {
				t.Fatalf("after the choices: %+v", got)
			}
			n := 0
			for _, c := range emu.Collections() {
				if c.Reference == p.Reference {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d collections started for one payment", n)
			}
		})
		t.Run("ErrGatewayUnavailable", func(t *testing.T) {
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetRoute("channel_c", "direct", provider.RouteSwitches{})
			r, _ := e.pay(t, keys.SecretLive, "down-1", `"provider":"channel_c","payer":{"phone":"+221771234569"}`)
			r.want(t, 503, xaalis.EGatewayUnavailable)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		})
		t.Run("OKReconcileLostCallback", func(t *testing.T) {
			if err := emu.SetProvider("channel_b", provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetProvider("channel_b", provider.ProviderSwitches{})
			_, p := e.pay(t, keys.SecretLive, "lost-1", `"provider":"channel_b","payer":{"phone":"+221771234570"}`)
			d, err := emu.PayerAct(providerRef(t, e, p.ID), xaalis.ProviderSuccess)
			if err != nil || !d.Lost {
				t.Fatalf("lost callback: %+v %v", d, err)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "pending" {
				t.Fatalf("before reconciliation: %s", st)
			}
			e.clock.Advance(61 * time.Second)
			defer e.clock.Advance(-61 * time.Second)
			n, err := e.app.ReconcileDue(context.Background(), 100)
			if err != nil || n < 1 {
				t.Fatalf("reconciled %d, %v", n, err)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("after reconciliation: %s", st)
			}
		})
		t.Run("OKDisputeFromProvider", func(t *testing.T) {
			_, p := e.pay(t, keys.SecretLive, "live-dsp", `"provider":"channel_b","amount":7000,"payer":{"phone":"+221771234573"}`)
			ref := providerRef(t, e, p.ID)
			if d, err := emu.PayerAct(ref, xaalis.ProviderSuccess); err != nil || d.Status != 200 {
				t.Fatalf("payer: %+v %v", d, err)
			}
			d, err := emu.OpenDispute(ref, 0, "payer says not received")
			if err != nil || !d.Sent || d.Status != 200 {
				t.Fatalf("the provider's dispute notification: %+v %v", d, err)
			}
			var list []disputeRecord
			e.do(call{method: "GET", path: "/v1/disputes?status=needs_response", key: keys.SecretLive}).want(t, 200, "").data(t, &list)
			if len(list) != 1 || list[0].TransactionID != p.ID || list[0].Amount != "7000.00" {
				t.Fatalf("disputes: %+v", list)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "disputed" {
				t.Fatalf("payment %s", st)
			}
			e.ledgerOK(t)
		})
		t.Run("OKSubMerchant", func(t *testing.T) {
			for _, c := range []struct{ provider, want string }{{"channel_a", "sub-42"}, {"channel_b", ""}} {
				_, p := e.pay(t, keys.SecretLive, "sub-"+c.provider, `"provider":"`+c.provider+`","payer":{"phone":"+221771234572"},"metadata":{"aggregated_merchant_id":"sub-42"}`)
				col, ok := emu.Collection(providerRef(t, e, p.ID))
				if !ok || col.SubMerchant != c.want || col.Reference != p.Reference || col.Amount != 500000 {
					t.Fatalf("%s: the provider got %+v", c.provider, col)
				}
			}
		})
		t.Run("OKOTPLive", func(t *testing.T) {
			_, p := e.pay(t, keys.SecretLive, "otp-1", `"provider":"channel_b","payer":{"phone":"+221771234571"}`)
			if _, err := e.app.SubmitOTP(context.Background(), p.ID, "000000"); xaalis.ErrorCode(err) != xaalis.EValidation {
				t.Fatalf("wrong code: %v", err)
			}
			after, err := e.app.SubmitOTP(context.Background(), p.ID, provider.TestOTP)
			if err != nil || after.Status != xaalis.StatusSuccess {
				t.Fatalf("right code: %v, %v", after, err)
			}
		})
		// Last: it moves the clock on by half an hour.
		t.Run("OKTimedOutInitiationPaidNotificationLost", func(t *testing.T) {
			// The answer lost, then the notification too: at expires_at the
			// provider is asked by reference. One the payer paid succeeds;
			// one the payer left alone expires, with the provider's id.
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
				t.Fatal(err)
			}
			var ps [2]txRecord
			for i := range ps {
				r, _ := e.pay(t, keys.SecretLive, fmt.Sprint("timeout-lost-", i), `"provider":"channel_c","payer":{"phone":"+22177123458`+fmt.Sprint(i)+`"}`)
				r.want(t, 503, xaalis.EGatewayUnavailable)
				e.do(call{method: "GET", path: fmt.Sprint("/v1/payments/timeout-lost-", i), key: keys.SecretLive}).want(t, 200, "").data(t, &ps[i])
			}
			for _, sw := range []error{emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}),
				emu.SetProvider("channel_c", provider.ProviderSwitches{LoseCallbacks: true})} {
				if sw != nil {
					t.Fatal(sw)
				}
			}
			defer emu.SetProvider("channel_c", provider.ProviderSwitches{})
			cols := map[string]string{}
			for _, c := range emu.Collections() {
				cols[c.Reference] = c.ID
			}
			if d, err := emu.PayerAct(cols[ps[0].Reference], xaalis.ProviderSuccess); err != nil || !d.Lost {
				t.Fatalf("the payer pays, the notification lost: %+v %v", d, err)
			}
			if st := e.status(t, keys.SecretLive, ps[0].ID); st != "initiated" {
				t.Fatalf("before expiry: %s", st)
			}
			e.clock.Advance(31 * time.Minute)
			if _, err := e.app.ExpireDue(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
			var paid txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + ps[0].ID, key: keys.SecretLive}).want(t, 200, "").data(t, &paid)
			if paid.Status != "success" || providerRef(t, e, ps[0].ID) != cols[ps[0].Reference] || paid.Route == nil || paid.Route.Name != "direct" {
				t.Fatalf("paid, at expiry: %+v %+v", paid, paid.Route)
			}
			if evs := e.events(t, ps[0].ID); len(evs) != 1 || evs[0] != xaalis.EventPaymentSuccess {
				t.Fatalf("events %v", evs)
			}
			if st := e.status(t, keys.SecretLive, ps[1].ID); st != "expired" || providerRef(t, e, ps[1].ID) != cols[ps[1].Reference] {
				t.Fatalf("not paid, at expiry: %s", st)
			}
			e.ledgerOK(t)
		})
		t.Run("OKExpiryPollsPendingAndVerifyAsks", func(t *testing.T) {
			// Notifications lost: a pending payment the payer paid is asked
			// about at expires_at (its expires_in shorter than
			// reconcile_after_seconds); a payment whose creation answer was
			// lost is asked about by reference on verify.
			if err := emu.SetProvider("channel_c", provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
				t.Fatal(err)
			}
			defer emu.SetProvider("channel_c", provider.ProviderSwitches{})
			r, p := e.pay(t, keys.SecretLive, "lost-pending", `"provider":"channel_c","expires_in":60,"payer":{"phone":"+221771234591"}`)
			r.want(t, 201, "")
			if d, err := emu.PayerAct(providerRef(t, e, p.ID), xaalis.ProviderSuccess); err != nil || !d.Lost {
				t.Fatalf("the payer pays, the notification lost: %+v %v", d, err)
			}
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
				t.Fatal(err)
			}
			r, _ = e.pay(t, keys.SecretLive, "lost-answer", `"provider":"channel_c","payer":{"phone":"+221771234592"}`)
			r.want(t, 503, xaalis.EGatewayUnavailable)
			if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}); err != nil {
				t.Fatal(err)
			}
			var q txRecord
			e.do(call{method: "GET", path: "/v1/payments/lost-answer", key: keys.SecretLive}).want(t, 200, "").data(t, &q)
			var col string
			for _, c := range emu.Collections() {
				if c.Reference == q.Reference {
					col = c.ID
				}
			}
			if d, err := emu.PayerAct(col, xaalis.ProviderSuccess); err != nil || !d.Lost {
				t.Fatalf("the payer pays the lost one: %+v %v", d, err)
			}
			var v txRecord
			e.do(call{method: "POST", path: "/v1/payments/" + q.ID + "/verify", key: keys.SecretLive, idem: "verify-lost"}).want(t, 200, "").data(t, &v)
			if v.Status != "success" || providerRef(t, e, q.ID) != col {
				t.Fatalf("verify of a lost answer: %+v", v)
			}
			e.clock.Advance(2 * time.Minute)
			if _, err := e.app.ExpireDue(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
			if st := e.status(t, keys.SecretLive, p.ID); st != "success" {
				t.Fatalf("a paid pending payment at expires_at: %s", st)
			}
			e.ledgerOK(t)
		})
	})
}

// refLookupHook runs hook once, right after the first lookup of a
// transaction by reference: what another process commits between a
// notification's lookup and its transaction.
type refLookupHook struct {
	xaalis.Store
	fired bool
	hook  func()
}

func (s *refLookupHook) TransactionByReference(ctx context.Context, mode xaalis.Mode, provider, ref string) (*xaalis.Transaction, error) {
	t, err := s.Store.TransactionByReference(ctx, mode, provider, ref)
	if !s.fired {
		s.fired = true
		s.hook()
	}
	return t, err
}

// lostAnswer is a test payment of ref on channel_a whose provider's
// answer was lost (the simulated outage, 503): initiated, without the
// provider's id.
func (e *env) lostAnswer(t *testing.T, key, ref string) txRecord {
	t.Helper()
	r, _ := e.pay(t, key, ref, `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneUnreachable+`"}`)
	r.want(t, 503, xaalis.EGatewayUnavailable)
	var p txRecord
	e.do(call{method: "GET", path: "/v1/payments/" + ref, key: key}).want(t, 200, "").data(t, &p)
	if p.Status != "initiated" || providerRef(t, e, p.ID) != "" {
		t.Fatalf("after the lost answer: %+v", p)
	}
	return p
}

// TestNotificationByReferenceRace: a payment whose creation answer was
// lost is given its provider id by one notification (pending) between
// another's lookup by reference and its transaction (success): the
// success still applies.
func TestNotificationByReferenceRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		p := e.lostAnswer(t, keys.SecretTest, "race-1")
		ctx := context.Background()
		note := func(id string, st xaalis.ProviderState) xaalis.Notification {
			return xaalis.Notification{EventID: id, Provider: "channel_a", Country: "SN", ProviderRef: "col-race", Reference: p.Reference, State: st}
		}
		store := e.app.Store
		e.app.Store = &refLookupHook{Store: store, hook: func() {
			if _, err := e.app.ApplyNotification(ctx, xaalis.ModeTest, note("ev-pending", xaalis.ProviderPending)); err != nil {
				t.Error(err)
			}
		}}
		if _, err := e.app.ApplyNotification(ctx, xaalis.ModeTest, note("ev-success", xaalis.ProviderSuccess)); err != nil {
			t.Fatal(err)
		}
		e.app.Store = store
		if st := e.status(t, keys.SecretTest, p.ID); st != "success" || providerRef(t, e, p.ID) != "col-race" {
			t.Fatalf("after the pending then the success notification: %s", st)
		}
		e.ledgerOK(t)
	})
}

// TestCheckoutAfterLostAnswer: the hosted page of a payment whose
// provider's answer was lost (503) offers that provider only, and refuses
// another: it could collect the payer a second time.
func TestCheckoutAfterLostAnswer(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		p := e.lostAnswer(t, keys.SecretTest, "lost-page")
		ctx := context.Background()
		v, err := e.app.Checkout(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Providers) != 1 || v.Providers[0].ID != "channel_a" {
			t.Fatalf("the page offers %+v", v.Providers)
		}
		if _, err := e.app.ChooseProvider(ctx, p.ID, "channel_b", "+221771234593"); xaalis.ErrorCode(err) != xaalis.EValidation {
			t.Fatalf("another provider: %v", err)
		}
		// The same provider is asked again (the same reference).
		if _, err := e.app.ChooseProvider(ctx, p.ID, "channel_a", "+221771234593"); err != nil {
			t.Fatalf("the same provider again: %v", err)
		}
	})
}

// TestLiveResumeAfterExpiry: a creation left initiated by an unreachable
// provider, retried after its expires_at, is refused, and no collection
// is started.
func TestLiveResumeAfterExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		body := `"provider":"channel_c","expires_in":60,"payer":{"phone":"+221771234577"}`
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{Down: true}); err != nil {
			t.Fatal(err)
		}
		r, _ := e.pay(t, keys.SecretLive, "late-resume", body)
		r.want(t, 503, xaalis.EGatewayUnavailable)
		if err := emu.SetRoute("channel_c", "direct", provider.RouteSwitches{}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(61 * time.Second)
		// The precheck answers as creation does.
		e.do(call{method: "POST", path: "/v1/payments/precheck", key: keys.SecretLive, body: payBody("late-resume", body), invalid: true}).
			want(t, 422, xaalis.EValidation)
		r = e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretLive, idem: "late-resume-2", body: payBody("late-resume", body), invalid: true})
		r.want(t, 422, xaalis.EValidation)
		var p txRecord
		e.do(call{method: "GET", path: "/v1/payments/late-resume", key: keys.SecretLive}).want(t, 200, "").data(t, &p)
		for _, c := range emu.Collections() {
			if c.Reference == p.Reference {
				t.Fatalf("a collection was started after expires_at: %+v", c)
			}
		}
	})
}

// TestDisputeAfterRefunds: a provider's dispute of a partly refunded
// payment reported at the gross amount was refused (422), and the
// chargeback, notified once, never reached the ledger: it is held for
// what is left. A dispute of a payment whose refunds in flight cover it
// whole answered 500 (a dispute of 0): it is a validation_error.
func TestDisputeAfterRefunds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		_, p := e.pay(t, keys.SecretLive, "dr-1", `"provider":"channel_a","amount":10000,"payer":{"phone":"+221771234573"}`)
		ref := providerRef(t, e, p.ID)
		if d, err := emu.PayerAct(ref, xaalis.ProviderSuccess); err != nil || d.Status != 200 {
			t.Fatalf("payer: %+v %v", d, err)
		}
		var rf txRecord
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "dr-r1",
			body: `{"transaction_id":"` + p.ID + `","amount":3000}`}).want(t, 201, "").data(t, &rf)
		d, err := emu.OpenDispute(ref, 0, "payer says not received")
		if err != nil || !d.Sent || d.Status != 200 {
			t.Fatalf("the provider's dispute of the gross amount: %+v %v", d, err)
		}
		var list []disputeRecord
		e.do(call{method: "GET", path: "/v1/disputes?status=needs_response", key: keys.SecretLive}).want(t, 200, "").data(t, &list)
		if len(list) != 1 || list[0].TransactionID != p.ID || list[0].Amount != "7000.00" {
			t.Fatalf("disputes: %+v", list)
		}
		e.ledgerOK(t)

		// A refund in flight (its provider does not answer) of the whole.
		_, q := e.pay(t, keys.SecretLive, "dr-2", `"provider":"channel_a","amount":5000,"payer":{"phone":"+221771234574"}`)
		if d, err := emu.PayerAct(providerRef(t, e, q.ID), xaalis.ProviderSuccess); err != nil || d.Status != 200 {
			t.Fatalf("payer: %+v %v", d, err)
		}
		for _, r := range []string{"direct", "aggregator"} {
			if err := emu.SetRoute("channel_a", r, provider.RouteSwitches{Timeout: true}); err != nil {
				t.Fatal(err)
			}
		}
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "dr-r2",
			body: `{"transaction_id":"` + q.ID + `","amount":5000}`})
		if st := e.status(t, keys.SecretLive, q.ID); st != "success" {
			t.Fatalf("the payment, its refund in flight: %s", st)
		}
		if _, err := e.app.OpenDispute(context.Background(), xaalis.DisputeOpen{TransactionID: q.ID}); xaalis.ErrorCode(err) != xaalis.EValidation {
			t.Fatalf("a dispute of nothing left: %v", err)
		}
		// The provider's own chargeback is money it took back, whatever
		// refund is in flight: held, not refused (it notifies once).
		if d, err := emu.OpenDispute(providerRef(t, e, q.ID), 0, "payer says not received"); err != nil || d.Status != 200 {
			t.Fatalf("the provider's dispute, a refund in flight: %+v %v", d, err)
		}
		if st := e.status(t, keys.SecretLive, q.ID); st != "disputed" {
			t.Fatalf("the payment after the provider's dispute: %s", st)
		}
		e.ledgerOK(t)
	})
}

// TestLookupsAfterAStop: a payout or refund whose provider call's answer
// was lost is asked about by its reference before anything is sent
// again, and sent by one dispatcher only. Its own environment: these
// move the clock on by minutes and trip direct's breaker.
func TestLookupsAfterAStop(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		// stoppedRefund is a refund of 1,200 XOF that direct made, as a
		// process stopped during its first call leaves it: committed as
		// sent, with no route recorded.
		stoppedRefund := func(t *testing.T, idem, phone string) (rf txRecord, body string) {
			t.Helper()
			p := e.paidThenDirect(t, emu, keys.SecretLive, idem, phone, provider.RouteSwitches{Timeout: true})
			body = `{"transaction_id":"` + p.ID + `","amount":1200}`
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: idem, body: body}).data(t, &rf)
			err := e.app.Store.Update(context.Background(), func(tx xaalis.Tx) error {
				cur, err := tx.TransactionForUpdate(context.Background(), rf.ID)
				if err != nil {
					return err
				}
				cur.Route, cur.RouteReason, cur.FailureReason = "", "", ""
				return tx.UpdateTransaction(context.Background(), cur)
			})
			if err != nil {
				t.Fatal(err)
			}
			return rf, body
		}
		// sent is how many requests to make the refund reached the emulator.
		sent := func(rf txRecord) (n int) {
			for _, x := range emu.Refunds() {
				if x.Reference == rf.Reference {
					n += x.Requests
				}
			}
			return n
		}
		refundNow := func(t *testing.T, id string) (rf txRecord) {
			t.Helper()
			e.do(call{method: "GET", path: "/v1/refunds/" + id, key: keys.SecretLive}).want(t, 200, "").data(t, &rf)
			return rf
		}
		t.Run("OKRefundAskedAfterAStop", func(t *testing.T) {
			// The process stops during a refund's first call to direct.
			// Sent again while direct is down, it failed over to the
			// aggregator, which need not share direct's idempotency (a
			// second refund). It is asked by its reference first, and sent
			// only where no route has it.
			rf, _ := stoppedRefund(t, "refund-stop-1", "+221771234579")
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			e.dispatchDue(t)
			// The emulator's routes share their refunds: the aggregator
			// knows it, and answers it without a second request to refund.
			again := refundNow(t, rf.ID)
			if again.Status != "success" || again.Route == nil || again.Route.Name != "aggregator" ||
				!strings.HasPrefix(again.Route.Reason, "found by its reference") || sent(rf) != 1 {
				t.Fatalf("after the stop: %+v %+v, sent %d times", again, again.Route, sent(rf))
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundRetriedAfterAStop", func(t *testing.T) {
			// The same, retried under its Idempotency-Key at once (its
			// request's answer never stored: the key is free again): the
			// retry asks by the reference and answers the outcome, as the
			// dispatcher would a minute later. Only the creating request
			// called, and it runs no more.
			rf, body := stoppedRefund(t, "refund-retry-1", "+221771234585")
			if _, err := e.app.Store.PurgeIdempotency(context.Background(), e.clock.Now().Add(48*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			var again txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "refund-retry-1", body: body}).want(t, 201, "").data(t, &again)
			if again.ID != rf.ID || again.Status != "success" || again.Route == nil || again.Route.Name != "aggregator" ||
				!strings.HasPrefix(again.Route.Reason, "found by its reference") || sent(rf) != 1 {
				t.Fatalf("the retry: %+v %+v, sent %d times", again, again.Route, sent(rf))
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundKeepsItsRoute", func(t *testing.T) {
			// A refund whose call to direct went unanswered (its route
			// recorded), refunds then turned off: asked about while direct
			// is down, the aggregator answers, and the refund still names
			// direct, where it was sent.
			p := e.paidThenDirect(t, emu, keys.SecretLive, "refund-keep-1", "+221771234588", provider.RouteSwitches{Timeout: true})
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "refund-keep-1",
				body: `{"transaction_id":"` + p.ID + `","amount":900}`}).data(t, &rf)
			if rf.Route == nil || rf.Route.Name != "direct" {
				t.Fatalf("after the timeout: %+v", rf.Route)
			}
			spec := e.app.Config.Providers["channel_a"]
			spec.Refunds = false
			e.app.Config.Providers["channel_a"] = spec
			defer func() {
				spec.Refunds = true
				e.app.Config.Providers["channel_a"] = spec
			}()
			emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true})
			e.dispatchDue(t)
			if again := refundNow(t, rf.ID); again.Status != "success" || again.Route == nil || again.Route.Name != "direct" || sent(rf) != 1 {
				t.Fatalf("found by the aggregator: %+v %+v, sent %d times", again, again.Route, sent(rf))
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundAskedWhenRefundsTurnedOff", func(t *testing.T) {
			// The provider's refunds turned off in the configuration after a
			// refund was sent and its answer lost: it is asked about, not
			// failed (its reservation released) while the provider made it.
			rf, _ := stoppedRefund(t, "refund-off-1", "+221771234583")
			spec := e.app.Config.Providers["channel_a"]
			spec.Refunds = false
			e.app.Config.Providers["channel_a"] = spec
			defer func() {
				spec.Refunds = true
				e.app.Config.Providers["channel_a"] = spec
			}()
			emu.SetRoute("channel_a", "direct", provider.RouteSwitches{})
			e.dispatchDue(t)
			if again := refundNow(t, rf.ID); again.Status != "success" || sent(rf) != 1 {
				t.Fatalf("refunds turned off: %+v, sent %d times", again, sent(rf))
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundDispatchedOnce", func(t *testing.T) {
			// Two dispatchers take the same due refunds at once (two
			// processes): the one that finds a refund handed to the
			// provider less than DispatchAfter ago leaves it, and the
			// provider hears of each once. Two refunds, so that the second
			// dispatcher meets the later one while the first is still in
			// its (slow) calls about the earlier one (and two failed
			// attempts each leave the routes' breakers closed).
			p := e.paidThenAllDown(t, emu, keys.SecretLive, "refund-twice-1", "+221771234584")
			var rfs []txRecord
			for i, amount := range []string{"700", "600"} {
				var rf txRecord
				e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: fmt.Sprintf("refund-twice-%d", i),
					body: `{"transaction_id":"` + p.ID + `","amount":` + amount + `}`}).data(t, &rf)
				rfs = append(rfs, rf)
			}
			emu.SetRoute("channel_a", "direct", provider.RouteSwitches{LatencyMS: 300})
			emu.SetRoute("channel_a", "aggregator", provider.RouteSwitches{})
			e.clock.Advance(xaalis.DispatchAfter + time.Second)
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := e.app.DispatchDue(context.Background(), 100); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			for _, rf := range rfs {
				if again := refundNow(t, rf.ID); again.Status != "success" || sent(rf) != 1 {
					t.Errorf("two dispatchers: %s %s, sent %d times", again.ID, again.Status, sent(rf))
				}
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundSentWhereNoRouteHasIt", func(t *testing.T) {
			// Every route down at its creation: the refund reached no
			// provider. Asked by its reference once they are back, no route
			// has it, and it is sent, once.
			p := e.paidThenAllDown(t, emu, keys.SecretLive, "refund-none-1", "+221771234580")
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "refund-none-1",
				body: `{"transaction_id":"` + p.ID + `","amount":800}`}).want(t, 201, "").data(t, &rf)
			if rf.Status != "initiated" || rf.Route != nil {
				t.Fatalf("with every route down: %+v %+v", rf, rf.Route)
			}
			emu.SetRoute("channel_a", "direct", provider.RouteSwitches{})
			emu.SetRoute("channel_a", "aggregator", provider.RouteSwitches{})
			e.dispatchDue(t)
			again := refundNow(t, rf.ID)
			if again.Status != "success" || again.Route == nil || again.Route.Name != "direct" || again.Route.Reason != "primary" || sent(rf) != 1 {
				t.Fatalf("once the routes are back: %+v %+v, %d requests", again, again.Route, sent(rf))
			}
			e.ledgerOK(t)
		})
	})
}

// TestPayoutLookupsAfterAStop: a payout asked about by its reference
// keeps the route that made it, and waits while its provider cannot be
// asked. Apart from TestLookupsAfterAStop: each test moves the clock on
// by minutes, and the emulator's notifications carry the real time,
// refused past five minutes' difference.
func TestPayoutLookupsAfterAStop(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		t.Run("OKPayoutWaitsWhenItsProviderIsGone", func(t *testing.T) {
			// A pending payout whose provider is taken out of the
			// configuration: the lookup's refusal (no such provider) is
			// no outcome, and the payout waits, its money reserved, until
			// the provider can be asked again.
			po := e.heldPayout(t, emu, keys.SecretLive, "po-gone-pay", "+221771234586", "po-gone-1", "+221771234587")
			spec := e.app.Config.Providers["channel_a"]
			delete(e.app.Config.Providers, "channel_a")
			e.dispatchDue(t)
			e.app.Config.Providers["channel_a"] = spec
			var again txRecord
			e.do(call{method: "GET", path: "/v1/payouts/" + po.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &again)
			if again.Status != "pending" {
				t.Fatalf("with its provider gone: %+v", again)
			}
			made, _ := emu.Payout(po.Reference)
			if _, err := emu.SettlePayout(made.ID, xaalis.ProviderSuccess, ""); err != nil {
				t.Fatal(err)
			}
			e.dispatchDue(t)
			e.do(call{method: "GET", path: "/v1/payouts/" + po.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &again)
			if again.Status != "success" {
				t.Fatalf("with its provider back: %+v", again)
			}
			e.ledgerOK(t)
		})
		t.Run("OKPayoutKeepsItsRoute", func(t *testing.T) {
			// A pending payout made on direct, asked about while direct is
			// down: the aggregator answers (the provider's payouts are
			// shared by its routes), and the payout still names direct,
			// the route that made it.
			po := e.heldPayout(t, emu, keys.SecretLive, "po-route-pay", "+221771234581", "po-route-1", "+221771234582")
			if po.Status != "pending" || po.Route == nil || po.Route.Name != "direct" || po.Route.Reason != "primary" {
				t.Fatalf("the payout: %+v %+v", po, po.Route)
			}
			made, ok := emu.Payout(po.Reference)
			if !ok {
				t.Fatal("the emulator has no payout")
			}
			if _, err := emu.SettlePayout(made.ID, xaalis.ProviderSuccess, ""); err != nil {
				t.Fatal(err)
			}
			if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Down: true}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(xaalis.DispatchAfter + time.Second)
			if _, err := e.app.DispatchDue(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
			var again txRecord
			e.do(call{method: "GET", path: "/v1/payouts/" + po.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &again)
			if again.Status != "success" || again.Route == nil || again.Route.Name != "direct" || again.Route.Reason != "primary" {
				t.Fatalf("after the lookup: %+v %+v", again, again.Route)
			}
			e.ledgerOK(t)
		})
	})
}

// TestSettleByHand: a payout or refund no lookup settles (its provider
// never finalises it, or will not say) is settled by the operator with
// the outcome the provider gave by hand: its ledger entries, events and
// reservation as the provider's answer would have left them, and an
// audit entry with the note. Asked again with the same outcome, it
// answers the record unchanged; another outcome, or a record of another
// type, is refused.
func TestSettleByHand(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		admin, token := adminEnv(t, e)
		settle := func(kind, id, body string) (int, map[string]any) {
			return operatorDo(t, admin, token, "POST", "/admin/v1/"+kind+"/"+id+"/settle", body)
		}
		status := func(out map[string]any) any {
			d, _ := out["data"].(map[string]any)
			return d["status"]
		}
		t.Run("OKPayout", func(t *testing.T) {
			po := e.heldPayout(t, emu, keys.SecretLive, "sbh-pay", "+221771234591", "sbh-po-1", "+221771234592")
			before := e.balance(t, keys.SecretLive)
			if po.Status != "pending" || before.Reserved <= 0 {
				t.Fatalf("the payout: %+v, balance %+v", po, before)
			}
			if st, out := settle("payouts", po.ID, `{"outcome":"success"}`); st != 422 {
				t.Fatalf("without a note: %d %v", st, out)
			}
			if st, out := settle("payouts", po.ID, `{"outcome":"maybe","note":"x"}`); st != 422 {
				t.Fatalf("a bad outcome: %d %v", st, out)
			}
			if st, out := settle("refunds", po.ID, `{"outcome":"success","note":"x"}`); st != 404 {
				t.Fatalf("a payout named as a refund: %d %v", st, out)
			}
			// Its provider was called less than 75 s ago, and may still
			// answer: not yet, and held from the dispatchers meanwhile (a
			// dispatcher run a minute later leaves it), so that the
			// second try, at the time told, settles.
			st, first := settle("payouts", po.ID, `{"outcome":"failed","note":"x"}`)
			if st != 422 || !strings.Contains(fmt.Sprint(first), "settle it again at") {
				t.Fatalf("settled while a call may be under way: %d %v", st, first)
			}
			e.clock.Advance(30 * time.Second)
			if st, out := settle("payouts", po.ID, `{"outcome":"failed","note":"x"}`); st != 422 || fmt.Sprint(out) != fmt.Sprint(first) {
				t.Fatalf("asked again before the time told: %d %v (first %v)", st, out, first)
			}
			e.dispatchDue(t)
			if got, _ := e.app.Store.Transaction(context.Background(), "", po.ID); got.DispatchedAt == nil || !got.DispatchedAt.After(e.clock.Now()) {
				t.Fatalf("a dispatcher took the payout the operator holds: %v", got.DispatchedAt)
			}
			// Named by its merchant_ref, though a test payment carries it
			// too: the payout is meant.
			e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "sbh-po-1-pay",
				body: payBody("sbh-po-1", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)}).want(t, 201, "")
			for _, name := range []string{"sbh-po-1", po.Reference} {
				if st, out := settle("payouts", name, `{"outcome":"success","note":"channel_a statement of 30/11, line 12"}`); st != 200 || status(out) != "success" {
					t.Fatalf("settled as %s: %d %v", name, st, out)
				}
			}
			// Paid: its reservation (amount and fee, the only one)
			// consumed, available as it was.
			if after := e.balance(t, keys.SecretLive); after.Reserved != 0 || after.Available != before.Available {
				t.Fatalf("balance %+v, before %+v", after, before)
			}
			if evs := e.events(t, po.ID); len(evs) == 0 || evs[len(evs)-1] != xaalis.EventPayoutSuccess {
				t.Fatalf("events: %v", evs)
			}
			if st, out := settle("payouts", po.ID, `{"outcome":"failed","note":"x"}`); st != 422 {
				t.Fatalf("settled again otherwise: %d %v", st, out)
			}
			_, log := operatorDo(t, admin, token, "GET", "/admin/v1/audit-log", "")
			entries, _ := log["data"].([]any)
			n := 0
			for _, x := range entries {
				if en, _ := x.(map[string]any); en["action"] == "payout.settle_by_hand" {
					n++
					if en["note"] != "channel_a statement of 30/11, line 12" {
						t.Fatalf("audit entry: %v", en)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d audit entries: %v", n, log)
			}
			e.ledgerOK(t)
		})
		t.Run("OKRefundFailed", func(t *testing.T) {
			p := e.paidThenAllDown(t, emu, keys.SecretLive, "sbh-rf", "+221771234593")
			var rf txRecord
			e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretLive, idem: "sbh-rf-1",
				body: `{"transaction_id":"` + p.ID + `","amount":700}`}).want(t, 201, "").data(t, &rf)
			before := e.balance(t, keys.SecretLive)
			// Past any call its creation made (its answer applied): 75 s.
			e.clock.Advance(xaalis.ProviderCallBudget + 30*time.Second)
			if st, out := settle("refunds", rf.ID, `{"outcome":"failed","note":"channel_a support: never received"}`); st != 200 || status(out) != "failed" {
				t.Fatalf("settled: %d %v", st, out)
			}
			var got txRecord
			e.do(call{method: "GET", path: "/v1/refunds/" + rf.ID, key: keys.SecretLive}).want(t, 200, "").data(t, &got)
			if got.Status != "failed" || got.FailureReason == nil || *got.FailureReason != xaalis.SettledByOperator {
				t.Fatalf("the refund: %+v", got)
			}
			if after := e.balance(t, keys.SecretLive); after.Reserved != before.Reserved-700 || after.Available != before.Available+700 {
				t.Fatalf("balance %+v, before %+v", after, before)
			}
			if evs := e.events(t, rf.ID); len(evs) == 0 || evs[len(evs)-1] != xaalis.EventRefundFailed {
				t.Fatalf("events: %v", evs)
			}
			e.ledgerOK(t)
		})
	})
}
