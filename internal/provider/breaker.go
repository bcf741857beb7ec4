package provider

import (
	"sync"
	"time"
)

// Breaker states, as RouteHealth reports them.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// breaker is the circuit breaker of one route: closed; open after
// threshold consecutive failures; half_open once cooldown passed, letting
// one trial request through; the trial's success closes it and its
// failure opens it again.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	state    string
	failures int
	openedAt time.Time
	trial    bool // a half_open trial request is in flight
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, state: BreakerClosed}
}

// advance moves an open breaker whose cooldown passed to half_open.
func (b *breaker) advance(now time.Time) {
	if b.state == BreakerOpen && !now.Before(b.openedAt.Add(b.cooldown)) {
		b.state = BreakerHalfOpen
		b.trial = false
	}
}

// allow reports whether a request may go through the route now; in
// half_open it lets exactly one trial through until its outcome is known.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		if b.trial {
			return false
		}
		b.trial = true
		return true
	}
	return false
}

// success records a request the route answered (a business refusal too).
func (b *breaker) success() (closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.state
	b.state, b.failures, b.trial = BreakerClosed, 0, false
	return was != BreakerClosed
}

// failure records a request the route did not answer; it reports whether
// the breaker opened.
func (b *breaker) failure(now time.Time) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.state == BreakerHalfOpen || (b.state == BreakerClosed && b.failures >= b.threshold) {
		b.state, b.openedAt, b.trial = BreakerOpen, now, false
		return true
	}
	return false
}

// release ends a request whose outcome says nothing about the route (the
// caller gave up): a half_open trial slot is freed.
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
}

// snapshot returns the state and, when open, how long until half_open.
func (b *breaker) snapshot(now time.Time) (string, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	if b.state == BreakerOpen {
		return b.state, b.openedAt.Add(b.cooldown).Sub(now)
	}
	return b.state, 0
}
