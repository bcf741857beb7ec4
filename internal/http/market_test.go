package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// operatorDo sends an operator request to the admin listener.
func operatorDo(t *testing.T, admin *httptest.Server, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := mustRequest(t, method, admin.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

type disputeRecord struct {
	ID, Reference, Status, Amount string
	TransactionID                 string `json:"transaction_id"`
	Evidence                      []string
	RespondedAt                   *string `json:"responded_at"`
}

func TestDisputes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		admin, token := adminEnv(t, e)
		e.fund(t, keys.SecretTest, 1, 50000) // 49 500 available
		open := func(payID string) disputeRecord {
			t.Helper()
			st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+payID+`","reason":"not received"}`)
			if st != 201 {
				t.Fatalf("open dispute: %d %v", st, out)
			}
			var d disputeRecord
			b, _ := json.Marshal(out["data"])
			_ = json.Unmarshal(b, &d)
			return d
		}
		payStatus := func(id string) string {
			var p txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + id, key: keys.SecretTest}).want(t, 200, "").data(t, &p)
			return p.Status
		}
		_, p1 := e.pay(t, keys.SecretTest, "d-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		// 49 500 + 9 900
		if bal := e.balance(t, keys.SecretTest); bal.Available != 59400 {
			t.Fatalf("funded %+v", bal)
		}
		d := open(p1.ID)
		if d.Status != "needs_response" || !strings.HasPrefix(d.Reference, "DSP-") || payStatus(p1.ID) != "disputed" {
			t.Fatalf("opened: %+v", d)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available != 49400 || bal.Reserved != 10000 {
			t.Fatalf("reserved: %+v", bal)
		}
		e.ledgerOK(t)

		t.Run("OKList", func(t *testing.T) {
			var list []disputeRecord
			r := e.do(call{method: "GET", path: "/v1/disputes?status=needs_response&per_page=5", key: keys.SecretTest}).want(t, 200, "")
			r.data(t, &list)
			if len(list) != 1 || !strings.Contains(string(r.body), `"pagination":{"total":1,"per_page":5,"current_page":1,"last_page":1}`) {
				t.Fatalf("list: %s", r.body)
			}
			var got disputeRecord
			e.do(call{method: "GET", path: "/v1/disputes/" + d.Reference, key: keys.SecretTest}).want(t, 200, "").data(t, &got)
			if got.ID != d.ID {
				t.Fatal("by reference")
			}
			e.do(call{method: "GET", path: "/v1/disputes?status=bogus", key: keys.SecretTest}).want(t, 422, xaalis.EValidation)
			e.do(call{method: "GET", path: "/v1/disputes/" + d.ID, key: keys.SecretLive}).want(t, 403, xaalis.ELivemodeMismatch)
		})
		t.Run("ErrRespondValidation", func(t *testing.T) {
			var ev []string
			for i := range 21 {
				ev = append(ev, fmt.Sprintf(`"https://shop.example/e/%d"`, i))
			}
			respond := func(idem, body string) *response {
				return e.do(call{method: "POST", path: "/v1/disputes/" + d.ID + "/respond", key: keys.SecretTest, idem: idem, body: body, invalid: true})
			}
			respond("r-1", `{"evidence":[`+strings.Join(ev, ",")+`]}`).want(t, 422, xaalis.EValidation)
			respond("r-2", `{"evidence":["https://shop.example/`+strings.Repeat("x", 500)+`"]}`).want(t, 422, xaalis.EValidation)
			respond("r-3", `{"merchant_response":"`+strings.Repeat("é", 2001)+`"}`).want(t, 422, xaalis.EValidation)
			respond("r-4", `{"evidence":["not a url"]}`).want(t, 422, xaalis.EValidation)
		})
		t.Run("OKRespondThenWon", func(t *testing.T) {
			var got disputeRecord
			e.do(call{method: "POST", path: "/v1/disputes/" + d.ID + "/respond", key: keys.SecretTest, idem: "r-ok",
				// 500 characters (501 bytes): the spec counts characters.
				body: `{"evidence":["https://shop.example/receipt.pdf","https://shop.example/caf\u00e9` + strings.Repeat("a", 475) + `"],` +
					`"merchant_response":"Delivered on 12 Nov, signed."}`}).
				want(t, 200, "").data(t, &got)
			if got.Status != "under_review" || len(got.Evidence) != 2 {
				t.Fatalf("responded: %+v", got)
			}
			r := e.do(call{method: "POST", path: "/v1/disputes/" + d.ID + "/respond", key: keys.SecretTest, idem: "r-again",
				body: `{"merchant_response":"again"}`}).want(t, 422, xaalis.EDisputeNotRespondable)
			if r.err.Context["status"] != "under_review" {
				t.Fatalf("context %v", r.err.Context)
			}
			if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes/"+d.ID+"/decide", `{"outcome":"won"}`); st != 200 {
				t.Fatalf("decide: %d %v", st, out)
			}
			if payStatus(p1.ID) != "success" {
				t.Fatal("a won dispute returns the payment to success")
			}
			if bal := e.balance(t, keys.SecretTest); bal.Available != 59400 || bal.Reserved != 0 {
				t.Fatalf("after won: %+v", bal)
			}
			if evs := e.events(t, d.ID); strings.Join(evs, ",") != "dispute.opened,dispute.responded,dispute.won" {
				t.Fatalf("events %v", evs)
			}
			if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/disputes/"+d.ID+"/decide", `{"outcome":"lost"}`); st != 422 {
				t.Fatalf("deciding a closed dispute: %d", st)
			}
			e.ledgerOK(t)
		})
		t.Run("OKLost", func(t *testing.T) {
			d2 := open(p1.ID)
			if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/disputes/"+d2.ID+"/decide", `{"outcome":"lost"}`); st != 200 {
				t.Fatal("decide lost")
			}
			if bal := e.balance(t, keys.SecretTest); bal.Available != 49400 || bal.Reserved != 0 {
				t.Fatalf("after lost: %+v", bal)
			}
			if payStatus(p1.ID) != "disputed" {
				t.Fatal("a lost dispute leaves the payment disputed")
			}
			e.ledgerOK(t)
		})
		t.Run("OKDeadlineLoses", func(t *testing.T) {
			_, p2 := e.pay(t, keys.SecretTest, "d-2", `"amount":2000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			d3 := open(p2.ID)
			e.clock.Advance(7*24*time.Hour - time.Minute)
			if n, _ := e.app.ExpireDisputes(context.Background(), 10); n != 0 {
				t.Fatal("lost before the deadline")
			}
			e.clock.Advance(2 * time.Minute)
			if n, err := e.app.ExpireDisputes(context.Background(), 10); n != 1 || err != nil {
				t.Fatalf("expired %d %v", n, err)
			}
			var got disputeRecord
			e.do(call{method: "GET", path: "/v1/disputes/" + d3.ID, key: keys.SecretTest}).data(t, &got)
			if got.Status != "lost" {
				t.Fatalf("status %s", got.Status)
			}
			e.ledgerOK(t)
		})
		t.Run("ErrRespondAfterDueBy", func(t *testing.T) {
			// The deadline job has not run yet: a response at due_by is
			// too late, and loses the dispute as the job would.
			_, p5 := e.pay(t, keys.SecretTest, "d-5", `"amount":2000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			before := e.balance(t, keys.SecretTest)
			d5 := open(p5.ID)
			e.clock.Advance(7 * 24 * time.Hour)
			respond := func() *response {
				return e.do(call{method: "POST", path: "/v1/disputes/" + d5.ID + "/respond", key: keys.SecretTest, idem: "r-late",
					body: `{"merchant_response":"late"}`})
			}
			r := respond().want(t, 422, xaalis.EDisputeNotRespondable)
			if r.err.Context["status"] != "lost" {
				t.Fatalf("context %v", r.err.Context)
			}
			if again := respond().want(t, 422, xaalis.EDisputeNotRespondable); again.header.Get("Idempotent-Replay") != "true" {
				t.Fatal("the late answer is not the key's stored answer")
			}
			var got disputeRecord
			e.do(call{method: "GET", path: "/v1/disputes/" + d5.ID, key: keys.SecretTest}).data(t, &got)
			if got.Status != "lost" || got.RespondedAt != nil {
				t.Fatalf("after a late response: %+v", got)
			}
			if evs := e.events(t, d5.ID); strings.Join(evs, ",") != "dispute.opened,dispute.lost" {
				t.Fatalf("events %v", evs)
			}
			if bal := e.balance(t, keys.SecretTest); bal.Available != before.Available-2000 || bal.Reserved != before.Reserved {
				t.Fatalf("balance %+v, before %+v", bal, before)
			}
			if n, _ := e.app.ExpireDisputes(context.Background(), 10); n != 0 {
				t.Fatal("lost twice")
			}
			e.ledgerOK(t)
		})
		t.Run("OKOperatorAmount", func(t *testing.T) {
			_, p4 := e.pay(t, keys.SecretTest, "d-4", `"amount":3000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+p4.ID+`","amount":500}`)
			if st != 201 || out["data"].(map[string]any)["amount"] != "500.00" {
				t.Fatalf("open with an amount: %d %v", st, out)
			}
			if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/disputes/"+out["data"].(map[string]any)["id"].(string)+"/decide", `{"outcome":"won"}`); st != 200 {
				t.Fatal("decide")
			}
			if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+p4.ID+`","amount":5000}`); st != 422 {
				t.Fatalf("more than the payment: %d", st)
			}
			if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{}`); st != 422 || !strings.Contains(fmt.Sprint(out["error"]), "transaction_id") {
				t.Fatalf("no transaction_id: %d %v", st, out)
			}
		})
		t.Run("OKProviderReported", func(t *testing.T) {
			_, p3 := e.pay(t, keys.SecretTest, "d-3", `"amount":3000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
			n := xaalis.Notification{EventID: "prov-dsp-1", Provider: "channel_a", ProviderRef: providerRef(t, e, p3.ID),
				Dispute: &xaalis.DisputeNotice{Amount: xaalis.Amount{Minor: 100050, Currency: xaalis.XOF}, Reason: "fraud"}}
			if dup, err := e.app.ApplyNotification(context.Background(), xaalis.ModeTest, n); err != nil || dup {
				t.Fatalf("notification: %v %v", dup, err)
			}
			if dup, _ := e.app.ApplyNotification(context.Background(), xaalis.ModeTest, n); !dup {
				t.Fatal("the same notification opened a second dispute")
			}
			var list []disputeRecord
			e.do(call{method: "GET", path: "/v1/disputes?status=needs_response", key: keys.SecretTest}).data(t, &list)
			if len(list) != 1 || list[0].Amount != "1000.50" || list[0].TransactionID != p3.ID {
				t.Fatalf("provider dispute: %+v", list)
			}
			e.ledgerOK(t)
		})
	})
}

