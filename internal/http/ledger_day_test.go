package http_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestLedgerDay replays a day of mixed activity — payments that succeed,
// fail, wait and expire, refunds, payouts, payout requests and their
// operator moves, refused requests — on both backends, and after every
// step checks that every entry sums to zero, every cached balance equals
// its postings, no reserved balance is negative, and available goes below
// zero only through refunds (a debt, which payouts never deepen).
func TestLedgerDay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		ctx := context.Background()
		// The walk is the seed's: a change of behaviour that moves it (a
		// late payer success now succeeds an expired payment) may need
		// another seed for the day to cover every kind (checked at its end).
		rng := rand.New(rand.NewPCG(2026, 12))
		type merchant struct {
			p        *xaalis.Principal
			paid     []string // successful payment ids
			paidA    []string // of which channel_a's (automatic refunds)
			pending  []string
			requests []string
			avail    int64 // available after the last step
		}
		var ms []*merchant
		for range 3 {
			_, keys := e.merchant()
			ms = append(ms, &merchant{p: e.principal(keys.SecretTest)})
		}
		phones := []string{provider.TestPhoneSuccess, provider.TestPhoneFailed, provider.TestPhoneCancelled,
			provider.TestPhoneNoPayer, "+221771234567", "+221771234568"}
		counts := map[string]int{}
		for step := range 300 {
			m := ms[rng.IntN(len(ms))]
			var op string
			var err error
			switch k := rng.IntN(10); {
			case k < 4:
				op = "payment"
				prov := []string{"channel_a", "channel_b", "channel_c"}[rng.IntN(3)]
				var tx *xaalis.Transaction
				tx, err = e.app.CreatePayment(ctx, m.p, "", xaalis.PaymentInput{
					MerchantRef: text(fmt.Sprint("day-", step)), Amount: amount(500 + rng.IntN(20000)), Provider: text(prov),
					PayerPhone: text(phones[rng.IntN(len(phones))]), SuccessURL: text("https://s.example/ok"), FailedURL: text("https://s.example/ko"),
					ExpiresIn: func() *int64 { v := int64(600); return &v }(),
				})
				if err == nil && tx.Status == xaalis.StatusSuccess {
					m.paid = append(m.paid, tx.ID)
					if prov == "channel_a" {
						m.paidA = append(m.paidA, tx.ID)
					}
				} else if err == nil && tx.Status == xaalis.StatusPending {
					m.pending = append(m.pending, tx.ID)
				}
			case k < 5 && len(m.pending) > 0:
				op = "payer acts"
				i := rng.IntN(len(m.pending))
				id := m.pending[i]
				m.pending = append(m.pending[:i], m.pending[i+1:]...)
				var tx *xaalis.Transaction
				tx, err = e.app.Simulate(ctx, m.p, id, []string{"success", "failed", "cancelled"}[rng.IntN(3)])
				if err == nil && tx.Status == xaalis.StatusSuccess {
					m.paid = append(m.paid, tx.ID)
				}
			case k < 6 && len(m.paid) > 0:
				op = "refund"
				from := m.paid
				if len(m.paidA) > 0 && rng.IntN(4) > 0 {
					from = m.paidA
				}
				_, err = e.app.CreateRefund(ctx, m.p, fmt.Sprint("rf-", step), xaalis.RefundInput{
					TransactionID: text(from[rng.IntN(len(from))]), Amount: amount(100 + rng.IntN(12000))})
			case k < 8:
				op = "payout"
				prov := []string{"channel_a", "channel_b"}[rng.IntN(2)]
				_, err = e.app.CreatePayout(ctx, m.p, fmt.Sprint("po-", step), xaalis.PayoutInput{
					MerchantRef: text(fmt.Sprint("po-", step)), Amount: amount(200 + rng.IntN(5000)), Provider: text(prov),
					Recipient: &struct {
						Phone *string `json:"phone"`
						Name  *string `json:"name"`
					}{Phone: text(phones[rng.IntN(len(phones))])}})
			case k < 9:
				op = "payout request"
				var pr *xaalis.PayoutRequest
				pr, err = e.app.SubmitPayoutRequest(ctx, m.p, xaalis.PayoutRequestInput{Amount: amount(1000 + rng.IntN(10000)),
					DestinationPhone: text("+221771112233")})
				if err == nil {
					m.requests = append(m.requests, pr.ID)
				}
			default:
				op = "operator"
				if len(m.requests) == 0 {
					e.clock.Advance(7 * time.Minute) // and let payments expire
					_, err = e.app.ExpireDue(ctx, 100)
					break
				}
				id := m.requests[rng.IntN(len(m.requests))]
				action := []xaalis.PayoutRequestAction{xaalis.ActionApprove, xaalis.ActionReject, xaalis.ActionComplete, xaalis.ActionFail}[rng.IntN(4)]
				_, err = e.app.MovePayoutRequest(ctx, id, action, "day test")
			}
			code := xaalis.ErrorCode(err)
			if err != nil && code == xaalis.EInternal {
				t.Fatalf("step %d (%s): %v", step, op, err)
			}
			counts[op+" "+string(code)]++
			if ps, err := e.app.LedgerCheck(ctx); err != nil || len(ps) > 0 {
				t.Fatalf("step %d (%s): ledger check: %v %v", step, op, ps, err)
			}
			for _, mm := range ms {
				bal, err := e.app.Balance(ctx, mm.p)
				if err != nil {
					t.Fatal(err)
				}
				if bal.Reserved.Minor < 0 || bal.Pending.Minor < 0 {
					t.Fatalf("step %d (%s): negative balance %+v", step, op, bal)
				}
				// Available goes below zero, or further below, only by a
				// refund of this merchant's: payouts and payout requests
				// never drive it there.
				if a := bal.Available.Minor; a < 0 && a < mm.avail && (op != "refund" || mm != m) {
					t.Fatalf("step %d (%s): available went from %d to %d", step, op, mm.avail, a)
				}
				if bal.Available.Minor < 0 {
					counts["debt"]++
				}
				mm.avail = bal.Available.Minor
			}
		}
		// The day covered what it must: successes and refusals of each kind.
		for _, must := range []string{"payment ", "payer acts ", "refund ", "payout ", "payout request ", "operator ",
			"payout insufficient_balance", "refund refund_exceeds_refundable", "debt"} {
			if counts[must] == 0 {
				t.Errorf("the day had no %q: %v", must, counts)
			}
		}
		t.Logf("%v", counts)
	})
}
