package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// load is the mixed traffic of a merchant: payments (test mode, settled
// at once or pending), the payer's simulate, refunds, splits, payout
// requests, payouts (test mode and live, through the emulator) and live
// payments. Workers send until paused; a request the server never
// answered is kept for retry.
type load struct {
	t   *testing.T
	m   merchant
	ben string // beneficiary merchant of splits
	// debtor collects, pays nearly all of it out, then refunds the payment
	// in full: its available goes below zero (the provider kept its fee),
	// and its next payment repays the debt.
	debtor merchant
	emu    *emulator
	j      *journal
	base   atomic.Pointer[string]
	// life counts server lifetimes: the test-mode simulators keep their
	// payments in memory, so simulate and refunds name only payments of
	// the running server.
	life atomic.Int64

	mu      sync.Mutex
	prTimes []time.Time // payout requests sent: at most 8 a minute (the throttle is 10)
	success []paid      // test channel_a payments that succeeded
	pending []paid      // test channel_b payments pending
	stop    atomic.Bool
	wg      sync.WaitGroup
	live    bool // live payouts and payments too
}

type paid struct {
	id     string
	amount int
	life   int64
}

func newLoad(t *testing.T, m merchant, ben string, debtor merchant, emu *emulator, j *journal) *load {
	return &load{t: t, m: m, ben: ben, debtor: debtor, emu: emu, j: j, live: emu != nil}
}

func (l *load) setBase(u string) { l.base.Store(&u) }

// run starts n workers.
func (l *load) run(n int, seed uint64) {
	l.stop.Store(false)
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for !l.stop.Load() {
				l.one(rng)
			}
		}()
	}
}

// pause stops the workers and waits for their requests to end.
func (l *load) pause() {
	l.halt()
	l.wait()
}

// halt stops the workers from starting requests; those in flight go on.
func (l *load) halt() { l.stop.Store(true) }

// wait waits for the requests in flight.
func (l *load) wait() { l.wg.Wait() }

