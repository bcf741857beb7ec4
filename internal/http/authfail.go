package http

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Failed-auth throttling: repeated invalid API keys (or operator tokens)
// from one client address are slowed, then answered 429 too_many_requests
// with Retry-After until their window ends. The count is kept in the
// database (App.CountAuthFailure), so it holds across processes; a valid
// key is served whatever its address's count (see internal/xaalis).

// countsAsAuthFailure reports whether an authentication error is a wrong
// credential: an unknown, revoked, expired or malformed key. A valid key
// from outside its allowlist, or a test key on a live-only installation,
// is the client's configuration, not a guess.
func countsAsAuthFailure(err error) bool {
	var e *xaalis.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code == xaalis.EInvalidAPIKey || e.Code == xaalis.EUnauthorized
}

// authFailed counts a failed authentication from the request's client
// address and returns the answer to give: the 401 itself (after a delay
// once the address has failed SlowAfter times in the window), or 429 with
// Retry-After past the limit.
func (s *Server) authFailed(r *http.Request, failure error) error {
	cfg := s.Config
	ip := clientIP(r)
	if cfg.AuthFailureLimit <= 0 || !ip.IsValid() || !countsAsAuthFailure(failure) {
		return failure
	}
	const msg = "Too many invalid API keys from this address; retry after Retry-After seconds with a valid key."
	key := addressKey(ip)
	now := s.App.Now()
	if until, ok := s.authBlocked.blocked(key, now); ok {
		return tooManyRequests(until.Sub(now), msg)
	}
	n, end, err := s.App.CountAuthFailure(r.Context(), ip, cfg.AuthFailureWindow)
	if err != nil {
		// The database is in trouble: say what was wrong with the key, and
		// let the next attempt count.
		logger(r.Context()).Error("count failed authentication", "request_id", requestID(r.Context()), "error", err)
		return failure
	}
	if n > cfg.AuthFailureLimit {
		if s.authBlocked.block(key, end) {
			logger(r.Context()).Warn("invalid API keys: address throttled", "remote_ip", ip.String(),
				"failures", n, "until", end.UTC().Format(time.RFC3339))
		}
		return tooManyRequests(end.Sub(now), msg)
	}
	if over := n - cfg.AuthFailureSlowAfter; over > 0 && cfg.AuthFailureDelay > 0 {
		d := min(time.Duration(over)*cfg.AuthFailureDelay, cfg.AuthFailureMaxDelay)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	return failure
}

// blockList remembers, per process, the addresses past the failed-auth
// limit until their window ends, so that their further failures cost
// neither a database write nor a read.
type blockList struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// blocked reports whether key is blocked at now, and until when.
func (b *blockList) blocked(key string, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.m[key]
	if ok && !now.Before(until) {
		delete(b.m, key)
		return time.Time{}, false
	}
	return until, ok
}

// block blocks key until a time; it reports whether the key was not
// blocked already.
func (b *blockList) block(key string, until time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]time.Time{}
	}
	if _, ok := b.m[key]; ok {
		return false
	}
	if len(b.m) >= 100_000 {
		// Forget the blocks that ended; a process under a wider attack
		// than that falls back on the database's count.
		now := time.Now()
		for k, v := range b.m {
			if !now.Before(v) {
				delete(b.m, k)
			}
		}
		if len(b.m) >= 100_000 {
			return true
		}
	}
	b.m[key] = until
	return true
}
