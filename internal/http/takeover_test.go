package http_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// twoInstances is two servers, each a registered instance, on one
// database, whose live mode reaches one provider emulator.
func twoInstances(t *testing.T, b backend) (a, bb *env, emu *provider.Emulator, merchantID string, keys xaalis.MerchantKeys) {
	emu = provider.NewEmulator(provider.EmulatorOptions{})
	emuSrv := httptest.NewServer(emu)
	t.Cleanup(func() { emuSrv.Close(); emu.Close() })
	live := func(_ *xhttp.Config, app *xaalis.App) {
		cfg, err := provider.EmulatorConfig(emuSrv.URL)
		if err != nil {
			t.Fatal(err)
		}
		for name, spec := range cfg.Providers {
			for i := range spec.Routes {
				spec.Routes[i].TimeoutMS = 1500
			}
			cfg.Providers[name] = spec
		}
		app.Config = cfg
		app.Gateway = provider.New(cfg, provider.Options{BreakerThreshold: 100, BreakerCooldown: time.Minute})
	}
	s1, s2 := openShared(t, b)
	a, bb = newEnv(t, s1, live), newEnv(t, s2, live)
	for i, e := range []*env{a, bb} {
		run, err := e.app.StartInstance(context.Background(), xaalis.InstanceOptions{Host: "test", PID: 1000 + i,
			Process: "p" + string(rune('a'+i)), Heartbeat: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = run.Stop(context.Background()) })
	}
	merchantID, keys = a.merchant()
	kyc := xaalis.KYCApproved
	if _, err := a.app.UpdateMerchant(context.Background(), merchantID, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
		t.Fatal(err)
	}
	return a, bb, emu, merchantID, keys
}