// TestDisputeShortfall: a dispute larger than the available balance holds
// all of it, leaving available negative (a debt, as a refund's); winning
// settles the debt first; losing leaves the debt, which the next payments
// recover before any payout is possible.
// TestDisputeEventsReachCallbackURL: every event of a disputed payment's
// disputes (opened, responded, decided) is delivered to the payment's
// callback_url, as the payment's own events are, and names the payment's
// merchant_ref as merchant_reference, in the record and in both webhook
// formats.
// TestRefundEventsReachCallbackURL: a refund's events go to its payment's
// callback_url, as the payment's own and its disputes' do.
func TestRefundEventsReachCallbackURL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		const hook = "https://shop.example/hook"
		_, p := e.pay(t, keys.SecretTest, "rcb-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+
			provider.TestPhoneSuccess+`"},"callback_url":"`+hook+`"`)
		e.do(call{method: "POST", path: "/v1/refunds", key: keys.SecretTest, idem: "rcb-r",
			body: `{"transaction_id":"` + p.ID + `","amount":3000}`}).want(t, 201, "")
		for _, typ := range []string{xaalis.EventRefundSuccess, xaalis.EventPaymentPartiallyRefunded} {
			e.deliveredTo(t, keys.SecretTest, typ, hook)
		}
	})
}

// deliveredTo reads the one event of type typ and checks it has one
// delivery, to hook.
func (e *env) deliveredTo(t *testing.T, key, typ, hook string) apiEvent {
	t.Helper()
	var evs []struct{ ID string }
	e.do(call{method: "GET", path: "/v1/events?type=" + typ, key: key}).want(t, 200, "").data(t, &evs)
	if len(evs) != 1 {
		t.Fatalf("%s: %d events", typ, len(evs))
	}
	var ev apiEvent
	e.do(call{method: "GET", path: "/v1/events/" + evs[0].ID, key: key}).want(t, 200, "").data(t, &ev)
	if len(ev.Deliveries) != 1 || ev.Deliveries[0].URL != hook {
		t.Errorf("%s: deliveries %+v, want one to %s", typ, ev.Deliveries, hook)
	}
	return ev
}

func TestDisputeEventsReachCallbackURL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		admin, token := adminEnv(t, e)
		const hook = "https://shop.example/hook"
		_, p := e.pay(t, keys.SecretTest, "dcb-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+
			provider.TestPhoneSuccess+`"},"callback_url":"`+hook+`"`)
		// Named by its TXN- reference, as the console may name it.
		st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+p.Reference+`","reason":"not received"}`)
		if st != 201 {
			t.Fatalf("open dispute: %d %v", st, out)
		}
		id := out["data"].(map[string]any)["id"].(string)
		if ref := out["data"].(map[string]any)["merchant_reference"]; ref != "dcb-1" {
			t.Fatalf("the dispute's merchant_reference: %v", ref)
		}
		e.do(call{method: "POST", path: "/v1/disputes/" + id + "/respond", key: keys.SecretTest, idem: "dcb-r",
			body: `{"merchant_response":"delivered on the 3rd"}`}).want(t, 200, "")
		if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes/"+id+"/decide", `{"outcome":"won"}`); st != 200 {
			t.Fatalf("decide: %d %v", st, out)
		}
		for _, typ := range []string{xaalis.EventDisputeOpened, xaalis.EventDisputeResponded, xaalis.EventDisputeWon} {
			ev := e.deliveredTo(t, keys.SecretTest, typ, hook)
			for _, f := range []xaalis.PayloadFormat{xaalis.FormatLegacy, xaalis.Format20260601} {
				body := ev.payload(t, f, "dispute", id, e.clock.Now())
				var w struct {
					Data struct {
						MerchantReference string `json:"merchant_reference"`
					}
				}
				if err := json.Unmarshal(body, &w); err != nil || w.Data.MerchantReference != "dcb-1" {
					t.Errorf("%s, %s: data.merchant_reference %q: %s", typ, f, w.Data.MerchantReference, body)
				}
			}
		}
	})
}

