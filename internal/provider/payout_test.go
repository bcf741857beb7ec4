package provider_test

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func testPayout(prov string, country xaalis.Country, phone, reference string) xaalis.PayoutOrder {
	return xaalis.PayoutOrder{
		Mode:           xaalis.ModeTest,
		TransactionID:  "tx-" + reference,
		Reference:      reference,
		Provider:       prov,
		Country:        country,
		Amount:         xaalis.Units(2500, xaalis.XOF),
		RecipientPhone: phone,
		RecipientName:  "Moussa Ndiaye",
	}
}

func wantNotFound(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, xaalis.ErrNotFound) || xaalis.ErrorCode(err) != xaalis.ENotFound {
		t.Fatalf("want not_found, got %v", err)
	}
}

func TestSimulatorPayouts(t *testing.T) {
	t.Run("OKMagicNumbers", func(t *testing.T) {
		gw, ch := newSim(t)
		for i, tc := range []struct {
			phone  string
			state  xaalis.ProviderState
			reason string
		}{
			{provider.TestPhoneSuccess, xaalis.ProviderSuccess, ""},
			{provider.TestPhonePending, xaalis.ProviderSuccess, ""}, // ordinary: at once
			{provider.TestPhoneFailed, xaalis.ProviderFailed, provider.ReasonRecipientRejected},
			{provider.TestPhoneCancelled, xaalis.ProviderCancelled, provider.ReasonPayoutCancelled},
			{provider.TestPhoneNoPayer, xaalis.ProviderPending, ""}, // never settles
			{provider.TestPhone("CI", provider.MagicFailed), xaalis.ProviderFailed, provider.ReasonRecipientRejected},
		} {
			country := xaalis.Country("SN")
			if strings.HasPrefix(tc.phone, "+225") {
				country = "CI"
			}
			ref := "TXN-P" + string(rune('A'+i))
			res, err := gw.Payout(bg, testPayout("channel_b", country, tc.phone, ref))
			if err != nil {
				t.Fatalf("%s: %v", tc.phone, err)
			}
			if res.State != tc.state || res.Reason != tc.reason || !strings.HasPrefix(res.ProviderRef, "simpo_b_") ||
				res.Route != "simulator" || res.RouteReason != "test mode" {
				t.Fatalf("%s: %+v", tc.phone, res)
			}
			for range 2 {
				st, err := gw.PayoutStatus(bg, xaalis.ModeTest, "channel_b", ref)
				if err != nil || st != res {
					t.Fatalf("%s: status %+v %v, want %+v", tc.phone, st, err, res)
				}
			}
		}
		noNotify(t, ch)
	})

	t.Run("ErrMagicRefusedAndUnreachable", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.Payout(bg, testPayout("channel_a", "SN", provider.TestPhoneRefused, "TXN-PR"))
		if x := wantCode(t, err, xaalis.EGatewayError); x.Context["provider"] != "channel_a" {
			t.Fatalf("%+v", x)
		}
		_, err = gw.Payout(bg, testPayout("channel_a", "SN", provider.TestPhoneUnreachable, "TXN-PU"))
		if x := wantCode(t, err, xaalis.EGatewayUnavailable); x.RetryAfter != 30*time.Second {
			t.Fatalf("%+v", x)
		}
		// Neither was recorded: no money moved.
		for _, ref := range []string{"TXN-PR", "TXN-PU"} {
			_, err := gw.PayoutStatus(bg, xaalis.ModeTest, "channel_a", ref)
			wantNotFound(t, err)
		}
	})

	t.Run("OKIdempotentOnReference", func(t *testing.T) {
		gw, _ := newSim(t)
		first, err := gw.Payout(bg, testPayout("channel_a", "SN", provider.TestPhonePending, "TXN-PI"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		refs := make([]string, 8)
		for i := range refs {
			wg.Go(func() {
				res, err := gw.Payout(bg, testPayout("channel_a", "SN", provider.TestPhonePending, "TXN-PI"))
				if err == nil {
					refs[i] = res.ProviderRef
				}
			})
		}
		wg.Wait()
		for _, r := range refs {
			if r != first.ProviderRef {
				t.Fatalf("the same reference gave %s and %s", first.ProviderRef, r)
			}
		}
		// The same reference with another amount is a bug of the caller.
		o := testPayout("channel_a", "SN", provider.TestPhonePending, "TXN-PI")
		o.Amount = xaalis.Units(1, xaalis.XOF)
		_, err = gw.Payout(bg, o)
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrPayoutsUnsupported", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.Payout(bg, testPayout("channel_c", "SN", provider.TestPhoneSuccess, "TXN-PC"))
		if x := wantCode(t, err, xaalis.EProviderPayoutUnsupported); x.Context["provider"] != "channel_c" || x.Status() != 422 {
			t.Fatalf("%+v", x)
		}
		_, err = gw.PayoutStatus(bg, xaalis.ModeTest, "channel_c", "TXN-PC")
		wantCode(t, err, xaalis.EProviderPayoutUnsupported)
	})

	t.Run("ErrNotServed", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.Payout(bg, testPayout("channel_b", "TG", provider.TestPhone("TG", "1234"), "TXN-PN"))
		wantCode(t, err, xaalis.EGatewayError)
		_, err = gw.Payout(bg, testPayout("channel_z", "SN", provider.TestPhoneSuccess, "TXN-PZ"))
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrStatusNotFound", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.PayoutStatus(bg, xaalis.ModeTest, "channel_a", "TXN-NEVER")
		wantNotFound(t, err)
	})
}

