package chaos_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// hookReceiver is a merchant's webhook endpoint that fails one attempt in
// five (500) and counts the events it acknowledged. It fails one event at
// most three times running, so that the scaled retry schedule settles
// every event within seconds (60 ms, 300 ms, 1.8 s).
type hookReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	acked    map[string]int
	fails    map[string]int
	attempts atomic.Int64
	failed   atomic.Int64
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{acked: map[string]int{}, fails: map[string]int{}}
	rng := rand.New(rand.NewPCG(5, 20))
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.attempts.Add(1)
		var ev struct{ ID string }
		if err := json.Unmarshal(b, &ev); err != nil || ev.ID == "" {
			http.Error(w, "no event id", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if rng.IntN(5) == 0 && h.fails[ev.ID] < 3 {
			h.fails[ev.ID]++
			h.failed.Add(1)
			http.Error(w, "flaky", http.StatusInternalServerError)
			return
		}
		h.acked[ev.ID]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// TestProviderFaults runs live traffic through the provider emulator while
// it misbehaves: a route that records then never answers (timeouts), a
// provider answering only 5xx for a while, 2 s of latency, and lost
// callbacks; and a webhook receiver failing one attempt in five. Payments
// still resolve, by failover or by reconciliation; no payout reaches the
// provider twice; every event is acknowledged by the receiver, none twice.
func TestProviderFaults(t *testing.T) {
	needChaos(t)
	for _, name := range []string{"SQLite", "PostgreSQL"} {
		t.Run(name, func(t *testing.T) {
			var b backend
			if name == "SQLite" {
				b = sqliteBackend(t, "")
			} else {
				b = postgresBackend(t)
			}
			faults(t, b)
		})
	}
}

func faults(t *testing.T, b backend) {
	f := newFigures(t, "provider_faults", b.name)
	emu := newEmulator(t, 3*time.Second, 2)
	if _, err := cli(t, "migrate", "--database-url", b.url); err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, b.url, "Faulty shop")
	a := newServer(t, "server", b.url, emu)
	a.start()
	hooks := newHookReceiver(t)
	must(t, "webhook endpoint", send(a.api, "POST", "/v1/webhook-endpoints", m.Keys.SecretLive, uniq("ep"),
		`{"url":"`+hooks.srv.URL+`/hook"}`), 201)
	j := &journal{}
	l := newLoad(t, m, "", merchant{}, emu, j)
	l.fund(a.api, true)
	key := m.Keys.SecretLive

	// The payer confirms every collection a moment after it is made.
	stopPayer := make(chan struct{})
	payerDone := make(chan struct{})
	var acted atomic.Int64
	go func() {
		defer close(payerDone)
		for {
			select {
			case <-stopPayer:
				return
			case <-time.After(300 * time.Millisecond):
			}
			for _, c := range emu.Collections() {
				if c.Status == xaalis.ProviderPending && time.Since(c.Created) > 200*time.Millisecond {
					if _, err := emu.PayerAct(c.ID, xaalis.ProviderSuccess); err == nil {
						acted.Add(1)
					}
				}
			}
		}
	}()

	// Live traffic: payments through channel_a and channel_b, payouts.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for !stop.Load() {
				r := &request{method: "POST", key: key, idem: uniq("k")}
				prov := []string{"channel_a", "channel_b"}[rng.IntN(2)]
				if rng.IntN(3) == 0 {
					r.op, r.path, r.body = "payout", "/v1/payouts", payoutBody(uniq("po"), 500+rng.IntN(1500), prov, phone(rng, ""))
				} else {
					r.op, r.path, r.body = "payment", "/v1/payments", paymentBody(uniq("pay"), 1000+rng.IntN(9000), prov, phone(rng, ""))
				}
				r.first = send(a.api, r.method, r.path, r.key, r.idem, r.body)
				r.final, r.inFlight = r.first, r.first.err != nil
				j.add(r)
				if r.first.status >= 500 {
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	set := func(prov, route string, s provider.RouteSwitches) {
		if err := emu.SetRoute(prov, route, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := emu.SetProvider("channel_b", provider.ProviderSwitches{LoseCallbacks: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	set("channel_a", "direct", provider.RouteSwitches{Timeout: true}) // records, never answers
	time.Sleep(2 * time.Second)
	set("channel_a", "direct", provider.RouteSwitches{})
	set("channel_b", "direct", provider.RouteSwitches{ErrorRate: 1}) // a burst of 5xx: failover
	time.Sleep(2 * time.Second)
	set("channel_b", "direct", provider.RouteSwitches{})
	set("channel_a", "direct", provider.RouteSwitches{LatencyMS: 2000}) // slow, within the 3 s timeout
	set("channel_a", "aggregator", provider.RouteSwitches{LatencyMS: 2000})
	time.Sleep(3 * time.Second)
	set("channel_a", "direct", provider.RouteSwitches{})
	set("channel_a", "aggregator", provider.RouteSwitches{})
	stop.Store(true)
	wg.Wait()

	// Requests the faults refused (503 gateway_unavailable) are retried
	// with their keys: an initiated payment resumes.
	for _, r := range j.all() {
		if !r.settled() {
			r.retry(a.api, time.Now().Add(30*time.Second))
		}
	}
	// Every collection the payer confirmed is a successful payment, by a
	// notification or, for the lost ones, by reconciliation.
	resolveStart := time.Now()
	deadline := time.Now().Add(45 * time.Second)
	var unresolved []string
	for {
		unresolved = unresolved[:0]
		for _, r := range j.all() {
			if r.op != "payment" || r.final.status != 201 || r.key != key {
				continue
			}
			g := send(a.api, "GET", "/v1/payments/"+r.final.id(), key, "", "")
			if g.field("status") != "success" {
				unresolved = append(unresolved, r.final.id()+" "+g.field("status"))
			}
		}
		if len(unresolved) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(stopPayer)
	<-payerDone
	if len(unresolved) > 0 {
		t.Errorf("%d payments never resolved: %v", len(unresolved), unresolved[:min(5, len(unresolved))])
	}

	f.Extra["resolve_seconds"] = time.Since(resolveStart).Round(100 * time.Millisecond).Seconds()
	// Every event reaches the receiver once.
	hooksStart := time.Now()
	v := newVerifier(t, b)
	var pendingHooks string
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		rows := v.rows(`SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded'`)
		pendingHooks = rows[0][0]

		if pendingHooks == "0" || time.Now().After(end) {
			break
		}
	}
	if pendingHooks != "0" {
		t.Errorf("%s webhook deliveries never succeeded", pendingHooks)
	}
	f.Extra["webhooks_settle_seconds"] = time.Since(hooksStart).Round(100 * time.Millisecond).Seconds()
	delivered := v.rows(`SELECT d.event_id FROM webhook_deliveries d`)
	hooks.mu.Lock()
	twice := 0
	for id, n := range hooks.acked {
		if n > 1 {
			twice++
			t.Errorf("event %s acknowledged %d times", id, n)
		}
	}
	for _, r := range delivered {
		if hooks.acked[r[0]] == 0 {
			t.Errorf("event %s never acknowledged", r[0])
		}
	}
	acks := len(hooks.acked)
	hooks.mu.Unlock()
	routes := map[string]int{}
	for _, r := range v.rows(`SELECT type, route || ' (' || route_reason || ')' FROM transactions WHERE mode = 'live'`) {
		routes[r[0]+" via "+r[1]]++
	}
	reconciled := v.rows(`SELECT count(*) FROM transactions WHERE mode = 'live' AND type = 'payment' AND status = 'success' AND reconciled_at IS NOT NULL`)[0][0]
	a.stop()

	checkOutcomes(t, j)
	f.tally(j)
	checkStore(t, b, j, f)
	checkPayoutsSentOnce(t, emu, f)
	f.Extra["payer_confirmed"] = acted.Load()
	f.Extra["resolved_by_reconciliation"] = reconciled
	if reconciled == "0" {
		t.Error("no payment was resolved by reconciliation although channel_b lost its callbacks")
	}
	f.Extra["routes"] = routes
	f.Extra["webhooks"] = map[string]any{"events": len(delivered), "attempts": hooks.attempts.Load(),
		"failed_attempts": hooks.failed.Load(), "acknowledged": acks, "acknowledged_twice": twice}
	f.report()
	if hooks.failed.Load() == 0 {
		t.Error("the receiver never failed: the test proves nothing")
	}
	if !strings.Contains(fmt.Sprint(routes), "aggregator") {
		t.Errorf("no failover happened: %v", routes)
	}
}