func TestDisputeShortfall(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "s-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "s-po", body: payoutBody("s-po", 9000, "channel_a", "+221771112233")}).want(t, 201, "")
		if bal := e.balance(t, keys.SecretTest); bal.Available != 810 {
			t.Fatalf("before: %+v", bal)
		}
		d, err := e.app.OpenDispute(context.Background(), xaalis.DisputeOpen{TransactionID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		// 10 000 held: 810 from available, 9 190 owed meanwhile.
		if bal := e.balance(t, keys.SecretTest); bal.Available != -9190 || bal.Reserved != 10000 || bal.Accounting != 810 {
			t.Fatalf("held: %+v", bal)
		}
		e.ledgerOK(t)
		if _, err := e.app.DecideDispute(context.Background(), d.ID, xaalis.DisputeWon, ""); err != nil {
			t.Fatal(err)
		}
		if bal := e.balance(t, keys.SecretTest); bal.Available != 810 || bal.Reserved != 0 {
			t.Fatalf("after won: %+v", bal)
		}
		e.ledgerOK(t)

		// Lost: the chargeback debt stays in available and is recovered
		// from the next payments; payouts wait until it is.
		_, p2 := e.pay(t, keys.SecretTest, "s-2", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "s-po-2", body: payoutBody("s-po-2", 5000, "channel_a", "+221771112233")}).
			want(t, 201, "")
		d2, err := e.app.OpenDispute(context.Background(), xaalis.DisputeOpen{TransactionID: p2.ID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.app.DecideDispute(context.Background(), d2.ID, xaalis.DisputeLost, ""); err != nil {
			t.Fatal(err)
		}
		// 810 + 9 900 − 5 050 − 10 000 = −4 340.
		if bal := e.balance(t, keys.SecretTest); bal.Available != -4340 || bal.Reserved != 0 || bal.Accounting != -4340 {
			t.Fatalf("after lost: %+v", bal)
		}
		r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "s-po-3", body: payoutBody("s-po-3", 100, "channel_a", "+221771112233")}).
			want(t, 422, xaalis.EInsufficientBalance)
		if r.err.Context["available"] != float64(-4340) {
			t.Fatalf("context %v", r.err.Context)
		}
		e.fund(t, keys.SecretTest, 1, 5000) // 4 950 credited: 4 340 repays the debt
		if bal := e.balance(t, keys.SecretTest); bal.Available != 610 {
			t.Fatalf("after the next payment: %+v", bal)
		}
		e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "s-po-4", body: payoutBody("s-po-4", 500, "channel_a", "+221771112233")}).
			want(t, 201, "")
		e.ledgerOK(t)
	})
}

