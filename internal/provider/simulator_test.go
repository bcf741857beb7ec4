package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func newSim(t *testing.T) (*provider.Gateway, chan xaalis.Notification) {
	t.Helper()
	ch := make(chan xaalis.Notification, 16)
	gw := provider.New(defaults(t), provider.Options{
		Notify: func(_ context.Context, n xaalis.Notification) { ch <- n },
	})
	return gw, ch
}

func testRequest(prov string, country xaalis.Country, phone string) xaalis.InitiateRequest {
	return xaalis.InitiateRequest{
		Mode:       xaalis.ModeTest,
		Reference:  "TXN-" + prov + phone,
		Provider:   prov,
		Country:    country,
		Amount:     xaalis.Units(1000, xaalis.XOF),
		PayerPhone: phone,
	}
}

func waitNotify(t *testing.T, ch chan xaalis.Notification) xaalis.Notification {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	return xaalis.Notification{}
}

func noNotify(t *testing.T, ch chan xaalis.Notification) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notification %+v", n)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSimulator(t *testing.T) {
	t.Run("OKNextActionPerProvider", func(t *testing.T) {
		gw, ch := newSim(t)
		for _, tc := range []struct {
			prov string
			typ  xaalis.NextActionType
			ussd string
		}{
			{"channel_a", xaalis.NextRedirect, ""},
			{"channel_b", xaalis.NextOTP, "#144*391#"},
			{"channel_c", xaalis.NextUSSD, "*144#"},
		} {
			in, err := gw.Initiate(bg, testRequest(tc.prov, "SN", provider.TestPhonePending))
			if err != nil {
				t.Fatal(err)
			}
			if in.State != xaalis.ProviderPending || in.Route != "simulator" || in.RouteReason != "test mode" {
				t.Fatalf("%s: %+v", tc.prov, in)
			}
			if !strings.HasPrefix(in.ProviderRef, "sim_"+tc.prov[len(tc.prov)-1:]+"_") {
				t.Fatalf("%s: ref %q", tc.prov, in.ProviderRef)
			}
			na := in.NextAction
			if na == nil || na.Type != tc.typ || na.USSDCode != tc.ussd || na.Instructions == "" {
				t.Fatalf("%s: next action %+v", tc.prov, na)
			}
			if tc.typ == xaalis.NextRedirect && na.RedirectURL != "https://wallet.channel-a.example/pay/"+in.ProviderRef {
				t.Fatalf("redirect %q", na.RedirectURL)
			}
			if tc.typ == xaalis.NextOTP && !strings.Contains(na.Instructions, "6-digit") {
				t.Fatalf("otp instructions %q", na.Instructions)
			}
			st, err := gw.Status(bg, xaalis.ModeTest, tc.prov, in.Route, in.ProviderRef)
			if err != nil || st.State != xaalis.ProviderPending {
				t.Fatalf("status %+v %v", st, err)
			}
		}
		noNotify(t, ch)
	})

	t.Run("OKMagicNumbers", func(t *testing.T) {
		gw, ch := newSim(t)
		for _, tc := range []struct {
			phone  string
			state  xaalis.ProviderState
			reason string
		}{
			{provider.TestPhoneSuccess, xaalis.ProviderSuccess, ""},
			{provider.TestPhoneFailed, xaalis.ProviderFailed, provider.ReasonInsufficientFunds},
			{provider.TestPhoneCancelled, xaalis.ProviderCancelled, provider.ReasonPayerCancelled},
			{provider.TestPhoneNoPayer, xaalis.ProviderPending, ""},
			// Any country: the last four digits decide.
			{provider.TestPhone("CI", provider.MagicSuccess), xaalis.ProviderSuccess, ""},
			{provider.TestPhone("ML", provider.MagicFailed), xaalis.ProviderFailed, provider.ReasonInsufficientFunds},
		} {
			country := xaalis.Country("SN")
			if !strings.HasPrefix(tc.phone, "+221") {
				country = map[string]xaalis.Country{"+225": "CI", "+223": "ML"}[tc.phone[:4]]
			}
			in, err := gw.Initiate(bg, testRequest("channel_b", country, tc.phone))
			if err != nil {
				t.Fatalf("%s: %v", tc.phone, err)
			}
			if in.State != tc.state {
				t.Fatalf("%s: state %s, want %s", tc.phone, in.State, tc.state)
			}
			if (in.NextAction != nil) != (tc.state == xaalis.ProviderPending) {
				t.Fatalf("%s: next action %+v", tc.phone, in.NextAction)
			}
			st, _ := gw.Status(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef)
			if st.State != tc.state || st.Reason != tc.reason {
				t.Fatalf("%s: status %+v", tc.phone, st)
			}
		}
		// Settled at once: final in the answer, no notification.
		noNotify(t, ch)
	})

	t.Run("ErrMagicRefused", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhoneRefused))
		e := wantCode(t, err, xaalis.EGatewayError)
		if e.Status() != 502 || e.Context["provider"] != "channel_a" {
			t.Fatalf("%+v", e)
		}
	})

	t.Run("ErrMagicUnreachable", func(t *testing.T) {
		gw, _ := newSim(t)
		_, err := gw.Initiate(bg, testRequest("channel_c", "SN", provider.TestPhoneUnreachable))
		e := wantCode(t, err, xaalis.EGatewayUnavailable)
		if e.RetryAfter != 30*time.Second || e.Status() != 503 {
			t.Fatalf("%+v", e)
		}
	})

	t.Run("ErrNoPayerStaysPending", func(t *testing.T) {
		gw, ch := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_b", "SN", provider.TestPhoneNoPayer))
		wantCode(t, gw.PayerAction(bg, "channel_b", in.ProviderRef, xaalis.ProviderSuccess), xaalis.EGatewayError)
		st, err := gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, provider.TestOTP)
		if err != nil || st.State != xaalis.ProviderPending || st.Reason != provider.ReasonNoPayer {
			t.Fatalf("%+v %v", st, err)
		}
		noNotify(t, ch)
	})

	t.Run("OKPayerActionNotifies", func(t *testing.T) {
		gw, ch := newSim(t)
		for _, outcome := range []xaalis.ProviderState{xaalis.ProviderSuccess, xaalis.ProviderFailed, xaalis.ProviderCancelled} {
			r := testRequest("channel_a", "CI", provider.TestPhone("CI", "4567"))
			r.Reference += string(outcome)
			in, _ := gw.Initiate(bg, r)
			if err := gw.PayerAction(bg, "channel_a", in.ProviderRef, outcome); err != nil {
				t.Fatal(err)
			}
			n := waitNotify(t, ch)
			if n.EventID == "" || n.Provider != "channel_a" || n.Country != "CI" || n.ProviderRef != in.ProviderRef || n.State != outcome {
				t.Fatalf("notification %+v", n)
			}
			st, _ := gw.Status(bg, xaalis.ModeTest, "channel_a", "simulator", in.ProviderRef)
			if st.State != outcome || st.Reason != n.Reason {
				t.Fatalf("status %+v", st)
			}
			// Only a pending collection moves.
			wantCode(t, gw.PayerAction(bg, "channel_a", in.ProviderRef, xaalis.ProviderSuccess), xaalis.EGatewayError)
		}
	})

	t.Run("OKUniqueEventIDs", func(t *testing.T) {
		gw, ch := newSim(t)
		seen := map[string]bool{}
		for i := range 5 {
			r := testRequest("channel_c", "SN", provider.TestPhonePending)
			r.Reference = "TXN-U" + string(rune('A'+i))
			in, _ := gw.Initiate(bg, r)
			if err := gw.PayerAction(bg, "channel_c", in.ProviderRef, xaalis.ProviderSuccess); err != nil {
				t.Fatal(err)
			}
			n := waitNotify(t, ch)
			if seen[n.EventID] {
				t.Fatalf("duplicate event id %s", n.EventID)
			}
			seen[n.EventID] = true
		}
	})

	t.Run("OKNilNotify", func(t *testing.T) {
		gw := provider.New(defaults(t), provider.Options{})
		in, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		if err := gw.PayerAction(bg, "channel_a", in.ProviderRef, xaalis.ProviderSuccess); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ErrPayerAction", func(t *testing.T) {
		gw, _ := newSim(t)
		wantCode(t, gw.PayerAction(bg, "channel_a", "sim_a_unknown", xaalis.ProviderSuccess), xaalis.EGatewayError)
		wantCode(t, gw.PayerAction(bg, "channel_x", "sim_a_unknown", xaalis.ProviderSuccess), xaalis.EGatewayError)
		in, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		wantCode(t, gw.PayerAction(bg, "channel_a", in.ProviderRef, xaalis.ProviderPending), xaalis.EValidation)
	})

	t.Run("OKOTP", func(t *testing.T) {
		gw, ch := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_b", "SN", provider.TestPhonePending))
		st, err := gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, "000000")
		if err != nil || st.State != xaalis.ProviderPending || st.Reason != provider.ReasonWrongOTP {
			t.Fatalf("wrong code: %+v %v", st, err)
		}
		st, err = gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, provider.TestOTP)
		if err != nil || st.State != xaalis.ProviderSuccess {
			t.Fatalf("right code: %+v %v", st, err)
		}
		if n := waitNotify(t, ch); n.State != xaalis.ProviderSuccess || n.ProviderRef != in.ProviderRef {
			t.Fatalf("%+v", n)
		}
	})

	t.Run("ErrOTPThirdWrongCodeFails", func(t *testing.T) {
		gw, ch := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_b", "SN", provider.TestPhonePending))
		var st xaalis.ProviderStatus
		for i := range 3 {
			st, _ = gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, "111111")
			if i < 2 && (st.State != xaalis.ProviderPending || st.Reason != provider.ReasonWrongOTP) {
				t.Fatalf("attempt %d: %+v", i+1, st)
			}
		}
		if st.State != xaalis.ProviderFailed || st.Reason != provider.ReasonTooManyWrongOTP {
			t.Fatalf("%+v", st)
		}
		if n := waitNotify(t, ch); n.State != xaalis.ProviderFailed {
			t.Fatalf("%+v", n)
		}
		// The right code no longer helps.
		st, _ = gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, provider.TestOTP)
		if st.State != xaalis.ProviderFailed {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("ErrOTPNotOTPProvider", func(t *testing.T) {
		gw, _ := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		_, err := gw.SubmitOTP(bg, xaalis.ModeTest, "channel_a", in.Route, in.ProviderRef, provider.TestOTP)
		wantCode(t, err, xaalis.EGatewayError)
		_, err = gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", "simulator", "sim_b_unknown", provider.TestOTP)
		wantCode(t, err, xaalis.EGatewayError)
	})

	t.Run("OKUnknownRefAfterRestart", func(t *testing.T) {
		gw, _ := newSim(t)
		in, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		restarted, _ := newSim(t)
		st, err := restarted.Status(bg, xaalis.ModeTest, "channel_a", "simulator", in.ProviderRef)
		if err != nil || st.State != xaalis.ProviderPending || st.Reason != provider.ReasonUnknownToSimulator {
			t.Fatalf("%+v %v", st, err)
		}
	})

	t.Run("OKSameReferenceSameCollection", func(t *testing.T) {
		gw, _ := newSim(t)
		a, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		b, _ := gw.Initiate(bg, testRequest("channel_a", "SN", provider.TestPhonePending))
		if a.ProviderRef != b.ProviderRef {
			t.Fatalf("%s != %s", a.ProviderRef, b.ProviderRef)
		}
	})

	t.Run("ErrNotServed", func(t *testing.T) {
		cfg := defaults(t)
		b := cfg.Providers["channel_b"]
		b.Enabled = false
		cfg.Providers["channel_b"] = b
		a := cfg.Providers["channel_a"]
		a.DisabledCountries = []xaalis.Country{"NE"}
		cfg.Providers["channel_a"] = a
		gw := provider.New(cfg, provider.Options{})
		for _, r := range []xaalis.InitiateRequest{
			testRequest("channel_c", "CI", provider.TestPhone("CI", "1234")), // SN only
			testRequest("channel_b", "SN", provider.TestPhonePending),        // disabled
			testRequest("channel_a", "NE", provider.TestPhone("NE", "1234")), // disabled in NE
			testRequest("channel_z", "SN", provider.TestPhonePending),        // unknown
		} {
			_, err := gw.Initiate(bg, r)
			wantCode(t, err, xaalis.EGatewayError)
		}
	})

	t.Run("OKHealth", func(t *testing.T) {
		gw, _ := newSim(t)
		h := gw.Health(xaalis.ModeTest, "channel_a")
		if len(h) != 1 || h[0].Route != "simulator" || !h[0].Healthy || h[0].State != "closed" {
			t.Fatalf("%+v", h)
		}
		if gw.Health(xaalis.ModeTest, "channel_z") != nil {
			t.Fatal("unknown provider has health")
		}
	})

	t.Run("OKConcurrent", func(t *testing.T) {
		gw, ch := newSim(t)
		done := make(chan error)
		for i := range 20 {
			go func() {
				r := testRequest("channel_b", "SN", provider.TestPhonePending)
				r.Reference = "TXN-C" + string(rune('A'+i))
				in, err := gw.Initiate(bg, r)
				if err == nil {
					_, err = gw.SubmitOTP(bg, xaalis.ModeTest, "channel_b", in.Route, in.ProviderRef, provider.TestOTP)
				}
				done <- err
			}()
		}
		for range 20 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			waitNotify(t, ch)
		}
	})
}

