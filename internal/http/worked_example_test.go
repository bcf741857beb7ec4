package http_test

import (
	"context"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestWorkedExample runs the worked day of docs/balance.md and checks each
// row of its table.
func TestWorkedExample(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		admin, token := adminEnv(t, e)
		row := func(n int, avail, pending, reserved, accounting float64) {
			t.Helper()
			bal := e.balance(t, keys.SecretTest)
			if bal.Available != avail || bal.Pending != pending || bal.Reserved != reserved || bal.Accounting != accounting {
				t.Fatalf("row %d: %+v, want %v %v %v %v", n, bal, avail, pending, reserved, accounting)
			}
		}
		_, p1 := e.pay(t, keys.SecretTest, "w-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"+221771234567"}`)
		row(1, 0, 10000, 0, 0)
		e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p1.ID + "/simulate", key: keys.SecretTest, idem: "w-2", body: `{"outcome":"success"}`}).want(t, 200, "")
		row(2, 9900, 0, 0, 9900)
		_, p3 := e.pay(t, keys.SecretTest, "w-3", `"amount":3000,"provider":"channel_b","payer":{"phone":"+221771234568"},"expires_in":600`)
		row(3, 9900, 3000, 0, 9900)
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "w-4",
			body: payoutBody("w-4", 1000, "channel_a", provider.TestPhoneNoPayer)}).want(t, 201, "")
		row(4, 8890, 3000, 1010, 9900)
		// The provider's notification confirms the payout.
		var po txRecord
		e.do(call{method: "GET", path: "/v1/payouts/w-4", key: keys.SecretTest}).data(t, &po)
		if _, err := e.app.ApplyNotification(context.Background(), xaalis.ModeTest, xaalis.Notification{EventID: "ev-w-5",
			Provider: "channel_a", ProviderRef: providerRef(t, e, po.ID), State: xaalis.ProviderSuccess}); err != nil {
			t.Fatal(err)
		}
		row(5, 8890, 3000, 0, 8890)
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "w-6", body: `{"transaction_id":"` + p1.ID + `","amount":2000}`}).want(t, 201, "")
		row(6, 6890, 3000, 0, 6890)
		e.clock.Advance(11 * time.Minute)
		if n, err := e.app.ExpireDue(context.Background(), 10); err != nil || n != 1 {
			t.Fatalf("expired %d %v", n, err)
		}
		_ = p3
		row(7, 6890, 0, 0, 6890)
		var pr struct{ ID string }
		e.do(call{method: "POST", path: "/v1/payout-requests", key: keys.SecretTest, idem: "w-8",
			body: `{"amount":5000,"destination_phone":"+221771112233"}`}).want(t, 201, "").data(t, &pr)
		row(8, 1890, 0, 5000, 6890)
		for _, action := range []string{"approve", "complete"} {
			req := mustRequest(t, "POST", admin.URL+"/admin/v1/payout-requests/"+pr.ID+"/"+action, "")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := client.Do(req)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("%s: %v %v", action, res, err)
			}
			res.Body.Close()
		}
		row(9, 1890, 0, 0, 1890)
		r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "w-10",
			body: payoutBody("w-10", 2000, "channel_a", "+221771112233")}).want(t, 422, xaalis.EInsufficientBalance)
		if c := r.err.Context; c["currency"] != "XOF" || c["available"] != float64(1890) || c["required"] != float64(2020) {
			t.Fatalf("row 10: %v", c)
		}
		e.ledgerOK(t)
	})
}

// TestPayoutUnknownOutcome: the provider times out after recording the
// payout; the answer stays initiated and reserved; the server restarts;
// the dispatcher asks the provider about the reference, finds the payout
// and settles it: the provider saw one payout, never two.
func TestPayoutUnknownOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e, emu, keys := liveEnv(t, b)
		e.fund(t, keys.SecretLive, 1, 10000)
		if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{Timeout: true}); err != nil {
			t.Fatal(err)
		}
		r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretLive, idem: "slow-1",
			body: payoutBody("slow-1", 1000, "channel_a", "+221771112233")}).want(t, 201, "")
		var p txRecord
		r.data(t, &p)
		if p.Status != "initiated" {
			t.Fatalf("payout with a timed-out provider: %s", r.body)
		}
		if bal := e.balance(t, keys.SecretLive); bal.Reserved != 1010 {
			t.Fatalf("not reserved: %+v", bal)
		}
		// The same key replays the stored answer and sends nothing.
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretLive, idem: "slow-1",
			body: payoutBody("slow-1", 1000, "channel_a", "+221771112233")}).want(t, 201, "")
		if err := emu.SetRoute("channel_a", "direct", provider.RouteSwitches{}); err != nil {
			t.Fatal(err)
		}
		// A restart: a new server process on the same database.
		e2 := newEnv(t, e.app.Store, func(_ *xhttp.Config, a *xaalis.App) { a.Config, a.Gateway = e.app.Config, e.app.Gateway })
		e2.clock.Advance(2 * time.Minute)
		if n, err := e2.app.DispatchDue(context.Background(), 10); err != nil || n != 1 {
			t.Fatalf("dispatched %d, %v", n, err)
		}
		var got txRecord
		e.do(call{method: "GET", path: "/v1/payouts/" + p.ID, key: keys.SecretLive}).data(t, &got)
		// The answer came: the timed-out attempt's failure is no longer
		// the last word.
		if got.Status != "success" || got.FailureReason != nil || p.FailureReason == nil {
			t.Fatalf("after reconciliation: %s %v (before: %v)", got.Status, got.FailureReason, p.FailureReason)
		}
		if n := len(emu.Payouts()); n != 1 {
			t.Fatalf("the provider received %d payouts", n)
		}
		if bal := e.balance(t, keys.SecretLive); bal.Reserved != 0 || bal.Available != 9900-1010 {
			t.Fatalf("balance: %+v", bal)
		}
		e.ledgerOK(t)
	})
}