func TestSplits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		bID, bKeys := e.merchant()
		cID, cKeys := e.merchant()
		dID, _ := e.merchant()
		st := xaalis.MerchantSuspended
		if _, err := e.app.UpdateMerchant(context.Background(), dID, xaalis.MerchantUpdate{Status: &st}); err != nil {
			t.Fatal(err)
		}
		// A merchant still pending (not yet activated) is not active either.
		pendingID, _ := e.merchant()
		pst := xaalis.MerchantPending
		if _, err := e.app.UpdateMerchant(context.Background(), pendingID, xaalis.MerchantUpdate{Status: &pst}); err != nil {
			t.Fatal(err)
		}
		split := func(payID, idem, items string) *response {
			return e.do(call{method: "POST", path: "/v1/payments/" + payID + "/splits", key: keys.SecretTest, idem: idem,
				body: `{"items":[` + items + `]}`, invalid: true})
		}
		item := func(ben string, amount int) string {
			return fmt.Sprintf(`{"beneficiary_merchant_id":"%s","amount":%d,"description":"seller share"}`, ben, amount)
		}
		_, p := e.pay(t, keys.SecretTest, "sp-1", `"amount":10000,"provider":"channel_b","payer":{"phone":"+221771234567"}`)

		t.Run("ErrSplitItemsRequired", func(t *testing.T) {
			split(p.ID, "s-0", "").want(t, 422, xaalis.ESplitItemsRequired)
		})
		t.Run("ErrSplitTotalExceedsTransaction", func(t *testing.T) {
			r := split(p.ID, "s-1", item(bID, 6000)+","+item(cID, 5000)).want(t, 422, xaalis.ESplitTotalExceedsTransaction)
			if r.err.Context["total_split"] != float64(11000) || r.err.Context["transaction_amount"] != float64(10000) {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("ErrBeneficiaryNotActive", func(t *testing.T) {
			for i, ben := range []string{dID, pendingID} {
				r := split(p.ID, fmt.Sprintf("s-2-%d", i), item(ben, 100)).want(t, 422, xaalis.EBeneficiaryNotActive)
				if r.err.Context["beneficiary_merchant_id"] != ben {
					t.Fatalf("context %v", r.err.Context)
				}
			}
		})
		t.Run("ErrMerchantKYCRequired", func(t *testing.T) {
			// A live split moves money as a refund does: not before KYC.
			e.do(call{method: "POST", path: "/v1/payments/" + p.ID + "/splits", key: keys.SecretLive, idem: "s-kyc",
				body: `{"items":[` + item(bID, 100) + `]}`}).want(t, 422, xaalis.EMerchantKYCRequired)
		})
		t.Run("ErrBeneficiaryField", func(t *testing.T) {
			// Every error of a beneficiary names the item it is in.
			r := split(p.ID, "s-ben", item(bID, 100)+","+item(xaalis.NewUUIDv7(), 100)).want(t, 422, xaalis.EValidation)
			if _, ok := r.err.Errors["items[1].beneficiary_merchant_id"]; !ok || len(r.err.Errors) != 1 {
				t.Fatalf("fields %v", r.err.Errors)
			}
		})
		t.Run("OKThenExceeds", func(t *testing.T) {
			r := split(p.ID, "s-3", item(bID, 3000)+","+item(cID, 2000)).want(t, 201, "")
			var items []struct{ ID, Status, Amount string }
			r.data(t, &items)
			if len(items) != 2 || items[0].Status != "pending" {
				t.Fatalf("splits: %s", r.body)
			}
			split(p.ID, "s-4", item(bID, 5001)).want(t, 422, xaalis.ESplitsExceedTransactionAmount)
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID + "/splits", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 2 {
				t.Fatalf("list %d", len(list))
			}
		})
		t.Run("OKCreditedOnSuccess", func(t *testing.T) {
			e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + p.ID + "/simulate", key: keys.SecretTest, idem: "sp-sim",
				body: `{"outcome":"success"}`}).want(t, 200, "")
			// channel_b in SN: 1.5 % fee (150); shares net pro rata.
			if got := e.balance(t, bKeys.SecretTest).Available; got != 2955 {
				t.Fatalf("beneficiary B: %v", got)
			}
			if got := e.balance(t, cKeys.SecretTest).Available; got != 1970 {
				t.Fatalf("beneficiary C: %v", got)
			}
			if got := e.balance(t, keys.SecretTest).Available; got != 4925 {
				t.Fatalf("platform: %v", got)
			}
			var list []struct {
				Status, Beneficiary string
				Credited            *string `json:"credited_amount"`
				Ref                 *string `json:"merchant_reference"`
			}
			e.do(call{method: "GET", path: "/v1/payments/" + p.ID + "/splits", key: keys.SecretTest}).data(t, &list)
			if list[0].Status != "credited" || len(list) != 2 || list[0].Ref == nil || *list[0].Ref != "sp-1" {
				t.Fatalf("items %+v", list)
			}
			// What each seller's available rose by.
			credited := map[string]bool{}
			for _, it := range list {
				if it.Credited != nil {
					credited[*it.Credited] = true
				}
			}
			if !credited["2955.00"] || !credited["1970.00"] {
				t.Fatalf("credited amounts %v", credited)
			}
			// Every split made is an event of the platform's, and every
			// share credited one of its beneficiary's, which otherwise saw
			// its balance rise with nothing to reconcile against.
			events := func(key, typ string) []struct {
				Data struct {
					ID, Status            string
					BeneficiaryMerchantID string  `json:"beneficiary_merchant_id"`
					Credited              *string `json:"credited_amount"`
					Ref                   *string `json:"merchant_reference"`
				}
			} {
				var l struct {
					Data []struct {
						Data struct {
							ID, Status            string
							BeneficiaryMerchantID string  `json:"beneficiary_merchant_id"`
							Credited              *string `json:"credited_amount"`
							Ref                   *string `json:"merchant_reference"`
						}
					}
				}
				e.do(call{method: "GET", path: "/v1/events?type=" + typ, key: key}).want(t, 200, "").data(t, &l.Data)
				return l.Data
			}
			if got := events(keys.SecretTest, xaalis.EventSplitCreated); len(got) != 2 {
				t.Fatalf("the platform's split.created: %+v", got)
			}
			if got := events(bKeys.SecretTest, xaalis.EventSplitCredited); len(got) != 1 || got[0].Data.Status != "credited" ||
				got[0].Data.BeneficiaryMerchantID != bID || got[0].Data.Credited == nil || *got[0].Data.Credited != "2955.00" ||
				got[0].Data.Ref == nil || *got[0].Data.Ref != "sp-1" {
				t.Fatalf("B's split.credited: %+v", got)
			}
			if got := events(keys.SecretTest, xaalis.EventSplitCreated); got[0].Data.Ref == nil || *got[0].Data.Ref != "sp-1" {
				t.Fatalf("the platform's split.created: %+v", got)
			}
			if got := events(keys.SecretTest, xaalis.EventSplitCredited); len(got) != 0 {
				t.Fatalf("the platform got its beneficiaries' split.credited: %+v", got)
			}
			// A split of the now successful payment is credited at once.
			split(p.ID, "s-5", item(bID, 1000)).want(t, 201, "")
			if got := e.balance(t, bKeys.SecretTest).Available; got != 2955+985 {
				t.Fatalf("beneficiary B after a late split: %v", got)
			}
			if len(events(bKeys.SecretTest, xaalis.EventSplitCredited)) != 2 || len(events(cKeys.SecretTest, xaalis.EventSplitCredited)) != 1 ||
				len(events(keys.SecretTest, xaalis.EventSplitCreated)) != 3 {
				t.Fatal("events of the late split")
			}
			e.ledgerOK(t)
		})
		t.Run("ErrNonPaymentTransactionSplit", func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "sp-po", body: payoutBody("sp-po", 100, "channel_a", "+221771112233")}).want(t, 201, "")
			var po txRecord
			r.data(t, &po)
			// Its splits: not found, as the payout is on /v1/payments.
			e.do(call{method: "GET", path: "/v1/payments/" + po.ID + "/splits", key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
			r = split(po.ID, "s-6", item(bID, 10)).want(t, 422, xaalis.ENonPaymentTransactionSplit)
			if r.err.Context["type"] != "payout" {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("ErrTransactionNotSplittable", func(t *testing.T) {
			_, q := e.pay(t, keys.SecretTest, "sp-c", `"amount":1000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneCancelled+`"}`)
			r := split(q.ID, "s-7", item(bID, 10)).want(t, 422, xaalis.ETransactionNotSplittable)
			if r.err.Context["status"] != "cancelled" {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("OKConcurrentSerialised", func(t *testing.T) {
			_, q := e.pay(t, keys.SecretTest, "sp-conc", `"amount":10000,"provider":"channel_b","payer":{"phone":"+221771234567"}`)
			var ok, over atomic.Int32
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := split(q.ID, fmt.Sprint("c-", i), item(bID, 2000))
					switch {
					case r.status == 201:
						ok.Add(1)
					case r.err.Code == xaalis.ESplitsExceedTransactionAmount:
						over.Add(1)
					default:
						t.Errorf("%d %s", r.status, r.body)
					}
				}()
			}
			wg.Wait()
			if ok.Load() != 5 || over.Load() != 5 {
				t.Fatalf("%d splits accepted, %d refused; want 5 and 5", ok.Load(), over.Load())
			}
		})
		e.ledgerOK(t)
	})
}

type subRecord struct {
	ID, Status, PlanID string
	CustomerID         string    `json:"customer_id"`
	CancelAtPeriodEnd  bool      `json:"cancel_at_period_end"`
	LatestPaymentID    string    `json:"latest_payment_id"`
	FailedAttempts     int       `json:"failed_attempts"`
	CurrentPeriodEnd   time.Time `json:"current_period_end"`
}

// TestSubscriptionIDMetadataOfYourOwn: metadata.subscription_id is the
// merchant's to use. A payment naming no subscription there could never
// settle (404 at creation, at the payer's code, at the provider's
// notification), and once due it held the expiry of every other payment
// behind it. It is a payment like any other.
func TestSubscriptionIDMetadataOfYourOwn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		_, p := e.pay(t, keys.SecretTest, "own-sub-1", `"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"},"metadata":{"subscription_id":"my-own-sub-42"}`)
		if p.Status != "success" {
			t.Fatalf("payment %+v", p)
		}
		var open, other txRecord
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "own-sub-2",
			body: payBody("own-sub-2", `"provider":"channel_b","payer":{"phone":"+221771234567"},"expires_in":60,"metadata":{"subscription_id":"my-own-sub-43"}`)}).
			want(t, 201, "").data(t, &open)
		e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "own-sub-3",
			body: payBody("own-sub-3", `"provider":"channel_b","payer":{"phone":"+221771234568"},"expires_in":61`)}).
			want(t, 201, "").data(t, &other)
		e.clock.Advance(2 * time.Minute)
		if n, err := e.app.ExpireDue(context.Background(), 100); err != nil || n != 2 {
			t.Fatalf("expired %d: %v", n, err)
		}
		for _, id := range []string{open.ID, other.ID} {
			if st := e.status(t, keys.SecretTest, id); st != "expired" {
				t.Fatalf("%s: %s", id, st)
			}
		}
		e.ledgerOK(t)
	})
}

