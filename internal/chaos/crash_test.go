package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// crashCycles is how many times each backend's server is killed.
const crashCycles = 20

// TestCrash kills `xaalis serve` with SIGKILL 20 times under mixed load,
// each time with requests in flight, and restarts it on the same
// database. Every request that got no answer is retried with its
// Idempotency-Key and body: on SQLite the restarted server takes the dead
// one's keys over at once (no 409); on PostgreSQL, every other cycle, the
// retry goes to a second server that stayed up, which takes the keys over
// once the dead one's heartbeat is three intervals old. At the end: the
// ledger check is clean, every answered write is there with its event,
// every retried request has exactly one outcome, no payment or payout
// exists twice nor reached the provider twice, and available went below
// zero only through refunds.
func TestCrash(t *testing.T) {
	needChaos(t)
	for _, name := range []string{"SQLite", "PostgreSQL"} {
		t.Run(name, func(t *testing.T) {
			var b backend
			if name == "SQLite" {
				b = sqliteBackend(t, "")
			} else {
				b = postgresBackend(t)
			}
			crash(t, b)
		})
	}
}

func crash(t *testing.T, b backend) {
	f := newFigures(t, "crash", b.name)
	emu := newEmulator(t, 3*time.Second, 60)
	if _, err := cli(t, "migrate", "--database-url", b.url); err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, b.url, "Chaos shop")
	ben := newMerchant(t, b.url, "Chaos seller")
	debtor := newMerchant(t, b.url, "Chaos debtor")
	a := newServer(t, "server A", b.url, emu)
	a.start()
	var second *server
	if b.name == "PostgreSQL" {
		second = newServer(t, "server B", b.url, emu)
		second.start()
	}
	j := &journal{}
	l := newLoad(t, m, ben.ID, debtor, emu, j)
	l.setBase(a.api)
	l.fund(a.api, true)
	rng := rand.New(rand.NewPCG(12, 2026))
	maxTakeover := time.Duration(0)
	for cycle := range crashCycles {
		l.life.Add(1)
		before := len(j.all())
		l.run(4, uint64(cycle))
		time.Sleep(time.Duration(300+rng.IntN(600)) * time.Millisecond)
		// SIGKILL with requests in flight: no new request starts, those
		// under way are cut.
		l.halt()
		a.kill()
		l.wait()
		f.Cycles++
		var unanswered []*request
		for _, r := range j.all()[before:] {
			if !outcome(r.first) {
				unanswered = append(unanswered, r)
			}
		}
		// Where the retries go: the restarted server, or (PostgreSQL, odd
		// cycles) the second server, alive all along.
		target := a
		if second != nil && cycle%2 == 1 {
			target = second
		} else {
			a.start()
		}
		start := time.Now()
		for _, r := range unanswered {
			c := r.retry(target.api, time.Now().Add(30*time.Second))
			f.Conflicts409 += c
			if c > 0 && target == a {
				t.Errorf("cycle %d: the restarted server answered 409 %d times for %s: it must take its dead predecessor's keys over at once", cycle, c, r.idem)
			}
		}
		if target == second && len(unanswered) > 0 {
			maxTakeover = max(maxTakeover, time.Since(start))
			a.start()
		}
		t.Logf("cycle %d: %d requests, %d unanswered retried on %s", cycle, len(j.all())-before, len(unanswered), target.name)
	}
	// Quiet: the last answers, then a graceful stop.
	l.life.Add(1)
	l.run(2, 999)
	time.Sleep(300 * time.Millisecond)
	l.pause()
	for _, r := range j.all() {
		if !r.settled() {
			r.retry(a.api, time.Now().Add(30*time.Second))
		}
	}
	a.stop()
	if second != nil {
		second.stop()
	}
	checkOutcomes(t, j)
	f.tally(j)
	checkStore(t, b, j, f)
	checkPayoutsSentOnce(t, emu, f)
	if second != nil {
		f.Extra["max_takeover_by_second_server"] = fmt.Sprint(maxTakeover.Round(10 * time.Millisecond))
	}
	f.report()
	if f.Unanswered == 0 {
		t.Error("no request was in flight at any kill: the test proves nothing")
	}
}
