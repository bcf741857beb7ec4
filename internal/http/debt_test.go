package http_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestRefundDebt is the case: a 5 000 XOF payment through
// channel_a credits 4 950 (the provider keeps 50); refunds of 2 000 and
// 3 000 both succeed, and the 50 the merchant lacks is a debt shown as a
// negative available. Payouts and payout requests wait until available
// covers them; the next payment repays the debt first.
func TestRefundDebt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		key := keys.SecretTest
		_, pay := e.pay(t, key, "debt-1", `"amount":5000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		if pay.Status != "success" || e.balance(t, key).Available != 4950 {
			t.Fatalf("payment %s, balance %+v", pay.Status, e.balance(t, key))
		}
		refund := func(idem string, amount int) *response {
			return e.do(call{method: "POST", path: "/v1/refunds", key: key, idem: idem,
				body: fmt.Sprintf(`{"transaction_id":"%s","amount":%d,"reason":"returned"}`, pay.ID, amount)})
		}
		refund("debt-r1", 2000).want(t, 201, "")
		refund("debt-r2", 3000).want(t, 201, "")
		bal := e.balance(t, key)
		if bal.Available != -50 || bal.Reserved != 0 || bal.Accounting != -50 {
			t.Fatalf("after two refunds: %+v", bal)
		}
		if got := e.status(t, key, pay.ID); got != "refunded" {
			t.Fatalf("payment %s", got)
		}
		refund("debt-r3", 1).want(t, 422, xaalis.ETransactionAlreadyFullyRefunded)

		// No payout or withdrawal while available is below its cost.
		r := e.do(call{method: "POST", path: "/v1/payouts", key: key, idem: "debt-po",
			body: payoutBody("debt-po", 100, "channel_a", "+221771112233")}).want(t, 422, xaalis.EInsufficientBalance)
		if r.err.Context["available"] != float64(-50) || r.err.Context["required"] != float64(101) {
			t.Fatalf("context %v", r.err.Context)
		}
		e.do(call{method: "POST", path: "/v1/payout-requests", key: key, idem: "debt-pr",
			body: `{"amount":1000,"currency":"XOF","destination_phone":"+221771112233"}`}).want(t, 422, xaalis.EInsufficientBalance)

		// The next payment repays the debt first: 990 credited, 940 left.
		e.fund(t, key, 1, 1000)
		if bal := e.balance(t, key); bal.Available != 940 {
			t.Fatalf("after the next payment: %+v", bal)
		}
		e.do(call{method: "POST", path: "/v1/payouts", key: key, idem: "debt-po-2",
			body: payoutBody("debt-po-2", 900, "channel_a", "+221771112233")}).want(t, 201, "")
		if bal := e.balance(t, key); bal.Available != 31 {
			t.Fatalf("after the payout: %+v", bal)
		}
		e.ledgerOK(t)
	})
}

// TestRefundConcurrency: concurrent refunds of one payment are cut short
// by its refundable amount, never by the balance: of twenty refunds of
// 3 000 on a 10 000 payment whose money was paid out, exactly three
// succeed, on one server or (PostgreSQL) two sharing the database.
func TestRefundConcurrency(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s1, s2 := openShared(t, b)
		big := func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 10000, 10000 }
		e1 := newEnv(t, s1, big)
		envs := []*env{e1}
		if b.name == "PostgreSQL" {
			envs = append(envs, newEnv(t, s2, big))
		}
		_, keys := e1.merchant()
		key := keys.SecretTest
		_, pay := e1.pay(t, key, "rc-1", `"amount":10000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"}`)
		// 9 900 credited; a payout of 9 000 (fee 90) leaves 810.
		e1.do(call{method: "POST", path: "/v1/payouts", key: key, idem: "rc-po", body: payoutBody("rc-po", 9000, "channel_a", "+221771112233")}).
			want(t, 201, "")
		if bal := e1.balance(t, key); bal.Available != 810 {
			t.Fatalf("before: %+v", bal)
		}
		var ok, over atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := envs[i%len(envs)].do(call{method: "POST", path: "/v1/refunds", key: key, idem: fmt.Sprint("rc-", i),
					body: `{"transaction_id":"` + pay.ID + `","amount":3000}`})
				switch {
				case r.status == 201:
					ok.Add(1)
				case r.status == 422 && r.err.Code == xaalis.ERefundExceedsRefundable:
					over.Add(1)
				default:
					t.Errorf("refund %d: %d %s", i, r.status, r.body)
				}
			}()
		}
		close(start)
		wg.Wait()
		if ok.Load() != 3 || over.Load() != 17 {
			t.Fatalf("%d refunds succeeded, %d exceeded; want 3 and 17", ok.Load(), over.Load())
		}
		// 810 − 9 000: the merchant owes 8 190.
		if bal := e1.balance(t, key); bal.Available != -8190 || bal.Reserved != 0 {
			t.Fatalf("after: %+v", bal)
		}
		e1.ledgerOK(t)
	})
}