// fund makes the merchant's test and live balances: payments that settle
// at once (test) and payments the emulator's payer confirms (live).
func (l *load) fund(base string, live bool) {
	t := l.t
	rng := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		ref := uniq("fund")
		r := &request{op: "payment", method: "POST", path: "/v1/payments", key: l.m.Keys.SecretTest, idem: ref,
			body: paymentBody(ref, 400000, "channel_a", phone(rng, "0001"))}
		r.first = must(t, "fund", send(base, r.method, r.path, r.key, r.idem, r.body), 201)
		r.final = r.first
		l.j.add(r)
	}
	if !live {
		return
	}
	for range 3 {
		ref := uniq("fund-live")
		r := &request{op: "payment", method: "POST", path: "/v1/payments", key: l.m.Keys.SecretLive, idem: ref,
			body: paymentBody(ref, 600000, "channel_a", phone(rng, ""))}
		r.first = must(t, "fund live", send(base, r.method, r.path, r.key, r.idem, r.body), 201)
		r.final = r.first
		l.j.add(r)
		reference := r.first.field("reference")
		for _, c := range l.emu.Collections() {
			if c.Reference == reference {
				if _, err := l.emu.PayerAct(c.ID, xaalis.ProviderSuccess); err != nil {
					t.Fatal(err)
				}
			}
		}
		id := r.first.id()
		deadline := time.Now().Add(20 * time.Second)
		for {
			a := send(base, "GET", "/v1/payments/"+id, l.m.Keys.SecretLive, "", "")
			if a.field("status") == "success" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("live funding payment %s never succeeded: %s", id, a.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// one sends one request of a kind drawn at random.
func (l *load) one(rng *rand.Rand) {
	base := *l.base.Load()
	life := l.life.Load()
	key := l.m.Keys.SecretTest
	r := &request{method: "POST", cycle: int(life)}
	pick := func(list *[]paid, remove bool) (paid, bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		var mine []int
		for i, p := range *list {
			if p.life == life {
				mine = append(mine, i)
			}
		}
		if len(mine) == 0 {
			return paid{}, false
		}
		i := mine[rng.IntN(len(mine))]
		p := (*list)[i]
		if remove {
			*list = append((*list)[:i], (*list)[i+1:]...)
		}
		return p, true
	}
	k := rng.IntN(100)
	if k < 6 {
		l.debtChain(rng, base, life)
		return
	}
	switch {
	case k < 10:
		if p, ok := pick(&l.pending, true); ok {
			r.op, r.path, r.body = "simulate", "/v1/test-helpers/payments/"+p.id+"/simulate", `{"outcome":"success"}`
			break
		}
		fallthrough
	case k < 32:
		ref := uniq("pay")
		r.op, r.path, r.body = "payment", "/v1/payments", paymentBody(ref, 1000+rng.IntN(20000), "channel_a", phone(rng, "0001"))
	case k < 42:
		ref := uniq("pend")
		r.op, r.path, r.body = "payment", "/v1/payments", paymentBody(ref, 1000+rng.IntN(5000), "channel_b", phone(rng, ""))
	case k < 52:
		p, ok := pick(&l.success, false)
		if !ok {
			return
		}
		r.op, r.path = "refund", "/v1/refunds"
		r.body = fmt.Sprintf(`{"transaction_id":"%s","amount":%d,"reason":"chaos"}`, p.id, 100+rng.IntN(max(1, p.amount/2)))
	case k < 60:
		p, ok := pick(&l.success, false)
		if !ok {
			return
		}
		r.op, r.path = "split", "/v1/payments/"+p.id+"/splits"
		r.body = fmt.Sprintf(`{"items":[{"beneficiary_merchant_id":"%s","amount":%d,"description":"seller"}]}`, l.ben, 100+rng.IntN(max(1, p.amount/10)))
	case k < 67 && l.payoutRequestAllowed():
		r.op, r.path = "payout_request", "/v1/payout-requests"
		r.body = fmt.Sprintf(`{"amount":%d,"currency":"XOF","destination_phone":"+221771112233","merchant_note":"chaos"}`, 1000+rng.IntN(2000))
	case k < 77 || !l.live:
		ref := uniq("po")
		r.op, r.path, r.body = "payout", "/v1/payouts", payoutBody(ref, 500+rng.IntN(1500), "channel_a", phone(rng, "0001"))
	case k < 90:
		ref := uniq("po-live")
		prov := []string{"channel_a", "channel_b"}[rng.IntN(2)]
		r.op, r.path, r.body, key = "payout", "/v1/payouts", payoutBody(ref, 500+rng.IntN(1500), prov, phone(rng, "")), l.m.Keys.SecretLive
	default:
		ref := uniq("pay-live")
		r.op, r.path, r.body, key = "payment", "/v1/payments", paymentBody(ref, 1000+rng.IntN(5000), "channel_a", phone(rng, "")), l.m.Keys.SecretLive
	}
	r.key, r.idem = key, uniq("k")
	a := send(base, r.method, r.path, r.key, r.idem, r.body)
	r.first, r.final = a, a
	r.inFlight = a.err != nil
	l.j.add(r)
	if a.status == 503 {
		time.Sleep(200 * time.Millisecond) // as a client honouring Retry-After would, roughly
	}
	if a.status == 201 && r.op == "payment" && key == l.m.Keys.SecretTest {
		amount := 0
		fmt.Sscanf(strings.TrimSuffix(a.field("amount"), ".00"), "%d", &amount)
		l.mu.Lock()
		switch {
		case a.field("status") == "success" && strings.Contains(r.body, `"channel_a"`):
			l.success = append(l.success, paid{a.id(), amount, life})
		case a.field("status") == "pending":
			l.pending = append(l.pending, paid{a.id(), amount, life})
		}
		l.mu.Unlock()
	}
}

// debtChain: the debtor collects 5 000 (4 950 credited), pays 4 900 out
// (4 949 with the fee), and refunds the 5 000: available ends at −4 999
// plus whatever it held, a debt its next payment repays.
func (l *load) debtChain(rng *rand.Rand, base string, life int64) {
	key := l.debtor.Keys.SecretTest
	do := func(op, path, body string) answer {
		r := &request{op: op, method: "POST", path: path, key: key, idem: uniq("d"), body: body, cycle: int(life)}
		r.first = send(base, r.method, r.path, r.key, r.idem, r.body)
		r.final, r.inFlight = r.first, r.first.err != nil
		l.j.add(r)
		return r.first
	}
	pay := do("payment", "/v1/payments", paymentBody(uniq("debt-pay"), 5000, "channel_a", phone(rng, "0001")))
	if pay.status != 201 || l.stop.Load() {
		return
	}
	do("payout", "/v1/payouts", payoutBody(uniq("debt-po"), 4900, "channel_a", phone(rng, "0001")))
	if l.stop.Load() {
		return
	}
	do("refund", "/v1/refunds", `{"transaction_id":"`+pay.id()+`","amount":5000,"reason":"returned"}`)
}

// payoutRequestAllowed keeps the load's payout requests under their
// throttle (10 a minute per merchant), so that a retried one is refused
// only for what it asks, never for the rate.
func (l *load) payoutRequestAllowed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	recent := l.prTimes[:0]
	for _, at := range l.prTimes {
		if now.Sub(at) < time.Minute {
			recent = append(recent, at)
		}
	}
	l.prTimes = recent
	if len(recent) >= 8 {
		return false
	}
	l.prTimes = append(l.prTimes, now)
	return true
}