func testRefund(prov, paymentRef, reference string, minor int64) xaalis.RefundRequest {
	return xaalis.RefundRequest{
		Mode: xaalis.ModeTest, Reference: reference, Provider: prov, Route: "simulator",
		PaymentProviderRef: paymentRef, Amount: xaalis.Amount{Minor: minor, Currency: xaalis.XOF},
	}
}

func TestSimulatorRefunds(t *testing.T) {
	t.Run("OKPartialThenOver", func(t *testing.T) {
		gw, _ := newSim(t)
		in, err := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhoneSuccess)) // 1000 XOF
		if err != nil || in.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", in, err)
		}
		r1, err := gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R1", 60000))
		if err != nil || r1.State != xaalis.ProviderSuccess || !strings.HasPrefix(r1.ProviderRef, "simrf_a_") || r1.Route != "simulator" {
			t.Fatalf("%+v %v", r1, err)
		}
		// The same reference is the same refund, not counted twice.
		again, err := gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R1", 60000))
		if err != nil || again != r1 {
			t.Fatalf("%+v %v", again, err)
		}
		_, err = gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R2", 50000))
		if x := wantCode(t, err, xaalis.EGatewayError); !strings.Contains(x.Message, "exceeds") {
			t.Fatalf("%+v", x)
		}
		if _, err := gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R3", 40000)); err != nil {
			t.Fatal(err)
		}
		_, err = gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R4", 1))
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrNotSuccess", func(t *testing.T) {
		gw, _ := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		_, err := gw.Refund(bg, testRefund("channel_a", in.ProviderRef, "TXN-R5", 100))
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("OKUnknownCollectionAfterRestart", func(t *testing.T) {
		gw, _ := newSim(t)
		res, err := gw.Refund(bg, testRefund("channel_a", "sim_a_lost", "TXN-R6", 999999999))
		if err != nil || res.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("ErrRefundsUnsupported", func(t *testing.T) {
		gw, _ := newSim(t)
		for _, prov := range []string{"channel_b", "channel_c"} {
			in, _ := gw.Initiate(bg, testRequest(prov, "SN", provider.TestPhoneSuccess))
			_, err := gw.Refund(bg, testRefund(prov, in.ProviderRef, "TXN-R7"+prov, 100))
			if x := wantCode(t, err, xaalis.ERefundNotSupported); x.Context["provider"] != prov || x.Status() != 422 {
				t.Fatalf("%+v", x)
			}
		}
	})
}

func (e *liveEnv) payout(prov string, country xaalis.Country, phone, reference string) xaalis.PayoutOrder {
	o := testPayout(prov, country, phone, reference)
	o.Mode = xaalis.ModeLive
	o.NotifyURL = e.notify + "/v1/providers/" + prov + "/notifications"
	return o
}

func TestLivePayouts(t *testing.T) {
	t.Run("OKHappyPath", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		res, err := e.gw.Payout(bg, e.payout("channel_a", "SN", provider.TestPhonePending, "TXN-LP1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.State != xaalis.ProviderSuccess || res.Route != "direct" || res.RouteReason != "primary" || !strings.HasPrefix(res.ProviderRef, "po_a_") {
			t.Fatalf("%+v", res)
		}
		p, ok := e.emu.Payout("TXN-LP1")
		if !ok || p.ID != res.ProviderRef || p.Amount != 250000 || p.Currency != "XOF" || p.Phone != provider.TestPhonePending ||
			p.RecipientName != "Moussa Ndiaye" || p.IdempotencyKey != "TXN-LP1" || p.Route != "direct" || p.Requests != 1 || p.NotifyURL == "" {
			t.Fatalf("emulated payout %+v", p)
		}
		st, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-LP1")
		if err != nil || st.ProviderRef != res.ProviderRef || st.State != xaalis.ProviderSuccess || st.Route != "direct" {
			t.Fatalf("%+v %v", st, err)
		}
		if s := e.emu.State(); s.Payouts != 1 || s.Refunds != 0 {
			t.Fatalf("%+v", s)
		}
	})

	t.Run("OKMagicNumbers", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		for _, tc := range []struct {
			phone  string
			state  xaalis.ProviderState
			reason string
		}{
			{provider.TestPhoneSuccess, xaalis.ProviderSuccess, ""},
			{provider.TestPhoneFailed, xaalis.ProviderFailed, provider.ReasonRecipientRejected},
			{provider.TestPhoneCancelled, xaalis.ProviderCancelled, provider.ReasonPayoutCancelled},
			{provider.TestPhoneNoPayer, xaalis.ProviderPending, ""},
		} {
			ref := "TXN-LM" + tc.phone[len(tc.phone)-1:]
			res, err := e.gw.Payout(bg, e.payout("channel_b", "SN", tc.phone, ref))
			if err != nil || res.State != tc.state || res.Reason != tc.reason {
				t.Fatalf("%s: %+v %v", tc.phone, res, err)
			}
			st, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_b", ref)
			if err != nil || st.State != tc.state || st.Reason != tc.reason {
				t.Fatalf("%s: %+v %v", tc.phone, st, err)
			}
		}
		// 0004 never settles.
		p, _ := e.emu.Payout("TXN-LM4")
		if code := e.control("/_control/payouts/"+p.ID+"/settle", map[string]string{"outcome": "success"}, nil); code != http.StatusConflict {
			t.Fatalf("settled a 0004 payout: %d", code)
		}
		// 0005: refused, nothing recorded, no failover.
		_, err := e.gw.Payout(bg, e.payout("channel_b", "SN", provider.TestPhoneRefused, "TXN-LM5"))
		if x := wantCode(t, err, xaalis.EGatewayError); !strings.Contains(x.Message, "recipient_refused") {
			t.Fatalf("%+v", x)
		}
		_, err = e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_b", "TXN-LM5")
		wantNotFound(t, err)
		// 0006: a 503 after the body was sent: the outcome is unknown, so
		// no other route is tried; the status then shows nothing was made.
		before := e.requests("channel_b", "aggregator")
		_, err = e.gw.Payout(bg, e.payout("channel_b", "SN", provider.TestPhoneUnreachable, "TXN-LM6"))
		if x := wantCode(t, err, xaalis.EGatewayUnavailable); x.RetryAfter < time.Second || !strings.Contains(x.Message, "unknown") {
			t.Fatalf("%+v", x)
		}
		if e.requests("channel_b", "aggregator") != before {
			t.Fatal("a payout whose outcome was unknown was sent to another route")
		}
		_, err = e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_b", "TXN-LM6")
		wantNotFound(t, err)
	})

	t.Run("OKIdempotentAcrossTimeout", func(t *testing.T) {
		e := newLive(t, 300*time.Millisecond)
		e.route("channel_a", "direct", map[string]any{"timeout": true})
		_, err := e.gw.Payout(bg, e.payout("channel_a", "SN", provider.TestPhonePending, "TXN-LT1"))
		if x := wantCode(t, err, xaalis.EGatewayUnavailable); !strings.Contains(x.Message, "direct: timeout") {
			t.Fatalf("%+v", x)
		}
		// No failover: the aggregator never saw it, yet the provider made it.
		if n := e.requests("channel_a", "aggregator"); n != 0 {
			t.Fatalf("aggregator: %d requests", n)
		}
		all := e.emu.Payouts()
		if len(all) != 1 || all[0].Status != xaalis.ProviderSuccess {
			t.Fatalf("%+v", all)
		}
		// The caller asks: direct still hangs, the aggregator answers.
		st, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-LT1")
		if err != nil || st.ProviderRef != all[0].ID || st.State != xaalis.ProviderSuccess || st.Route != "aggregator" || st.RouteReason != "found by its reference (failover: direct: timeout)" {
			t.Fatalf("%+v %v", st, err)
		}
		// Sending again with the same reference returns the same payout.
		e.route("channel_a", "direct", map[string]any{"timeout": false})
		res, err := e.gw.Payout(bg, e.payout("channel_a", "SN", provider.TestPhonePending, "TXN-LT1"))
		if err != nil || res.ProviderRef != all[0].ID || res.Route != "direct" {
			t.Fatalf("%+v %v", res, err)
		}
		all = e.emu.Payouts()
		if len(all) != 1 || all[0].Requests != 2 {
			t.Fatalf("%d payouts: the recipient would be paid twice (%+v)", len(all), all)
		}
	})

	t.Run("OKFailoverOnDown", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		e.route("channel_a", "direct", map[string]any{"down": true})
		res, err := e.gw.Payout(bg, e.payout("channel_a", "SN", provider.TestPhonePending, "TXN-LD1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Route != "aggregator" || !strings.HasPrefix(res.RouteReason, "failover: direct: ") {
			t.Fatalf("%+v", res)
		}
		t.Logf("route reason: %s", res.RouteReason)
		if e.requests("channel_a", "direct") == 0 {
			t.Fatal("direct was not tried")
		}
		if all := e.emu.Payouts(); len(all) != 1 || all[0].Route != "aggregator" || all[0].Requests != 1 {
			t.Fatalf("%+v", all)
		}
	})

	t.Run("OKFailoverOnConnectionRefused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String()
		ln.Close()
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			p := cfg.Providers["channel_b"]
			p.Routes[0].BaseURL = dead
			cfg.Providers["channel_b"] = p
		})
		res, err := e.gw.Payout(bg, e.payout("channel_b", "SN", provider.TestPhonePending, "TXN-LC1"))
		if err != nil || res.Route != "aggregator" || res.RouteReason != "failover: direct: connection refused" {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("OKFailoverOn503BeforeBody", func(t *testing.T) {
		// error_rate answers 503 before reading the request: with
		// Expect: 100-continue the body never left, so failover is safe.
		e := newLive(t, 2*time.Second)
		e.route("channel_a", "direct", map[string]any{"error_rate": 1.0})
		res, err := e.gw.Payout(bg, e.payout("channel_a", "SN", provider.TestPhonePending, "TXN-L503"))
		if err != nil || res.Route != "aggregator" || res.RouteReason != "failover: direct: http 503" {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("ErrStatusNotFound", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		_, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-NEVER")
		wantNotFound(t, err)
		// Every route was asked before answering not_found.
		if e.requests("channel_a", "direct") != 1 || e.requests("channel_a", "aggregator") != 1 {
			t.Fatal("not every route was asked")
		}
	})

	t.Run("ErrStatusUnknownWhenARouteIsDown", func(t *testing.T) {
		// A route that cannot be asked might hold the payout: not_found
		// would invite a second payout.
		e := newLive(t, 2*time.Second)
		e.route("channel_a", "aggregator", map[string]any{"down": true})
		_, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-NEVER")
		wantCode(t, err, xaalis.EGatewayUnavailable)
	})

	t.Run("ErrPayoutsUnsupported", func(t *testing.T) {
		// Xaalis's configuration says so: no request at all.
		e := newLive(t, 2*time.Second)
		_, err := e.gw.Payout(bg, e.payout("channel_c", "SN", provider.TestPhoneSuccess, "TXN-LU1"))
		wantCode(t, err, xaalis.EProviderPayoutUnsupported)
		if e.requests("channel_c", "direct") != 0 {
			t.Fatal("a request was sent")
		}
		// The provider says so (the configuration disagrees).
		e = newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			p := cfg.Providers["channel_c"]
			p.Payouts = true
			cfg.Providers["channel_c"] = p
		})
		_, err = e.gw.Payout(bg, e.payout("channel_c", "SN", provider.TestPhoneSuccess, "TXN-LU2"))
		wantCode(t, err, xaalis.EProviderPayoutUnsupported)
		_, err = e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_c", "TXN-LU2")
		wantCode(t, err, xaalis.EProviderPayoutUnsupported)
	})

	t.Run("OKPayoutNotification", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		if code := e.control("/_control/providers/channel_b", map[string]bool{"hold_payouts": true}, nil); code != 200 {
			t.Fatal(code)
		}
		res, err := e.gw.Payout(bg, e.payout("channel_b", "CI", provider.TestPhone("CI", "4321"), "TXN-LN1"))
		if err != nil || res.State != xaalis.ProviderPending {
			t.Fatalf("%+v %v", res, err)
		}
		var ans struct {
			Payout       provider.EmulatedPayout `json:"payout"`
			Notification provider.Delivery       `json:"notification"`
		}
		if code := e.control("/_control/payouts/"+res.ProviderRef+"/settle", map[string]string{"outcome": "failed"}, &ans); code != 200 {
			t.Fatalf("settle: %d", code)
		}
		if !ans.Notification.Sent || ans.Notification.Status != 200 || ans.Payout.Status != xaalis.ProviderFailed {
			t.Fatalf("%+v", ans)
		}
		n := e.waitNotification()
		want := xaalis.Notification{EventID: ans.Notification.EventID, Provider: "channel_b", Country: "CI",
			ProviderRef: res.ProviderRef, State: xaalis.ProviderFailed, Reason: provider.ReasonRecipientRejected}
		if n != want {
			t.Fatalf("%+v, want %+v", n, want)
		}
		st, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_b", "TXN-LN1")
		if err != nil || st.State != xaalis.ProviderFailed {
			t.Fatalf("%+v %v", st, err)
		}
		// Settled once only.
		if _, err := e.emu.SettlePayout(res.ProviderRef, xaalis.ProviderSuccess, ""); err == nil {
			t.Fatal("a settled payout moved")
		}
	})
}

