package provider_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func TestLive(t *testing.T) {
	t.Run("OKHappyPathChannelA", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-A1"))
		if err != nil {
			t.Fatal(err)
		}
		if in.State != xaalis.ProviderPending || in.Route != "direct" || in.RouteReason != "primary" {
			t.Fatalf("%+v", in)
		}
		if in.NextAction == nil || in.NextAction.Type != xaalis.NextRedirect || in.NextAction.RedirectURL != "https://wallet.channel-a.example/pay/"+in.ProviderRef {
			t.Fatalf("next action %+v", in.NextAction)
		}
		c, ok := e.emu.Collection(in.ProviderRef)
		if !ok || c.Reference != "TXN-A1" || c.Amount != 500000 || c.Currency != "XOF" || c.SubMerchant != "sub-42" ||
			c.PayerName != "Awa Diop" || c.IdempotencyKey != "TXN-A1" || c.Route != "direct" || c.ExpiresAt.IsZero() {
			t.Fatalf("emulated collection %+v", c)
		}
		// The payer approves in the wallet: the signed notification
		// reaches Xaalis and verifies.
		var ans struct {
			Collection   provider.EmulatedCollection `json:"collection"`
			Notification provider.Delivery           `json:"notification"`
		}
		if code := e.control("/_control/collections/"+in.ProviderRef+"/payer", map[string]string{"outcome": "success"}, &ans); code != 200 {
			t.Fatalf("payer: %d", code)
		}
		if !ans.Notification.Sent || ans.Notification.Status != 200 || ans.Collection.Status != xaalis.ProviderSuccess {
			t.Fatalf("%+v", ans)
		}
		n := e.waitNotification()
		if n.EventID != ans.Notification.EventID || n.Provider != "channel_a" || n.Country != "SN" || n.ProviderRef != in.ProviderRef || n.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v", n)
		}
		st, err := e.gw.Status(bg, xaalis.ModeLive, "channel_a", in.Route, in.ProviderRef)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", st, err)
		}
		// By reference (an initiation whose answer was lost): the same
		// collection; an unknown reference is not found.
		byRef, err := e.gw.Collection(bg, xaalis.ModeLive, "channel_a", "TXN-A1")
		if err != nil || byRef.ProviderRef != in.ProviderRef || byRef.State != xaalis.ProviderSuccess || byRef.Route != "direct" {
			t.Fatalf("by reference: %+v %v", byRef, err)
		}
		if _, err := e.gw.Collection(bg, xaalis.ModeLive, "channel_a", "TXN-NONE"); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("an unknown reference: %v", err)
		}
		if _, err := e.gw.Collection(bg, xaalis.ModeLive, "channel_b", "TXN-A1"); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("another provider's reference: %v", err)
		}
	})

	t.Run("OKHappyPathChannelB", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, err := e.gw.Initiate(bg, e.request("channel_b", "CI", provider.TestPhone("CI", "5678"), "TXN-B1"))
		if err != nil {
			t.Fatal(err)
		}
		if in.NextAction == nil || in.NextAction.Type != xaalis.NextOTP || in.NextAction.USSDCode != "#144*391#" {
			t.Fatalf("%+v", in.NextAction)
		}
		if c, _ := e.emu.Collection(in.ProviderRef); c.SubMerchant != "" {
			t.Fatalf("sub_merchant sent to a provider without attribution: %+v", c)
		}
		st, err := e.gw.SubmitOTP(bg, xaalis.ModeLive, "channel_b", in.Route, in.ProviderRef, "999999")
		if err != nil || st.State != xaalis.ProviderPending || st.Reason != provider.ReasonWrongOTP {
			t.Fatalf("%+v %v", st, err)
		}
		st, err = e.gw.SubmitOTP(bg, xaalis.ModeLive, "channel_b", in.Route, in.ProviderRef, provider.TestOTP)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", st, err)
		}
		if n := e.waitNotification(); n.State != xaalis.ProviderSuccess || n.Country != "CI" {
			t.Fatalf("%+v", n)
		}
	})

	t.Run("OKHappyPathChannelC", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, err := e.gw.Initiate(bg, e.request("channel_c", "SN", provider.TestPhonePending, "TXN-C1"))
		if err != nil {
			t.Fatal(err)
		}
		if in.NextAction == nil || in.NextAction.Type != xaalis.NextUSSD || in.NextAction.USSDCode != "*144#" {
			t.Fatalf("%+v", in.NextAction)
		}
		if _, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderCancelled); err != nil {
			t.Fatal(err)
		}
		if n := e.waitNotification(); n.State != xaalis.ProviderCancelled || n.Reason != provider.ReasonPayerCancelled {
			t.Fatalf("%+v", n)
		}
	})

	t.Run("OKMagicSettlesAtOnce", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneFailed, "TXN-M1"))
		if err != nil || in.State != xaalis.ProviderFailed || in.NextAction != nil {
			t.Fatalf("%+v %v", in, err)
		}
		st, _ := e.gw.Status(bg, xaalis.ModeLive, "channel_a", in.Route, in.ProviderRef)
		if st.State != xaalis.ProviderFailed || st.Reason != provider.ReasonInsufficientFunds {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("OKFailoverDirectDown", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		e.route("channel_a", "direct", map[string]any{"down": true})
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-F1"))
		if err != nil {
			t.Fatal(err)
		}
		if in.Route != "aggregator" || !strings.HasPrefix(in.RouteReason, "failover: direct: ") {
			t.Fatalf("%+v", in)
		}
		t.Logf("route reason: %s", in.RouteReason)
		if e.requests("channel_a", "direct") == 0 {
			t.Fatal("direct was not tried")
		}
		// Status goes to the route that served, then the payment succeeds.
		if _, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderSuccess); err != nil {
			t.Fatal(err)
		}
		e.waitNotification()
		st, err := e.gw.Status(bg, xaalis.ModeLive, "channel_a", in.Route, in.ProviderRef)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", st, err)
		}
		// Status asked of the dead route falls back to the other.
		st, err = e.gw.Status(bg, xaalis.ModeLive, "channel_a", "direct", in.ProviderRef)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", st, err)
		}
	})

	t.Run("OKFailoverOn503", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		e.route("channel_b", "direct", map[string]any{"error_rate": 1.0})
		in, err := e.gw.Initiate(bg, e.request("channel_b", "SN", provider.TestPhonePending, "TXN-F2"))
		if err != nil {
			t.Fatal(err)
		}
		if in.Route != "aggregator" || in.RouteReason != "failover: direct: http 503" {
			t.Fatalf("%+v", in)
		}
	})

	t.Run("OKLatency", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		e.route("channel_c", "direct", map[string]any{"latency_ms": 50})
		start := time.Now()
		in, err := e.gw.Initiate(bg, e.request("channel_c", "SN", provider.TestPhonePending, "TXN-L1"))
		if err != nil || in.Route != "direct" {
			t.Fatalf("%+v %v", in, err)
		}
		if time.Since(start) < 50*time.Millisecond {
			t.Fatal("latency not applied")
		}
	})

	t.Run("ErrAllRoutesDown", func(t *testing.T) {
		e := newLive(t, 2*time.Second, func(_ *xaalis.Config, o *provider.Options) { o.BreakerThreshold = 2 })
		e.route("channel_a", "direct", map[string]any{"down": true})
		e.route("channel_a", "aggregator", map[string]any{"down": true})
		_, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-D1"))
		x := wantCode(t, err, xaalis.EGatewayUnavailable)
		if x.Status() != 503 || x.RetryAfter != 5*time.Second || x.Context["provider"] != "channel_a" {
			t.Fatalf("%+v", x)
		}
		// The second failure opens both breakers: Retry-After is the
		// time until they half-open.
		_, err = e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-D2"))
		x = wantCode(t, err, xaalis.EGatewayUnavailable)
		if x.RetryAfter != 30*time.Second {
			t.Fatalf("retry after %v", x.RetryAfter)
		}
		e.clock.Add(29*time.Second + 400*time.Millisecond)
		_, err = e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-D3"))
		x = wantCode(t, err, xaalis.EGatewayUnavailable)
		if x.RetryAfter < time.Second {
			t.Fatalf("retry after %v", x.RetryAfter)
		}
		for _, h := range e.gw.Health(xaalis.ModeLive, "channel_a") {
			if h.Healthy || h.State != "open" {
				t.Fatalf("%+v", h)
			}
		}
	})

	t.Run("OKBreakerOpensAndHalfOpens", func(t *testing.T) {
		e := newLive(t, 2*time.Second, func(_ *xaalis.Config, o *provider.Options) {
			o.BreakerThreshold = 3
			o.BreakerCooldown = 10 * time.Second
		})
		health := func() string {
			for _, h := range e.gw.Health(xaalis.ModeLive, "channel_a") {
				if h.Route == "direct" {
					return h.State
				}
			}
			return ""
		}
		e.route("channel_a", "direct", map[string]any{"down": true})
		ref := 0
		initiate := func() xaalis.Initiation {
			t.Helper()
			ref++
			in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-B"+string(rune('A'+ref))))
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		for i := range 3 {
			if health() != "closed" {
				t.Fatalf("before failure %d: %s", i+1, health())
			}
			if in := initiate(); in.Route != "aggregator" || in.RouteReason == "failover: direct: circuit open" {
				t.Fatalf("%+v", in)
			}
		}
		if health() != "open" {
			t.Fatalf("after 3 failures: %s", health())
		}
		tried := e.requests("channel_a", "direct")
		in := initiate()
		if in.Route != "aggregator" || in.RouteReason != "failover: direct: circuit open" {
			t.Fatalf("%+v", in)
		}
		if e.requests("channel_a", "direct") != tried {
			t.Fatal("an open breaker let a request through")
		}
		// The cooldown passes: one trial request; it fails, so it reopens.
		e.clock.Add(10 * time.Second)
		if health() != "half_open" {
			t.Fatalf("after cooldown: %s", health())
		}
		if in := initiate(); in.Route != "aggregator" || in.RouteReason == "failover: direct: circuit open" {
			t.Fatalf("trial: %+v", in)
		}
		if health() != "open" {
			t.Fatalf("after failed trial: %s", health())
		}
		// Again, with direct back up: the trial succeeds and closes it.
		e.route("channel_a", "direct", map[string]any{"down": false})
		e.clock.Add(9 * time.Second)
		if in := initiate(); in.Route != "aggregator" {
			t.Fatalf("still open: %+v", in)
		}
		e.clock.Add(time.Second)
		if in := initiate(); in.Route != "direct" || in.RouteReason != "primary" {
			t.Fatalf("trial: %+v", in)
		}
		if health() != "closed" {
			t.Fatalf("after trial: %s", health())
		}
	})

	t.Run("ErrBusinessRefusalNoFailover", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		_, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneRefused, "TXN-R1"))
		x := wantCode(t, err, xaalis.EGatewayError)
		if x.Status() != 502 || !strings.Contains(x.Message, "payer_refused") {
			t.Fatalf("%+v", x)
		}
		if d, a := e.requests("channel_a", "direct"), e.requests("channel_a", "aggregator"); d != 1 || a != 0 {
			t.Fatalf("direct %d aggregator %d", d, a)
		}
		// A refusal is an answer: the route stays healthy.
		if h := e.gw.Health(xaalis.ModeLive, "channel_a"); h[0].State != "closed" {
			t.Fatalf("%+v", h)
		}
	})

	t.Run("ErrWrongAPIKey", func(t *testing.T) {
		e := newLive(t, 2*time.Second, func(cfg *xaalis.Config, _ *provider.Options) {
			p := cfg.Providers["channel_c"]
			p.Routes[0].APIKey = "wrong"
			cfg.Providers["channel_c"] = p
		})
		_, err := e.gw.Initiate(bg, e.request("channel_c", "SN", provider.TestPhonePending, "TXN-K1"))
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrMagicUnreachable", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		_, err := e.gw.Initiate(bg, e.request("channel_b", "SN", provider.TestPhoneUnreachable, "TXN-U1"))
		x := wantCode(t, err, xaalis.EGatewayUnavailable)
		if x.RetryAfter < time.Second {
			t.Fatalf("%+v", x)
		}
	})

	t.Run("OKIdempotentAcrossRoutes", func(t *testing.T) {
		e := newLive(t, 300*time.Millisecond)
		e.route("channel_a", "direct", map[string]any{"timeout": true})
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-I1"))
		if err != nil {
			t.Fatal(err)
		}
		if in.Route != "aggregator" || in.RouteReason != "failover: direct: timeout" {
			t.Fatalf("%+v", in)
		}
		all := e.emu.Collections()
		if len(all) != 1 {
			t.Fatalf("%d collections: the payer would be charged twice", len(all))
		}
		c := all[0]
		if c.ID != in.ProviderRef || c.Route != "direct" || c.Requests != 2 || c.IdempotencyKey != "TXN-I1" {
			t.Fatalf("%+v vs %+v", c, in)
		}
	})

	t.Run("OKLostCallbacksReconciled", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		if code := e.control("/_control/providers/channel_b", map[string]bool{"lose_callbacks": true}, nil); code != 200 {
			t.Fatal(code)
		}
		in, _ := e.gw.Initiate(bg, e.request("channel_b", "SN", provider.TestPhonePending, "TXN-LC1"))
		d, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderSuccess)
		if err != nil || !d.Lost || d.Sent {
			t.Fatalf("%+v %v", d, err)
		}
		select {
		case n := <-e.received:
			t.Fatalf("a lost callback arrived: %+v", n)
		case <-time.After(100 * time.Millisecond):
		}
		st, err := e.gw.Status(bg, xaalis.ModeLive, "channel_b", in.Route, in.ProviderRef)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v %v", st, err)
		}
	})

	t.Run("OKDisputeNotification", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		in, _ := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneSuccess, "TXN-DS1"))
		var ans struct {
			Notification provider.Delivery `json:"notification"`
		}
		if code := e.control("/_control/collections/"+in.ProviderRef+"/dispute", map[string]any{"amount": 200000, "reason": "not_received"}, &ans); code != 200 || !ans.Notification.Sent {
			t.Fatalf("%d %+v", code, ans)
		}
		n := e.waitNotification()
		if n.Dispute == nil || n.Dispute.Amount != (xaalis.Amount{Minor: 200000, Currency: xaalis.XOF}) || n.Dispute.Reason != "not_received" || n.State != xaalis.ProviderSuccess {
			t.Fatalf("%+v", n)
		}
	})

	t.Run("ErrStatusUnknownCollection", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		_, err := e.gw.Status(bg, xaalis.ModeLive, "channel_a", "direct", "col_a_nope")
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("ErrCallerCancelled", func(t *testing.T) {
		e := newLive(t, 5*time.Second)
		e.route("channel_a", "direct", map[string]any{"timeout": true})
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		_, err := e.gw.Initiate(ctx, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-CC1"))
		wantCode(t, err, xaalis.EGatewayUnavailable)
		if e.requests("channel_a", "aggregator") != 0 {
			t.Fatal("failed over after the caller gave up")
		}
		if h := e.gw.Health(xaalis.ModeLive, "channel_a"); h[0].State != "closed" {
			t.Fatalf("the caller's cancellation counted against the route: %+v", h)
		}
	})

	t.Run("OKHealthLive", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		h := e.gw.Health(xaalis.ModeLive, "channel_a")
		if len(h) != 2 || h[0].Route != "direct" || h[1].Route != "aggregator" || !h[0].Healthy || h[0].State != "closed" {
			t.Fatalf("%+v", h)
		}
	})

	t.Run("OKConcurrentFailover", func(t *testing.T) {
		e := newLive(t, 2*time.Second)
		e.route("channel_a", "direct", map[string]any{"error_rate": 0.5})
		var ok atomic.Int32
		done := make(chan struct{})
		for i := range 16 {
			go func() {
				defer func() { done <- struct{}{} }()
				in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-CF"+string(rune('A'+i))))
				if err == nil && in.ProviderRef != "" {
					ok.Add(1)
				}
			}()
		}
		for range 16 {
			<-done
		}
		if ok.Load() != 16 {
			t.Fatalf("%d of 16 payments initiated", ok.Load())
		}
	})
}

