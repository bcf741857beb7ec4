package webhook

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	want := []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 24 * time.Hour, 24 * time.Hour}
	if len(Schedule) != len(want) {
		t.Fatalf("schedule %v", Schedule)
	}
	var total time.Duration
	for i := range want {
		if Schedule[i] != want[i] {
			t.Fatalf("schedule %v", Schedule)
		}
		total += want[i]
	}
	if total < 60*time.Hour || total > 72*time.Hour {
		t.Fatalf("total %v: not about three days", total)
	}
}

func TestNextAttempt(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for i, wait := range Schedule {
		attempts := i + 1
		for _, c := range []struct {
			j    float64
			want time.Duration
		}{
			{0.5, wait},
			{0, wait * 9 / 10},
			{1, wait * 11 / 10},
			{0.25, wait * 95 / 100},
		} {
			next, ok := NextAttempt(attempts, now, func() float64 { return c.j })
			if !ok || next.Sub(now) != c.want {
				t.Errorf("attempts %d jitter %v: %v %v, want +%v", attempts, c.j, next.Sub(now), ok, c.want)
			}
		}
	}
	if _, ok := NextAttempt(len(Schedule)+1, now, nil); ok {
		t.Fatal("schedule not exhausted after the last retry")
	}
	if _, ok := NextAttempt(100, now, nil); ok {
		t.Fatal("schedule not exhausted")
	}
	// Out-of-range jitter is clamped to the band.
	for _, j := range []float64{-5, 7, math.NaN()} {
		next, ok := NextAttempt(1, now, func() float64 { return j })
		if d := next.Sub(now); !ok || d < 54*time.Second || d > 66*time.Second {
			t.Errorf("jitter %v: %v", j, d)
		}
	}
}

func TestNextAttemptJitterBounds(t *testing.T) {
	now := time.Unix(0, 0)
	r := rand.New(rand.NewPCG(1, 2))
	for _, jitter := range []func() float64{nil, r.Float64} {
		seen := map[time.Duration]bool{}
		for range 2000 {
			for i, wait := range Schedule {
				next, ok := NextAttempt(i+1, now, jitter)
				d := next.Sub(now)
				if !ok || d < wait*9/10 || d > wait*11/10 {
					t.Fatalf("attempt %d: wait %v outside ±10%% of %v", i+1, d, wait)
				}
				if i == 0 {
					seen[d] = true
				}
			}
		}
		if len(seen) < 100 {
			t.Fatalf("jitter barely varies: %d distinct waits", len(seen))
		}
	}
}