func TestLiveRefunds(t *testing.T) {
	t.Run("OKRefund", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		// direct is down when the payment is made: it goes through the
		// aggregator, and so does its refund, first.
		e.route("channel_a", "direct", map[string]any{"down": true})
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneSuccess, "TXN-LR0")) // 5000 XOF
		if err != nil || in.Route != "aggregator" || in.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", in, err)
		}
		e.route("channel_a", "direct", map[string]any{"down": false})
		direct := e.requests("channel_a", "direct")
		r := xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LR1", Provider: "channel_a", Route: in.Route,
			PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(2000, xaalis.XOF)}
		res, err := e.gw.Refund(bg, r)
		if err != nil || res.State != xaalis.ProviderSuccess || res.Route != "aggregator" || !strings.HasPrefix(res.ProviderRef, "rf_a_") {
			t.Fatalf("%+v %v", res, err)
		}
		if e.requests("channel_a", "direct") != direct {
			t.Fatal("the refund did not go to the payment's route first")
		}
		// Idempotent on the reference, on any route.
		r.Route = "direct"
		again, err := e.gw.Refund(bg, r)
		if err != nil || again.ProviderRef != res.ProviderRef {
			t.Fatalf("%+v %v", again, err)
		}
		if all := e.emu.Refunds(); len(all) != 1 || all[0].Requests != 2 || all[0].CollectionID != in.ProviderRef || all[0].Amount != 200000 {
			t.Fatalf("%+v", all)
		}
		if c, _ := e.emu.Collection(in.ProviderRef); c.Refunded != 200000 {
			t.Fatalf("%+v", c)
		}
		// More than remains: refused, no failover.
		r.Reference, r.Amount = "TXN-LR2", xaalis.Units(3001, xaalis.XOF)
		_, err = e.gw.Refund(bg, r)
		if x := wantCode(t, err, xaalis.EGatewayError); !strings.Contains(x.Message, "refund_exceeds_collected") {
			t.Fatalf("%+v", x)
		}
		r.Amount = xaalis.Units(3000, xaalis.XOF)
		if _, err := e.gw.Refund(bg, r); err != nil {
			t.Fatal(err)
		}
		if s := e.emu.State(); s.Refunds != 2 {
			t.Fatalf("%+v", s)
		}
	})

	t.Run("ErrUnknownCollection", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		_, err := e.gw.Refund(bg, xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LR3", Provider: "channel_a", Route: "direct",
			PaymentProviderRef: "col_a_nope", Amount: xaalis.Units(10, xaalis.XOF)})
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrRefundsUnsupported", func(t *testing.T) {
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			// channel_b's configuration claims refunds; the provider has none.
			p := cfg.Providers["channel_b"]
			p.Refunds = true
			cfg.Providers["channel_b"] = p
		})
		for _, prov := range []string{"channel_b", "channel_c"} {
			in, err := e.gw.Initiate(bg, e.request(prov, "SN", provider.TestPhoneSuccess, "TXN-LRU"+prov))
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.gw.Refund(bg, xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LRU-R" + prov, Provider: prov, Route: in.Route,
				PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(100, xaalis.XOF)})
			if x := wantCode(t, err, xaalis.ERefundNotSupported); x.Context["provider"] != prov {
				t.Fatalf("%+v", x)
			}
		}
		if e.emu.State().Refunds != 0 {
			t.Fatal("a refund was made")
		}
	})

	t.Run("ErrNoFailoverOnTimeout", func(t *testing.T) {
		e := newLive(t, 300*time.Millisecond)
		in, _ := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneSuccess, "TXN-LR4"))
		e.route("channel_a", "direct", map[string]any{"timeout": true})
		r := xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LR5", Provider: "channel_a", Route: "direct",
			PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(100, xaalis.XOF)}
		_, err := e.gw.Refund(bg, r)
		wantCode(t, err, xaalis.EGatewayUnavailable)
		if e.requests("channel_a", "aggregator") != 0 {
			t.Fatal("failed over")
		}
		// Sent again once the route answers: the same, single refund.
		e.route("channel_a", "direct", map[string]any{"timeout": false})
		if _, err := e.gw.Refund(bg, r); err != nil {
			t.Fatal(err)
		}
		if all := e.emu.Refunds(); len(all) != 1 || all[0].Requests != 2 {
			t.Fatalf("%+v", all)
		}
	})

	t.Run("ErrPinnedAfterUnknown", func(t *testing.T) {
		// The first attempt's outcome is unknown on direct; when it is sent
		// again direct is down, which before passed it to the aggregator:
		// a second refund wherever the two routes do not share the
		// provider's idempotency. Pinned, it waits for direct.
		e := newLive(t, 300*time.Millisecond)
		in, _ := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneSuccess, "TXN-LR6"))
		e.route("channel_a", "direct", map[string]any{"timeout": true})
		r := xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LR7", Provider: "channel_a", Route: "direct",
			PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(100, xaalis.XOF)}
		res, err := e.gw.Refund(bg, r)
		wantCode(t, err, xaalis.EGatewayUnavailable)
		if res.Route != "direct" || res.RouteReason != provider.RouteOutcomeUnknown {
			t.Fatalf("%+v: the route of the unknown outcome is not named", res)
		}
		e.route("channel_a", "direct", map[string]any{"timeout": false, "down": true})
		r.Route, r.Pinned = res.Route, true
		_, err = e.gw.Refund(bg, r)
		wantCode(t, err, xaalis.EGatewayUnavailable)
		if e.requests("channel_a", "aggregator") != 0 {
			t.Fatal("sent to the aggregator after an unknown outcome on direct")
		}
		// A route no longer configured: sent nowhere.
		other := r
		other.Route = "gone"
		if _, err := e.gw.Refund(bg, other); xaalis.ErrorCode(err) != xaalis.EGatewayUnavailable || e.requests("channel_a", "aggregator") != 0 {
			t.Fatalf("%v", err)
		}
		e.route("channel_a", "direct", map[string]any{"down": false})
		if res, err := e.gw.Refund(bg, r); err != nil || res.Route != "direct" {
			t.Fatalf("%+v %v", res, err)
		}
		if all := e.emu.Refunds(); len(all) != 1 || all[0].Route != "direct" {
			t.Fatalf("%+v", all)
		}
	})
}