// TestSubscriptionCreationRetried: a subscription's creation commits the
// subscription before its first payment is asked and its answer stored; a
// process stopped in between left the key to a retry, which subscribed the
// customer a second time (billed twice every period). The retry under the
// key finds the subscription made; another body under it is a conflict.
func TestSubscriptionCreationRetried(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		ctx := context.Background()
		planID, customerID := e.planAndCustomer(t, keys.SecretTest, "scr-plan", `{"name":"Box","amount":5000,"interval":"month"}`, provider.TestPhonePending)
		// The first attempt's work, its answer never stored.
		first, err := e.app.CreateSubscription(xaalis.WithCommitHook(ctx, nil), e.principal(keys.SecretTest), "scr-1",
			xaalis.SubscriptionInput{PlanID: &planID, CustomerID: &customerID, Provider: text("channel_a")})
		if err != nil {
			t.Fatal(err)
		}
		body := `{"plan_id":"` + planID + `","customer_id":"` + customerID + `","provider":"channel_a"}`
		var again subRecord
		e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: "scr-1", body: body}).
			want(t, 201, "").data(t, &again)
		if again.ID != first.ID || again.LatestPaymentID != first.LatestPaymentID {
			t.Fatalf("the retry: %+v, want %s", again, first.ID)
		}
		var list []subRecord
		e.do(call{method: "GET", path: "/v1/subscriptions", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
		if len(list) != 1 {
			t.Fatalf("%d subscriptions, want 1", len(list))
		}
		// Another body under a key whose answer was never stored.
		if _, err := e.app.CreateSubscription(xaalis.WithCommitHook(ctx, nil), e.principal(keys.SecretTest), "scr-2",
			xaalis.SubscriptionInput{PlanID: &planID, CustomerID: &customerID}); err != nil {
			t.Fatal(err)
		}
		e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: "scr-2", body: body, invalid: true}).
			want(t, 409, xaalis.EIdempotencyConflict)
	})
}

// TestSubscriptionRetryOrphan: a process that stopped after asking a
// period's payment and before recording it on the subscription left the
// subscription due only at its period's end, and the payment orphaned:
// asked again, its merchant_ref was taken, which counted as one more
// failed attempt. The subscription is due again soon, and the payment
// found by its merchant_ref is the one recorded.
func TestSubscriptionRetryOrphan(t *testing.T) {
	// With a provider, and without (a hosted payment link, which stays
	// initiated until the payer chooses).
	for _, c := range []struct{ name, provider, sub, orphan, status string }{
		{"Provider", "channel_a", `,"provider":"channel_a"`, `"provider":"channel_a",`, "pending"},
		{"Hosted", "", "", "", "initiated"},
	} {
		t.Run(c.name, func(t *testing.T) { testSubscriptionRetryOrphan(t, c.sub, c.orphan, c.status) })
	}
}

func testSubscriptionRetryOrphan(t *testing.T, sub, orphanProvider, orphanStatus string) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		ctx := context.Background()
		planID, customerID := e.planAndCustomer(t, keys.SecretTest, "orph-plan", `{"name":"Box","amount":5000,"interval":"month"}`, provider.TestPhonePending)
		var s struct {
			subRecord
			Start time.Time `json:"current_period_start"`
		}
		e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: "orph-sub",
			body: `{"plan_id":"` + planID + `","customer_id":"` + customerID + `"` + sub + `}`}).
			want(t, 201, "").data(t, &s)
		outcome := "failed"
		if sub == "" {
			outcome = "cancelled" // the only outcome of a payment whose payer has not chosen
		}
		e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + s.LatestPaymentID + "/simulate", key: keys.SecretTest,
			idem: "orph-fail", body: `{"outcome":"` + outcome + `"}`}).want(t, 200, "")
		// The retry a stopped process asked and never recorded.
		ref := fmt.Sprintf("sub-%s-%s-2", s.ID, s.Start.UTC().Format("20060102"))
		_, orphan := e.pay(t, keys.SecretTest, ref, orphanProvider+`"payer":{"phone":"`+provider.TestPhonePending+`"},"metadata":{"subscription_id":"`+s.ID+`"}`)
		if orphan.Status != orphanStatus {
			t.Fatalf("orphan %+v", orphan)
		}
		e.clock.Advance(24*time.Hour + time.Minute)
		if _, err := e.app.RenewDue(ctx, 10); err != nil {
			t.Fatal(err)
		}
		var after subRecord
		e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &after)
		if after.LatestPaymentID != orphan.ID || after.FailedAttempts != 1 || after.Status != "active" {
			t.Fatalf("after the retry: %+v, want %s recorded with 1 failed attempt", after, orphan.ID)
		}
	})
}

// TestSubscriptionDailyNeverPaid: a daily plan's retry (a day later, by
// default) comes at or after its period's end, which started the next
// period with its failed attempts at 0: a customer who never paid kept an
// active subscription forever. The attempts count on until a payment
// succeeds, and the third failure in a row expires it.
func TestSubscriptionDailyNeverPaid(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		ctx := context.Background()
		planID, customerID := e.planAndCustomer(t, keys.SecretTest, "daily", `{"name":"Daily","amount":500,"interval":"day"}`, provider.TestPhoneFailed)
		var s subRecord
		e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: "sub-d",
			body: `{"plan_id":"` + planID + `","customer_id":"` + customerID + `","provider":"channel_a"}`}).
			want(t, 201, "").data(t, &s)
		if s.FailedAttempts != 1 {
			t.Fatalf("subscription %+v", s)
		}
		for day := 1; day <= 5 && s.Status == "active"; day++ {
			e.clock.Advance(24*time.Hour + time.Minute)
			if _, err := e.app.RenewDue(ctx, 10); err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &s)
			if s.Status == "active" && s.FailedAttempts != day+1 {
				t.Fatalf("day %d: %+v", day, s)
			}
		}
		if s.Status != "expired" || s.FailedAttempts != 3 {
			t.Fatalf("after three failed days: %+v", s)
		}
	})
}

