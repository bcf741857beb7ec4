package provider_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// recorder is an Observer that keeps what it heard.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
	took map[string]time.Duration
}

func (r *recorder) ProviderRequest(prov, route, op, outcome string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := prov + "/" + route + "/" + op + "/" + outcome
	r.seen[k]++
	r.took[k] += d
}

func (r *recorder) count(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[k]
}

// TestObserver: every live request is heard with its route, operation and
// outcome, a request the breaker refused as circuit_open, and simulator
// calls as route simulator.
func TestObserver(t *testing.T) {
	rec := &recorder{seen: map[string]int{}, took: map[string]time.Duration{}}
	e := newLive(t, 2*time.Second, func(_ *xaalis.Config, o *provider.Options) { o.Observer = rec })
	e.route("channel_a", "direct", map[string]any{"down": true})
	for i := range 4 {
		in, err := e.gw.Initiate(bg, e.request("channel_a", "SN", "+221771234567", fmt.Sprintf("TXN-OBS%d", i)))
		if err != nil || in.Route != "aggregator" {
			t.Fatalf("initiate %d: %+v, %v", i, in, err)
		}
		if _, err := e.gw.Status(bg, xaalis.ModeLive, "channel_a", in.Route, in.ProviderRef); err != nil {
			t.Fatal(err)
		}
	}
	for k, want := range map[string]int{
		"channel_a/direct/initiate/failure":      3, // the breaker opens at the third
		"channel_a/direct/initiate/circuit_open": 1,
		"channel_a/aggregator/initiate/ok":       4,
		"channel_a/aggregator/status/ok":         4,
		// Status asks the route that served first: direct is not asked.
		"channel_a/direct/status/circuit_open": 0,
	} {
		if got := rec.count(k); got != want {
			t.Errorf("%s heard %d times, want %d (all: %v)", k, got, want, rec.seen)
		}
	}
	if rec.took["channel_a/aggregator/initiate/ok"] <= 0 || rec.took["channel_a/direct/initiate/circuit_open"] != 0 {
		t.Errorf("durations: %v", rec.took)
	}
	if st := e.gw.Health(xaalis.ModeLive, "channel_a"); st[0].Route != "direct" || st[0].Healthy || !st[1].Healthy {
		t.Errorf("health: %+v", st)
	}

	// Test mode: the simulator.
	sim := provider.New(e.cfg, provider.Options{Observer: rec})
	req := e.request("channel_b", "SN", "+221771234567", "TXN-OBSSIM")
	req.Mode = xaalis.ModeTest
	if _, err := sim.Initiate(bg, req); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.PayoutStatus(bg, xaalis.ModeTest, "channel_a", "TXN-NEVER"); err == nil {
		t.Fatal("payout status of an unknown reference")
	}
	if rec.count("channel_b/simulator/initiate/ok") != 1 || rec.count("channel_a/simulator/payout_status/not_found") != 1 {
		t.Errorf("simulator calls: %v", rec.seen)
	}
}