// TestLookupsByReference: a refund and a payout are asked about by their
// reference, on every route, and only the provider's answer, or every
// route's not_found, is an outcome.
func TestLookupsByReference(t *testing.T) {
	t.Run("OKRefundStatus", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneSuccess, "TXN-LS0"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.gw.Refund(bg, xaalis.RefundRequest{Mode: xaalis.ModeLive, Reference: "TXN-LS1", Provider: "channel_a", Route: in.Route,
			PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(1000, xaalis.XOF)})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_a", "direct", "TXN-LS1")
		if err != nil || st.ProviderRef != res.ProviderRef || st.State != xaalis.ProviderSuccess || st.Route != "direct" || st.RouteReason != "found by its reference" {
			t.Fatalf("%+v %v", st, err)
		}
		// direct down: the aggregator is asked, and the provider's refunds
		// are shared by its routes in the emulator.
		e.route("channel_a", "direct", map[string]any{"down": true})
		st, err = e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_a", "direct", "TXN-LS1")
		if err != nil || st.Route != "aggregator" || !strings.Contains(st.RouteReason, "failover: direct") {
			t.Fatalf("%+v %v", st, err)
		}
		// A reference no route knows, with a route that cannot be asked:
		// unknown, not not_found.
		_, err = e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_a", "direct", "TXN-NEVER")
		wantCode(t, err, xaalis.EGatewayUnavailable)
		e.route("channel_a", "direct", map[string]any{"down": false})
		direct, aggregator := e.requests("channel_a", "direct"), e.requests("channel_a", "aggregator")
		_, err = e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_a", "direct", "TXN-NEVER")
		wantNotFound(t, err)
		if e.requests("channel_a", "direct") != direct+1 || e.requests("channel_a", "aggregator") != aggregator+1 {
			t.Fatal("not every route was asked")
		}
		if e.emu.State().Refunds != 1 {
			t.Fatal("a lookup made a refund")
		}
	})

	t.Run("OKRefundStatusTestMode", func(t *testing.T) {
		gw := provider.New(defaults(t), provider.Options{})
		in, err := gw.Initiate(bg, xaalis.InitiateRequest{Mode: xaalis.ModeTest, Reference: "TXN-LST0", Provider: "channel_a", Country: "SN",
			Amount: xaalis.Units(5000, xaalis.XOF), PayerPhone: provider.TestPhoneSuccess})
		if err != nil {
			t.Fatal(err)
		}
		_, err = gw.RefundStatus(bg, xaalis.ModeTest, "channel_a", "", "TXN-LST1")
		wantNotFound(t, err)
		res, err := gw.Refund(bg, xaalis.RefundRequest{Mode: xaalis.ModeTest, Reference: "TXN-LST1", Provider: "channel_a",
			PaymentProviderRef: in.ProviderRef, Amount: xaalis.Units(1000, xaalis.XOF)})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := gw.RefundStatus(bg, xaalis.ModeTest, "channel_a", "", "TXN-LST1"); err != nil || st.ProviderRef != res.ProviderRef {
			t.Fatalf("%+v %v", st, err)
		}
		// Asked whatever the configuration says of refunds (channel_c
		// makes none): the simulator holds none of this reference.
		_, err = gw.RefundStatus(bg, xaalis.ModeTest, "channel_c", "", "TXN-LST1")
		wantNotFound(t, err)
	})

	t.Run("ErrRefusalIsNoOutcome", func(t *testing.T) {
		// direct refuses the lookup (its api key is wrong: 401) and the
		// aggregator does not know the reference: the refusal says
		// nothing of what direct holds, so the answer is unknown
		// (gateway_unavailable), never a refusal the caller would take
		// for a failed payout or refund.
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			cfg.Providers["channel_a"].Routes[0].APIKey = "wrong"
		})
		_, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-LS2")
		if x := wantCode(t, err, xaalis.EGatewayUnavailable); !strings.Contains(x.Message, "direct: refused (unauthorized)") {
			t.Fatalf("%+v", x)
		}
		_, err = e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_a", "direct", "TXN-LS2")
		wantCode(t, err, xaalis.EGatewayUnavailable)
		if e.requests("channel_a", "aggregator") != 2 {
			t.Fatal("the next route was not asked after a refusal")
		}
	})

	t.Run("ErrRefundUnsupportedIsNoOutcome", func(t *testing.T) {
		// Routes that answer refund_unsupported to a lookup (channel_b
		// makes no refunds, though its configuration here says it does)
		// say nothing of a refund sent before: unknown, never
		// refund_not_supported, which would fail a refund perhaps made.
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			p := cfg.Providers["channel_b"]
			p.Refunds = true
			cfg.Providers["channel_b"] = p
		})
		_, err := e.gw.RefundStatus(bg, xaalis.ModeLive, "channel_b", "direct", "TXN-LS3")
		if x := wantCode(t, err, xaalis.EGatewayUnavailable); !strings.Contains(x.Message, "refused (refund_unsupported)") {
			t.Fatalf("%+v", x)
		}
	})

	t.Run("ErrUnknownProviderIsNoOutcome", func(t *testing.T) {
		// A route whose base_url names no provider answers 404, but not
		// not_found: it cannot say that the provider never received it.
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			rt := &cfg.Providers["channel_a"].Routes[0]
			rt.BaseURL = strings.Replace(rt.BaseURL, "/channel_a/", "/channel_x/", 1)
		})
		_, err := e.gw.PayoutStatus(bg, xaalis.ModeLive, "channel_a", "TXN-LS4")
		wantCode(t, err, xaalis.EGatewayUnavailable)
	})
}