func TestSubscriptions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		merchantID, keys := e.merchant()
		_, other := e.merchant()
		ctx := context.Background()
		plan := func(key, idem string) string {
			var p struct{ ID string }
			e.do(call{method: "POST", path: "/v1/plans", key: key, idem: idem, body: `{"name":"Box","amount":5000,"interval":"month"}`}).want(t, 201, "").data(t, &p)
			return p.ID
		}
		planID := plan(keys.SecretTest, "plan-1")
		otherPlan := plan(other.SecretTest, "plan-2")
		e.pay(t, keys.SecretTest, "cust-1", `"payer":{"phone":"+221771234567","name":"Awa"}`)
		e.pay(t, other.SecretTest, "cust-2", `"payer":{"phone":"+221771234568"}`)
		var customers []struct{ ID, Phone string }
		e.do(call{method: "GET", path: "/v1/customers", key: keys.SecretTest}).want(t, 200, "").data(t, &customers)
		if len(customers) != 1 || customers[0].Phone != "+221771234567" {
			t.Fatalf("customers %+v", customers)
		}
		custID := customers[0].ID
		e.do(call{method: "GET", path: "/v1/customers/" + custID, key: keys.SecretTest}).want(t, 200, "")
		var oc []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/customers", key: other.SecretTest}).data(t, &oc)
		e.do(call{method: "GET", path: "/v1/customers/" + oc[0].ID, key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
		create := func(idem, planID, custID, extra string) *response {
			return e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: idem,
				body: `{"plan_id":"` + planID + `","customer_id":"` + custID + `"` + extra + `}`})
		}

		t.Run("ErrSubscriptionPlanNotAvailable", func(t *testing.T) {
			r := create("sub-x1", otherPlan, custID, "").want(t, 422, xaalis.ESubscriptionPlanNotAvailable)
			if r.err.Context["plan_id"] != otherPlan {
				t.Fatalf("context %v", r.err.Context)
			}
			create("sub-x2", "01900000-0000-7000-8000-000000000000", custID, "").want(t, 422, xaalis.ESubscriptionPlanNotAvailable)
			inactive := plan(keys.SecretTest, "plan-3")
			e.do(call{method: "POST", path: "/v1/plans/" + inactive + "/deactivate", key: keys.SecretTest, idem: "deact"}).want(t, 200, "")
			create("sub-x3", inactive, custID, "").want(t, 422, xaalis.ESubscriptionPlanNotAvailable)
		})
		// Spec: "a test key only reaches test objects and a live key only
		// live objects; a mismatch gives livemode_mismatch".
		t.Run("ErrLivemodeMismatch", func(t *testing.T) {
			live := func(idem, planID, custID string) *response {
				return e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretLive, idem: idem,
					body: `{"plan_id":"` + planID + `","customer_id":"` + custID + `"}`})
			}
			livePlan := plan(keys.SecretLive, "plan-live")
			// A live subscription moves money: not before KYC.
			live("sub-kyc", livePlan, custID).want(t, 422, xaalis.EMerchantKYCRequired)
			kyc := xaalis.KYCApproved
			if _, err := e.app.UpdateMerchant(ctx, merchantID, xaalis.MerchantUpdate{KYC: &kyc}); err != nil {
				t.Fatal(err)
			}
			live("sub-lm1", planID, custID).want(t, 403, xaalis.ELivemodeMismatch)
			live("sub-lm2", livePlan, custID).want(t, 403, xaalis.ELivemodeMismatch)
		})
		t.Run("OKCustomerOfAnotherCountry", func(t *testing.T) {
			// A customer of Côte d'Ivoire is asked in Côte d'Ivoire, with
			// the customer's name.
			e.pay(t, keys.SecretTest, "cust-ci", `"country":"CI","payer":{"phone":"+2250700000042","name":"Koffi"}`)
			var list []struct{ ID, Phone string }
			e.do(call{method: "GET", path: "/v1/customers?per_page=100", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			ci := ""
			for _, c := range list {
				if c.Phone == "+2250700000042" {
					ci = c.ID
				}
			}
			var s subRecord
			create("sub-ci", planID, ci, `,"provider":"channel_a"`).want(t, 201, "").data(t, &s)
			if s.LatestPaymentID == "" || s.FailedAttempts != 0 {
				t.Fatalf("subscription %+v", s)
			}
			var pay txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + s.LatestPaymentID, key: keys.SecretTest}).want(t, 200, "").data(t, &pay)
			if pay.Country != "CI" || pay.Status != "pending" || pay.Payer.Name == nil || *pay.Payer.Name != "Koffi" {
				t.Fatalf("period payment %+v", pay)
			}
			e.do(call{method: "POST", path: "/v1/subscriptions/" + s.ID + "/cancel", key: keys.SecretTest, idem: "sub-ci-x"}).want(t, 200, "")
		})
		t.Run("ErrSubscriptionCustomerMismatch", func(t *testing.T) {
			r := create("sub-x4", planID, oc[0].ID, "").want(t, 422, xaalis.ESubscriptionCustomerMismatch)
			if r.err.Context["customer_id"] != oc[0].ID {
				t.Fatalf("context %v", r.err.Context)
			}
		})
		t.Run("OKPeriodsAndCancelAtPeriodEnd", func(t *testing.T) {
			var s subRecord
			create("sub-1", planID, custID, `,"provider":"channel_a"`).want(t, 201, "").data(t, &s)
			if s.Status != "active" || s.LatestPaymentID == "" {
				t.Fatalf("subscription %+v", s)
			}
			var pay txRecord
			e.do(call{method: "GET", path: "/v1/payments/" + s.LatestPaymentID, key: keys.SecretTest}).data(t, &pay)
			if pay.Status != "pending" || pay.Amount != "5000.00" || pay.Metadata["subscription_id"] != s.ID {
				t.Fatalf("period payment %+v", pay)
			}
			// No return URL of its own: the hosted page sends the payer to
			// none (it sent to https://xaalis.invalid/..., which resolves
			// nowhere).
			var urls struct {
				Success *string `json:"success_url"`
				Failed  *string `json:"failed_url"`
			}
			e.do(call{method: "GET", path: "/v1/payments/" + s.LatestPaymentID, key: keys.SecretTest}).data(t, &urls)
			if urls.Success != nil || urls.Failed != nil {
				t.Fatalf("period payment's return URLs %+v", urls)
			}
			e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + pay.ID + "/simulate", key: keys.SecretTest, idem: "sub-sim-1",
				body: `{"outcome":"success"}`}).want(t, 200, "")
			// The next period asks for a new payment.
			e.clock.Advance(32 * 24 * time.Hour)
			if n, err := e.app.RenewDue(ctx, 10); err != nil || n < 1 {
				t.Fatalf("renewed %d %v", n, err)
			}
			var s2 subRecord
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &s2)
			if s2.LatestPaymentID == s.LatestPaymentID || !s2.CurrentPeriodEnd.After(s.CurrentPeriodEnd) {
				t.Fatalf("renewal %+v", s2)
			}
			e.do(call{method: "POST", path: "/v1/subscriptions/" + s.ID + "/cancel-at-period-end", key: keys.SecretTest, idem: "cape"}).want(t, 200, "").data(t, &s2)
			if !s2.CancelAtPeriodEnd || s2.Status != "active" {
				t.Fatalf("cancel at period end %+v", s2)
			}
			// Scheduled again a moment later: the subscription unchanged,
			// its updated_at too (it answered a new one it never stored).
			var first, again, stored struct {
				UpdatedAt string `json:"updated_at"`
			}
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &first)
			e.clock.Advance(time.Second)
			e.do(call{method: "POST", path: "/v1/subscriptions/" + s.ID + "/cancel-at-period-end", key: keys.SecretTest, idem: "cape-2"}).
				want(t, 200, "").data(t, &again)
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &stored)
			if again.UpdatedAt != first.UpdatedAt || stored.UpdatedAt != first.UpdatedAt {
				t.Fatalf("scheduled twice: updated_at %s, then answered %s, stored %s", first.UpdatedAt, again.UpdatedAt, stored.UpdatedAt)
			}
			e.clock.Advance(32 * 24 * time.Hour)
			e.app.RenewDue(ctx, 10)
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s2)
			if s2.Status != "cancelled" {
				t.Fatalf("status %s", s2.Status)
			}
			r := e.do(call{method: "POST", path: "/v1/subscriptions/" + s.ID + "/cancel", key: keys.SecretTest, idem: "c-again"}).want(t, 422, xaalis.ESubscriptionAlreadyInStatus)
			if r.err.Context["status"] != "cancelled" {
				t.Fatalf("context %v", r.err.Context)
			}
			evs := strings.Join(e.events(t, s.ID), ",")
			for _, want := range []string{"subscription.created", "subscription.payment_requested", "subscription.payment_succeeded",
				"subscription.cancel_scheduled", "subscription.cancelled"} {
				if !strings.Contains(evs, want) {
					t.Fatalf("events %s lack %s", evs, want)
				}
			}
		})
		t.Run("OKFailedPeriodsExpire", func(t *testing.T) {
			var s subRecord
			create("sub-2", planID, custID, `,"provider":"channel_b"`).want(t, 201, "").data(t, &s)
			for attempt := 1; attempt <= xaalis.DefaultSubscriptionMaxAttempts; attempt++ {
				e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
				e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + s.LatestPaymentID + "/simulate", key: keys.SecretTest,
					idem: fmt.Sprint("fail-", attempt), body: `{"outcome":"failed"}`}).want(t, 200, "")
				e.clock.Advance(25 * time.Hour)
				e.app.RenewDue(ctx, 10)
			}
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
			if s.Status != "expired" {
				t.Fatalf("after %d failed payments: %+v", xaalis.DefaultSubscriptionMaxAttempts, s)
			}
			r := e.do(call{method: "POST", path: "/v1/subscriptions/" + s.ID + "/cancel-at-period-end", key: keys.SecretTest, idem: "cape-x"}).
				want(t, 422, xaalis.ESubscriptionAlreadyInStatus)
			if r.err.Context["status"] != "expired" {
				t.Fatalf("context %v", r.err.Context)
			}
			var list []subRecord
			e.do(call{method: "GET", path: "/v1/subscriptions?status=expired", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 1 {
				t.Fatalf("expired list %d", len(list))
			}
			// Every failed attempt is told, the last one too, before the end.
			evs := strings.Join(e.events(t, s.ID), ",")
			if strings.Count(evs, "subscription.payment_failed") != xaalis.DefaultSubscriptionMaxAttempts ||
				!strings.HasSuffix(evs, "subscription.payment_failed,subscription.expired") {
				t.Fatalf("events %s", evs)
			}
		})
		// DECISIONS: "expired when its plan's term ends". A plan of two
		// monthly periods bills two, then the subscription expires.
		t.Run("OKTermEnds", func(t *testing.T) {
			var pl struct {
				ID        string
				TermCount *int `json:"term_count"`
			}
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "plan-term",
				body: `{"name":"Two months","amount":3000,"interval":"month","term_count":2}`}).want(t, 201, "").data(t, &pl)
			if pl.TermCount == nil || *pl.TermCount != 2 {
				t.Fatalf("plan term_count %v", pl.TermCount)
			}
			var s subRecord
			create("sub-term", pl.ID, custID, `,"provider":"channel_a"`).want(t, 201, "").data(t, &s)
			payments := map[string]bool{s.LatestPaymentID: true}
			for period := 1; period <= 2; period++ {
				e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
				if s.Status != "active" {
					t.Fatalf("period %d: %+v", period, s)
				}
				payments[s.LatestPaymentID] = true
				e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + s.LatestPaymentID + "/simulate", key: keys.SecretTest,
					idem: fmt.Sprint("term-pay-", period), body: `{"outcome":"success"}`}).want(t, 200, "")
				e.clock.Advance(32 * 24 * time.Hour)
				e.app.RenewDue(ctx, 10)
			}
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
			if s.Status != "expired" || len(payments) != 2 || payments[s.LatestPaymentID] == false {
				t.Fatalf("after the term of 2 periods: %+v, %d payments asked", s, len(payments))
			}
			if evs := strings.Join(e.events(t, s.ID), ","); !strings.HasSuffix(evs, "subscription.expired") {
				t.Fatalf("events %s", evs)
			}
		})
		// A provider may settle a period's payment at once (the magic
		// numbers 0001 and 0002): the subscription follows that outcome
		// as it follows a later one.
		t.Run("OKPaymentSettledAtOnce", func(t *testing.T) {
			customer := func(phone string) string {
				e.pay(t, keys.SecretTest, "cust-"+phone, `"provider":"channel_a","payer":{"phone":"`+phone+`"}`)
				var cs []struct{ ID, Phone string }
				e.do(call{method: "GET", path: "/v1/customers", key: keys.SecretTest}).want(t, 200, "").data(t, &cs)
				for _, c := range cs {
					if c.Phone == phone {
						return c.ID
					}
				}
				t.Fatalf("no customer %s in %+v", phone, cs)
				return ""
			}
			var paid subRecord
			create("sub-now-ok", planID, customer(provider.TestPhoneSuccess), `,"provider":"channel_a"`).want(t, 201, "").data(t, &paid)
			e.do(call{method: "GET", path: "/v1/subscriptions/" + paid.ID, key: keys.SecretTest}).data(t, &paid)
			if paid.Status != "active" || paid.FailedAttempts != 0 {
				t.Fatalf("paid at once: %+v", paid)
			}
			if evs := strings.Join(e.events(t, paid.ID), ","); !strings.Contains(evs, "subscription.payment_succeeded") {
				t.Fatalf("paid at once: events %s", evs)
			}

			var s subRecord
			create("sub-now-ko", planID, customer(provider.TestPhoneFailed), `,"provider":"channel_a"`).want(t, 201, "").data(t, &s)
			seen := map[string]bool{}
			for attempt := 1; attempt <= xaalis.DefaultSubscriptionMaxAttempts; attempt++ {
				e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
				if seen[s.LatestPaymentID] {
					t.Fatalf("attempt %d asked no new payment: %+v", attempt, s)
				}
				seen[s.LatestPaymentID] = true
				want := "active"
				if attempt == xaalis.DefaultSubscriptionMaxAttempts {
					want = "expired"
				}
				if s.Status != want || s.FailedAttempts != attempt {
					t.Fatalf("after failed attempt %d: %+v, want %s", attempt, s, want)
				}
				e.clock.Advance(25 * time.Hour)
				e.app.RenewDue(ctx, 10)
			}
			evs := strings.Join(e.events(t, s.ID), ",")
			if !strings.Contains(evs, "subscription.payment_failed") || !strings.Contains(evs, "subscription.expired") {
				t.Fatalf("failed at once: events %s", evs)
			}
			// A payment already failed is asked of no one: no
			// payment_requested carries it for the merchant to forward.
			if strings.Contains(evs, "subscription.payment_requested") {
				t.Fatalf("a failed payment requested: events %s", evs)
			}
		})
		e.ledgerOK(t)
	})
}