// TestIdempotencyTakeover: a request whose instance dies mid-command holds
// its Idempotency-Key only while that instance lives. A retry to another
// instance answers 409 while the first still beats, and takes the key over
// the moment its heartbeat is three intervals old: the command resumes
// from its last committed step (the same payment, the same payout), and
// the provider is asked before anything is sent again.
func TestIdempotencyTakeover(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, bb, emu, mid, keys := twoInstances(t, b)
		key := keys.SecretLive
		ctx := context.Background()
		// Money to pay out, collected through the emulator.
		r := a.do(call{method: "POST", path: "/v1/payments", key: key, idem: "fund",
			body: payBody("fund", `"amount":50000,"provider":"channel_a","payer":{"phone":"+221771234567"}`)}).want(t, 201, "")
		var fund txRecord
		r.data(t, &fund)
		ref := providerRef(t, a, fund.ID)
		if _, err := emu.PayerAct(ref, xaalis.ProviderSuccess); err != nil {
			t.Fatal(err)
		}
		a.do(call{method: "POST", path: "/v1/payments/" + fund.ID + "/verify", key: key, idem: "fund-v"}).want(t, 200, "")

		for _, c := range []struct {
			name, ref, path, body string
			typ                   xaalis.TxType
		}{
			{"payout", "to-po", "/v1/payouts", payoutBody("to-po", 1000, "channel_a", "+221771112233"), xaalis.TypePayout},
			// A week's life: the takeover below moves B's clock 4 hours on,
			// and a payment past its expires_at is not resumed.
			{"payment", "to-pay", "/v1/payments", payBody("to-pay", `"amount":2000,"provider":"channel_a","expires_in":604800,"payer":{"phone":"+221771234567"}`), xaalis.TypePayment},
		} {
			t.Run(c.name, func(t *testing.T) {
				idem := "to-" + c.name
				// The provider does the work and never answers: A's request
				// stays in the middle of its command.
				hang := provider.RouteSwitches{Timeout: true}
				for _, route := range []string{"direct", "aggregator"} {
					if err := emu.SetRoute("channel_a", route, hang); err != nil {
						t.Fatal(err)
					}
				}
				first := make(chan *response, 1)
				go func() { first <- a.do(call{method: "POST", path: c.path, key: key, idem: idem, body: c.body}) }()
				var rec *xaalis.Transaction
				for deadline := time.Now().Add(10 * time.Second); rec == nil; time.Sleep(10 * time.Millisecond) {
					list, _ := a.app.Store.LookupTransactions(ctx, mid, c.ref)
					if len(list) == 1 && (c.typ == xaalis.TypePayment || list[0].DispatchedAt != nil) {
						rec = list[0]
					}
					if time.Now().After(deadline) {
						t.Fatal("the first request never reached the provider")
					}
				}
				// A lives: the retry to B is in flight.
				bb.do(call{method: "POST", path: c.path, key: key, idem: idem, body: c.body}).want(t, 409, xaalis.EIdempotencyConflict)
				// A falls silent past three heartbeats (B's clock moves on):
				// B takes over and resumes the same record.
				for _, route := range []string{"direct", "aggregator"} {
					if err := emu.SetRoute("channel_a", route, provider.RouteSwitches{}); err != nil {
						t.Fatal(err)
					}
				}
				bb.clock.Advance(4 * time.Hour)
				r := bb.do(call{method: "POST", path: c.path, key: key, idem: idem, body: c.body}).want(t, 201, "")
				var got txRecord
				r.data(t, &got)
				if got.ID != rec.ID {
					t.Fatalf("the retry made %s, not the first attempt's %s", got.ID, rec.ID)
				}
				// The provider holds one order for the reference, sent once.
				if c.typ == xaalis.TypePayout {
					po, ok := emu.Payout(rec.Reference)
					if !ok || po.Requests != 1 || got.Status != "success" {
						t.Fatalf("emulator payout %+v (found %v), status %s: want one request, success", po, ok, got.Status)
					}
				} else {
					n := 0
					for _, col := range emu.Collections() {
						if col.Reference == rec.Reference {
							n++
						}
					}
					if n != 1 || got.Status != "pending" {
						t.Fatalf("%d collections for %s, status %s", n, rec.Reference, got.Status)
					}
				}
				// A's request ends (its provider call timed out): whatever
				// it answered, the key now replays B's answer everywhere.
				<-first
				for _, e := range []*env{a, bb} {
					e.do(call{method: "POST", path: c.path, key: key, idem: idem, body: c.body}).want(t, 201, "").replayOf(t, r)
				}
				list, err := a.app.Store.LookupTransactions(ctx, rec.MerchantID, rec.MerchantRef)
				if err != nil || len(list) != 1 {
					t.Fatalf("%d records with merchant_ref %s: %v", len(list), rec.MerchantRef, err)
				}
				// A comes back to life for the next case: same time as B, and
				// a fresh heartbeat.
				a.clock.Advance(4 * time.Hour)
				if err := a.app.Store.HeartbeatInstance(ctx, a.app.InstanceID(), a.clock.Now()); err != nil {
					t.Fatal(err)
				}
			})
		}
		a.ledgerOK(t)
	})
}

// TestInstanceReap: an instance starting removes the instances of its host
// whose process is gone (or whose PID it now has itself), and only those:
// their claims are free at once, as after a restart on the same machine.
func TestInstanceReap(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Now().UTC()
		for _, i := range []*xaalis.Instance{
			{ID: "dead", Host: "h", PID: 999999, Process: "x"},
			{ID: "earlier-us", Host: "h", PID: 4242, Process: "older"},
			{ID: "alive", Host: "h", PID: 1, Process: "y"},
			{ID: "elsewhere", Host: "other", PID: 999999, Process: "z"},
		} {
			i.StartedAt, i.HeartbeatAt = now, now
			if err := s.RegisterInstance(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		app := xaalis.NewApp(s)
		run, err := app.StartInstance(ctx, xaalis.InstanceOptions{Host: "h", PID: 4242, Process: "new", Heartbeat: time.Hour,
			Alive: func(pid int) bool { return pid != 999999 }})
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.Instances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, i := range list {
			got[i.ID] = true
		}
		if len(got) != 3 || !got["alive"] || !got["elsewhere"] || !got[app.InstanceID()] {
			t.Fatalf("instances after start: %v", got)
		}
		if err := run.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if list, _ := s.Instances(ctx); len(list) != 2 {
			t.Fatalf("after stop: %d instances", len(list))
		}
	})
}
