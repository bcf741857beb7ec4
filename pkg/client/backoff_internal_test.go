package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBackoffBounds: the waits between retries stay within WithBackoff's
// bounds: each between its retry's backoff (the first, doubling) and twice
// that, none longer than the longest; and they are jittered, the first
// too.
func TestBackoffBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"service_unavailable","message":"down"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	const lo, hi = 500 * time.Millisecond, 2 * time.Second
	firsts := map[time.Duration]bool{}
	defer func() {
		if len(firsts) < 2 {
			t.Errorf("the first retry always waited %v: not jittered", firsts)
		}
	}()
	for range 20 {
		var waits []time.Duration
		c := New("sk_test_x", WithBaseURL(srv.URL), WithBackoff(lo, hi), WithMaxRetries(4))
		c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
		if _, err := c.Balance.Get(context.Background()); err == nil {
			t.Fatal("no error")
		}
		if len(waits) != 4 {
			t.Fatalf("waits %v", waits)
		}
		firsts[waits[0]] = true
		backoff := lo
		for i, d := range waits {
			if d < min(backoff, hi) || d > min(2*backoff, hi) {
				t.Fatalf("wait %d = %v, want within [%v, %v] (%v)", i, d, min(backoff, hi), min(2*backoff, hi), waits)
			}
			backoff = min(backoff*2, hi)
		}
	}
}
