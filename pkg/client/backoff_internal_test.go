package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBackoffBounds: the waits between retries stay within WithBackoff's
// bounds: none shorter than the first, none longer than the doubled
// backoff of its retry, nor than the longest.
func TestBackoffBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"service_unavailable","message":"down"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	const lo, hi = 500 * time.Millisecond, 2 * time.Second
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
		backoff := lo
		for i, d := range waits {
			if d < lo || d > backoff {
				t.Fatalf("wait %d = %v, want within [%v, %v] (%v)", i, d, lo, backoff, waits)
			}
			backoff = min(backoff*2, hi)
		}
	}
}
