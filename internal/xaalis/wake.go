package xaalis

import "sync"

// Wakeup names background work that a commit made due, so that the loop
// doing it starts now instead of at its next poll.
type Wakeup uint8

// Kinds of background work.
const (
	// WakeDeliveries: webhook deliveries were queued.
	//
	// The job runner has no kind: none of its work comes due at a commit.
	// A payment expires at its expires_at, a payout or refund is asked
	// about again DispatchAfter after its last provider call, a dispute
	// is lost at its deadline, a subscription renews at its period's end,
	// so it runs on its --jobs-interval.
	WakeDeliveries Wakeup = 1 << iota
)

// Signals fans wake-ups out to the loops of this process. The zero value is
// ready. A signal sent while nobody waits is kept (one per kind), so a
// loop busy when it came runs once more.
type Signals struct {
	mu   sync.Mutex
	subs map[Wakeup][]chan struct{}
}

// Subscribe returns a channel that receives after each Notify of a kind in
// w; bursts collapse into one receive.
func (s *Signals) Subscribe(w Wakeup) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[Wakeup][]chan struct{}{}
	}
	c := make(chan struct{}, 1)
	for k := Wakeup(1); k != 0 && k <= w; k <<= 1 {
		if w&k != 0 {
			s.subs[k] = append(s.subs[k], c)
		}
	}
	return c
}

// Notify wakes the subscribers of every kind in w.
func (s *Signals) Notify(w Wakeup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cs := range s.subs {
		if w&k == 0 {
			continue
		}
		for _, c := range cs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// StoreStats are a store's running counters, for the benchmarks and the
// metrics: SQL statements sent, write transactions committed, the commands
// (Store.Update calls) they held, and the commands that a batch which
// rolled back sent to run again alone (PostgreSQL's group commit; SQLite's
// batches roll a failing command back alone and rerun nothing).
type StoreStats struct {
	Statements   int64
	Transactions int64
	Commands     int64
	Reruns       int64
}

// StatsReporter is a store that counts (both stores do).
type StatsReporter interface {
	Stats() StoreStats
}