// TestSplitsAcrossProcesses: concurrent split requests on one payment
// through two servers sharing one PostgreSQL database are serialised.
func TestSplitsAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	big := func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 10000, 10000 }
	e1 := newEnv(t, openPostgresURL(t, url), big)
	e2 := newEnv(t, openPostgresURL(t, url), big)
	_, keys := e1.merchant()
	bID, _ := e1.merchant()
	_, p := e1.pay(t, keys.SecretTest, "x-split", `"amount":10000,"provider":"channel_b","payer":{"phone":"+221771234567"}`)
	var ok, over atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := []*env{e1, e2}[i%2].do(call{method: "POST", path: "/v1/payments/" + p.ID + "/splits", key: keys.SecretTest,
				idem: fmt.Sprint("xs-", i), body: fmt.Sprintf(`{"items":[{"beneficiary_merchant_id":"%s","amount":1000}]}`, bID)})
			switch {
			case r.status == 201:
				ok.Add(1)
			case r.err.Code == xaalis.ESplitsExceedTransactionAmount:
				over.Add(1)
			default:
				t.Errorf("%d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 || over.Load() != 10 {
		t.Fatalf("%d splits accepted, %d refused; want 10 and 10", ok.Load(), over.Load())
	}
}

// TestConfiguredRetriesAndResponseWindow: a subscription period's payment
// attempts, the wait between them and a dispute's response window come
// from the configuration.
func TestConfiguredRetriesAndResponseWindow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) {
			cfg := *a.Config
			cfg.SubscriptionMaxAttempts, cfg.SubscriptionRetrySeconds, cfg.DisputeResponseSeconds = 2, 3600, 2*86400
			a.Config = &cfg
		})
		_, keys := e.merchant()
		admin, token := adminEnv(t, e)
		ctx := context.Background()

		// The dispute is due two days after it opens.
		_, p := e.pay(t, keys.SecretTest, "cfg-d", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		// Named by its TXN- reference, as the console may name it.
		st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+p.Reference+`","reason":"not received"}`)
		if st != 201 {
			t.Fatalf("open dispute: %d %v", st, out)
		}
		d := out["data"].(map[string]any)
		created, err1 := time.Parse(time.RFC3339Nano, d["created_at"].(string))
		due, err2 := time.Parse(time.RFC3339Nano, d["due_by"].(string))
		if err1 != nil || err2 != nil || due.Sub(created) != 48*time.Hour {
			t.Fatalf("dispute created %v, due %v (%v %v)", d["created_at"], d["due_by"], err1, err2)
		}

		// Two failed payments a period, an hour apart, then it expires.
		var plan struct{ ID string }
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "cfg-plan",
			body: `{"name":"Box","amount":5000,"interval":"month"}`}).want(t, 201, "").data(t, &plan)
		e.pay(t, keys.SecretTest, "cfg-cust", `"payer":{"phone":"+221771234567"}`)
		var customers []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/customers", key: keys.SecretTest}).want(t, 200, "").data(t, &customers)
		var s subRecord
		e.do(call{method: "POST", path: "/v1/subscriptions", key: keys.SecretTest, idem: "cfg-sub",
			body: `{"plan_id":"` + plan.ID + `","customer_id":"` + customers[0].ID + `","provider":"channel_b"}`}).want(t, 201, "").data(t, &s)
		fail := func(attempt int) {
			t.Helper()
			e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
			e.do(call{method: "POST", path: "/v1/test-helpers/payments/" + s.LatestPaymentID + "/simulate", key: keys.SecretTest,
				idem: fmt.Sprint("cfg-fail-", attempt), body: `{"outcome":"failed"}`}).want(t, 200, "")
		}
		fail(1)
		first := s.LatestPaymentID
		e.clock.Advance(59 * time.Minute)
		e.app.RenewDue(ctx, 10)
		e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
		if s.Status != "active" || s.LatestPaymentID != first {
			t.Fatalf("asked again before the hour: %+v", s)
		}
		e.clock.Advance(2 * time.Minute)
		e.app.RenewDue(ctx, 10)
		fail(2)
		if s.LatestPaymentID == first {
			t.Fatalf("not asked again after the hour: %+v", s)
		}
		e.clock.Advance(61 * time.Minute)
		e.app.RenewDue(ctx, 10)
		e.do(call{method: "GET", path: "/v1/subscriptions/" + s.ID, key: keys.SecretTest}).data(t, &s)
		if s.Status != "expired" {
			t.Fatalf("after 2 failed payments: %+v", s)
		}
	})
}