func TestEmulatorAPI(t *testing.T) {
	e := newLive(t, 2*time.Second)
	t.Run("ErrNoAPIKey", func(t *testing.T) {
		resp, err := http.Post(e.emuSrv.URL+"/channel_a/direct/collections", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatal(resp.StatusCode)
		}
	})
	t.Run("ErrControl", func(t *testing.T) {
		for path, body := range map[string]any{
			"/_control/routes/channel_q/direct":      map[string]any{"down": true},
			"/_control/routes/channel_a/direct":      map[string]any{"error_rate": 2},
			"/_control/providers/channel_q":          map[string]any{"lose_callbacks": true},
			"/_control/collections/col_x/payer":      map[string]any{"outcome": "success"},
			"/_control/collections/col_x/dispute":    map[string]any{"amount": 1},
			"/_control/collections/col_x/payer?oops": map[string]any{"outcome": "maybe"},
		} {
			if code := e.control(path, body, nil); code < 400 {
				t.Errorf("%s: %d", path, code)
			}
		}
	})
	t.Run("OKControlState", func(t *testing.T) {
		e.route("channel_c", "direct", map[string]any{"latency_ms": 5})
		resp, err := http.Get(e.emuSrv.URL + "/_control")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		st := e.emu.State()
		if resp.StatusCode != 200 || st.Providers["channel_c"].Routes["direct"].LatencyMS != 5 || len(st.Providers) != 3 {
			t.Fatalf("%d %+v", resp.StatusCode, st)
		}
	})
	t.Run("ErrPayerTwice", func(t *testing.T) {
		in, _ := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhonePending, "TXN-E1"))
		if _, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderFailed); err != nil {
			t.Fatal(err)
		}
		e.waitNotification()
		if _, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderSuccess); err == nil {
			t.Fatal("a settled collection moved")
		}
	})
	t.Run("ErrNoPayer", func(t *testing.T) {
		in, _ := e.gw.Initiate(bg, e.request("channel_a", "SN", provider.TestPhoneNoPayer, "TXN-E2"))
		if _, err := e.emu.PayerAct(in.ProviderRef, xaalis.ProviderSuccess); err == nil {
			t.Fatal("the payer of a no-payer number acted")
		}
	})
}
