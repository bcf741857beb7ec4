package http_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestPayoutRequestIBAN: a withdrawal to an IBAN whose check digits,
// country or length are wrong answers 422 naming destination_iban, and
// reserves nothing; a real one (spaces dropped) is submitted.
func TestPayoutRequestIBAN(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		key := keys.SecretTest
		e.fund(t, key, 1, 10000)
		before := e.balance(t, key)
		submit := func(i int, iban string) *response {
			return e.do(call{method: "POST", path: "/v1/payout-requests", key: key, idem: fmt.Sprint("iban-", i),
				body: fmt.Sprintf(`{"amount":1000,"destination_iban":%q}`, iban), invalid: true})
		}
		for i, iban := range []string{"ZZ12ABCDEFGHIJKL", "SN00AAAAAAAAAAAAAAAAAAAAAAAA", "FR7630006000011234567890188", "SN08SN010015200004850000303"} {
			r := submit(i, iban).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["destination_iban"]) == 0 {
				t.Fatalf("%s: %s", iban, r.body)
			}
		}
		if after := e.balance(t, key); after.Available != before.Available {
			t.Fatalf("refused withdrawals moved the balance: %+v, then %+v", before, after)
		}
		submit(10, "SN08 SN01 0015 2000 0485 0000 3035").want(t, 201, "")
	})
}

// TestScheduledLedgerCheckClaimedOnce: of the processes that find the
// periodic ledger check due at once, one claims it; none again within the
// interval, one again after it.
func TestScheduledLedgerCheckClaimedOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		e := newEnv(t, s)
		other := xaalis.NewApp(s)
		other.Now = e.app.Now // a second process on the same database
		ctx := context.Background()
		var wins atomic.Int32
		var wg sync.WaitGroup
		for _, a := range []*xaalis.App{e.app, other, e.app, other} {
			wg.Go(func() {
				ok, err := a.ClaimScheduledLedgerCheck(ctx, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d processes claimed the check, want 1", wins.Load())
		}
		// A claim holds for LedgerCheckClaim: the claimer's check may have
		// failed, or its process stopped; the record of a check that ran
		// is what keeps it from being due (LedgerCheckDue).
		e.clock.Advance(xaalis.LedgerCheckClaim - time.Minute)
		if ok, err := other.ClaimScheduledLedgerCheck(ctx, time.Hour); ok || err != nil {
			t.Fatalf("claimed again within the claim: %v %v", ok, err)
		}
		e.clock.Advance(2 * time.Minute)
		if ok, err := other.ClaimScheduledLedgerCheck(ctx, time.Hour); !ok || err != nil {
			t.Fatalf("not claimed after the claim ended: %v %v", ok, err)
		}
		// With an interval shorter than the claim, the interval bounds it.
		e.clock.Advance(2 * time.Minute)
		if ok, err := e.app.ClaimScheduledLedgerCheck(ctx, time.Minute); !ok || err != nil {
			t.Fatalf("not claimed after a one-minute interval: %v %v", ok, err)
		}
	})
}

// TestAdminMerchantUpdate: the operator API approves KYC and changes a
// merchant's status, as `xaalis merchant update` and the console do.
func TestAdminMerchantUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		admin, token := adminEnv(t, e)
		st, out := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+mid, `{"kyc":"approved","allow_ips":["203.0.113.0/24"]}`)
		if st != 200 {
			t.Fatalf("approve KYC: %d %v", st, out)
		}
		data := out["data"].(map[string]any)
		if data["kyc"] != "approved" || data["status"] != "active" || fmt.Sprint(data["allow_ips"]) != "[203.0.113.0/24]" {
			t.Fatalf("after the update: %v", data)
		}
		if m, err := e.app.Store.Merchant(context.Background(), mid); err != nil || m.KYC != xaalis.KYCApproved {
			t.Fatalf("stored: %+v %v", m, err)
		}
		if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+mid, `{"allow_ips":[],"allowed_providers":["channel_a","channel_a"]}`); st != 200 ||
			fmt.Sprint(out["data"].(map[string]any)["allow_ips"]) != "[]" || fmt.Sprint(out["data"].(map[string]any)["allowed_providers"]) != "[channel_a]" {
			t.Fatalf("clear the allowlist, one provider twice: %d %v", st, out)
		}
		// Nothing to change: no audit entry.
		entries := func() int {
			list, _, err := e.app.AuditLog(context.Background(), xaalis.PageRequest{Page: 1, PerPage: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(list)
		}
		n := entries()
		if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+mid, `{}`); st != 200 || entries() != n {
			t.Fatalf("an empty update: %d, %d audit entries after %d", st, entries(), n)
		}
		if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+mid, `{"status":"suspended"}`); st != 200 {
			t.Fatalf("suspend: %d %v", st, out)
		}
		r, _ := e.pay(t, keys.SecretTest, "adm-m-1", "")
		r.want(t, 422, xaalis.EMerchantInactive)
		if st, out := operatorDo(t, admin, token, "GET", "/admin/v1/merchants/"+mid, ""); st != 200 || out["data"].(map[string]any)["status"] != "suspended" {
			t.Fatalf("get: %d %v", st, out)
		}
		for _, c := range []struct {
			body string
			want int
		}{
			{`{"kyc":"maybe"}`, 422}, {`{"status":"gone"}`, 422}, {`{"allow_ips":["not an address"]}`, 422}, {`{"name":"   "}`, 422},
			{`{"return_hosts":["https://x.example/"]}`, 422},
		} {
			if st, out := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+mid, c.body); st != c.want {
				t.Errorf("%s: %d %v", c.body, st, out)
			}
		}
		if st, _ := operatorDo(t, admin, token, "POST", "/admin/v1/merchants/"+xaalis.NewUUIDv7(), `{"kyc":"approved"}`); st != 404 {
			t.Errorf("an unknown merchant: %d", st)
		}
		if st, _ := operatorDo(t, admin, "xop_wrong", "POST", "/admin/v1/merchants/"+mid, `{"kyc":"approved"}`); st != 401 {
			t.Errorf("without a token: %d", st)
		}
	})
}