func TestEmulatorPayoutAPI(t *testing.T) {
	e := newLive(t, 2*time.Second)
	post := func(path, key, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.emuSrv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer emulator-channel_a")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := `{"reference":"TXN-EP1","amount":1000,"currency":"XOF","phone":"+221771234567","country":"SN"}`
	for _, tc := range []struct {
		key, body string
		want      int
	}{
		{"", good, http.StatusBadRequest},
		{"TXN-EP1", `{"reference":"TXN-EP1","amount":0,"currency":"XOF","phone":"+221771234567","country":"SN"}`, http.StatusUnprocessableEntity},
		{"TXN-EP1", `{"reference":"TXN-EP1","amount":1000,"currency":"XOF","phone":"+221771234567","country":"FR"}`, http.StatusUnprocessableEntity},
		{"TXN-EP1", good, http.StatusCreated},
		{"TXN-EP1", good, http.StatusCreated},
		{"TXN-EP1", strings.Replace(good, "1000", "2000", 1), http.StatusConflict},
		{"OTHER", good, http.StatusCreated}, // another key, the same reference: the same payout
	} {
		if got := post("/channel_a/direct/payouts", tc.key, tc.body); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.key, tc.body, got, tc.want)
		}
	}
	if p, _ := e.emu.Payout("TXN-EP1"); p.Requests != 3 || len(e.emu.Payouts()) != 1 {
		t.Fatalf("%+v", p)
	}
	for _, path := range []string{"/_control/payouts/po_x/settle"} {
		if code := e.control(path, map[string]string{"outcome": "success"}, nil); code != http.StatusNotFound {
			t.Errorf("%s: %d", path, code)
		}
	}
	p, _ := e.emu.Payout("TXN-EP1")
	if code := e.control("/_control/payouts/"+p.ID+"/settle", map[string]string{"outcome": "maybe"}, nil); code != http.StatusBadRequest {
		t.Errorf("bad outcome: %d", code)
	}
	if code := e.control("/_control/payouts/"+p.ID+"/settle", map[string]string{"outcome": "success"}, nil); code != http.StatusConflict {
		t.Errorf("settled a settled payout: %d", code)
	}
}