// TestOperatorNamesAPaymentByAUUIDMerchantRef: a merchant_ref shaped like
// a UUID (an order number) names its payment for the operator, as an id
// in upper case names its own.
func TestOperatorNamesAPaymentByAUUIDMerchantRef(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		admin, token := adminEnv(t, e)
		ref := xaalis.NewUUIDv7()
		_, p := e.pay(t, keys.SecretTest, ref, `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		if p.Status != "success" {
			t.Fatalf("payment %+v", p)
		}
		st, out := operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+ref+`","reason":"not received"}`)
		if st != 201 || out["data"].(map[string]any)["transaction_id"] != p.ID {
			t.Fatalf("open by a UUID merchant_ref: %d %v", st, out)
		}
		// A reference wins over another merchant's merchant_ref written
		// like it.
		_, otherKeys := e.merchant()
		_, r := e.pay(t, keys.SecretTest, "by-ref", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		e.pay(t, otherKeys.SecretTest, r.Reference, "")
		st, out = operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+r.Reference+`","reason":"not received"}`)
		if st != 201 || out["data"].(map[string]any)["transaction_id"] != r.ID {
			t.Fatalf("open by a reference another merchant's merchant_ref shadows: %d %v", st, out)
		}
		_, q := e.pay(t, keys.SecretTest, "uuid-up", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		st, out = operatorDo(t, admin, token, "POST", "/admin/v1/disputes", `{"transaction_id":"`+strings.ToUpper(q.ID)+`","reason":"not received"}`)
		if st != 201 || out["data"].(map[string]any)["transaction_id"] != q.ID {
			t.Fatalf("open by an upper-case id: %d %v", st, out)
		}
	})
}

// planAndCustomer makes a plan (planBody, under idem) and, by a first
// payment from phone through channel_a, the merchant's only customer, for
// a subscription.
func (e *env) planAndCustomer(t *testing.T, key, idem, planBody, phone string) (planID, customerID string) {
	t.Helper()
	var plan struct{ ID string }
	e.do(call{method: "POST", path: "/v1/plans", key: key, idem: idem, body: planBody}).want(t, 201, "").data(t, &plan)
	e.pay(t, key, idem+"-cust", `"provider":"channel_a","payer":{"phone":"`+phone+`"}`)
	var customers []struct{ ID string }
	e.do(call{method: "GET", path: "/v1/customers", key: key}).want(t, 200, "").data(t, &customers)
	if len(customers) != 1 {
		t.Fatalf("%d customers, want 1", len(customers))
	}
	return plan.ID, customers[0].ID
}