func TestMagic(t *testing.T) {
	for _, tc := range []struct {
		phone string
		want  provider.Magic
	}{
		{"+221770000001", provider.MagicSuccess},
		{"+221 77 000 00 02", provider.MagicFailed},
		{"+2250700000003", provider.MagicCancelled},
		{"+22370000004", provider.MagicNoPayer},
		{"+22890000005", provider.MagicRefused},
		{"+245955000006", provider.MagicUnreachable},
		{"+221770000007", ""},
		{"+221771230001", provider.MagicSuccess},
		{"001", ""},
		{"", ""},
	} {
		if got := provider.MagicOf(tc.phone); got != tc.want {
			t.Errorf("MagicOf(%q) = %q, want %q", tc.phone, got, tc.want)
		}
	}
	// The example numbers are valid mobile numbers of their country, so
	// that Xaalis's phone validation lets them through.
	for _, c := range xaalis.Countries {
		for _, m := range provider.Magics {
			p := provider.TestPhone(c, m)
			num, err := phonenumbers.Parse(p, string(c))
			if err != nil || !phonenumbers.IsValidNumberForRegion(num, string(c)) {
				t.Errorf("TestPhone(%s, %s) = %s is not valid: %v", c, m, p, err)
			}
			if provider.MagicOf(p) != m {
				t.Errorf("TestPhone(%s, %s) = %s", c, m, p)
			}
		}
	}
	for _, p := range []string{provider.TestPhoneSuccess, provider.TestPhoneFailed, provider.TestPhoneCancelled,
		provider.TestPhoneNoPayer, provider.TestPhoneRefused, provider.TestPhoneUnreachable, provider.TestPhonePending} {
		num, err := phonenumbers.Parse(p, "SN")
		if err != nil || !phonenumbers.IsValidNumberForRegion(num, "SN") {
			t.Errorf("%s is not a valid SN number", p)
		}
	}
}

// TestSimulatorMemory: a simulator remembers its last SimulatorMemory
// collections, payouts and refunds, and forgets older ones as a restart
// does: a long-running server's test traffic must not grow its memory,
// and its garbage collector's work, without end.
func TestSimulatorMemory(t *testing.T) {
	gw := provider.New(defaults(t), provider.Options{SimulatorMemory: 3})
	refs := make([]string, 5)
	for i := range refs {
		r := testRequest("channel_a", "SN", provider.TestPhoneSuccess)
		r.Reference = fmt.Sprintf("TXN-M%d", i)
		in, err := gw.Initiate(bg, r)
		if err != nil || in.State != xaalis.ProviderSuccess {
			t.Fatalf("collection %d: %+v %v", i, in, err)
		}
		refs[i] = in.ProviderRef
	}
	for i, ref := range refs {
		st, err := gw.Status(bg, xaalis.ModeTest, "channel_a", "simulator", ref)
		forgotten := st.State == xaalis.ProviderPending && st.Reason == provider.ReasonUnknownToSimulator
		if err != nil || forgotten != (i < 2) || !forgotten && st.State != xaalis.ProviderSuccess {
			t.Errorf("collection %d of 5, 3 remembered: %+v %v", i, st, err)
		}
	}
	// A forgotten collection is refunded blindly; a remembered one is
	// checked (1,000 XOF collected).
	if _, err := gw.Refund(bg, testRefund("channel_a", refs[0], "TXN-MR0", 500000)); err != nil {
		t.Errorf("refund of a forgotten collection: %v", err)
	}
	if _, err := gw.Refund(bg, testRefund("channel_a", refs[4], "TXN-MR4", 500000)); xaalis.ErrorCode(err) != xaalis.EGatewayError {
		t.Errorf("refund past a remembered collection: %v, want gateway_error", err)
	}
	// The same reference is the same collection while remembered, a new
	// one once forgotten.
	for i, want := range map[int]bool{4: true, 0: false} {
		r := testRequest("channel_a", "SN", provider.TestPhoneSuccess)
		r.Reference = fmt.Sprintf("TXN-M%d", i)
		in, err := gw.Initiate(bg, r)
		if err != nil || (in.ProviderRef == refs[i]) != want {
			t.Errorf("collection %d initiated again: %q (first %q) %v", i, in.ProviderRef, refs[i], err)
		}
	}

	for i := range 4 {
		if _, err := gw.Payout(bg, testPayout("channel_a", "SN", provider.TestPhoneSuccess, fmt.Sprintf("TXN-MP%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gw.PayoutStatus(bg, xaalis.ModeTest, "channel_a", "TXN-MP0"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Errorf("status of a forgotten payout: %v, want not found", err)
	}
	if res, err := gw.PayoutStatus(bg, xaalis.ModeTest, "channel_a", "TXN-MP3"); err != nil || res.State != xaalis.ProviderSuccess {
		t.Errorf("status of a remembered payout: %+v %v", res, err)
	}

	// Refunds: TXN-MR0 and TXN-MR4 above (the second refused, so not
	// kept), then three more; TXN-MR0 is forgotten, its reference free.
	for i := 1; i <= 3; i++ {
		if _, err := gw.Refund(bg, testRefund("channel_a", "sim_a_gone", fmt.Sprintf("TXN-MRX%d", i), 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gw.Refund(bg, testRefund("channel_a", "sim_a_other", "TXN-MR0", 700)); err != nil {
		t.Errorf("a forgotten refund's reference used again: %v", err)
	}
	if _, err := gw.Refund(bg, testRefund("channel_a", "sim_a_other", "TXN-MRX3", 700)); xaalis.ErrorCode(err) != xaalis.EGatewayError {
		t.Errorf("a remembered refund's reference used for another: %v, want gateway_error", err)
	}
}
