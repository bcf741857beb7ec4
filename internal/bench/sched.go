package bench

import (
	"fmt"
	"math"
	"runtime/metrics"
)

// Sched is what the Go scheduler of this process (the generator and the
// in-process server) did during a measured phase. On a machine of few
// CPUs a request waits longer for a CPU than it uses one, at each of the
// goroutines it passes through (its connection's, the writer, the
// syncer): the goroutines a request creates and how long the runnable
// goroutines waited are what that costs. The count hardly varies from run
// to run, so two builds compare on it with one run each.
type Sched struct {
	// Created is the goroutines created during the phase.
	Created uint64 `json:"goroutines_created"`
	// WaitP50, WaitP99 and WaitMean are how long goroutines waited in the
	// runnable state before they ran, in microseconds: for the
	// percentiles, the upper bound of the runtime's histogram bucket they
	// fall in; for the mean, each wait counted at its bucket's middle.
	WaitP50  float64 `json:"runnable_wait_p50_us"`
	WaitP99  float64 `json:"runnable_wait_p99_us"`
	WaitMean float64 `json:"runnable_wait_mean_us"`
}

var schedSamples = []string{
	schedCreated:   "/sched/goroutines-created:goroutines",
	schedLatencies: "/sched/latencies:seconds",
}

const (
	schedCreated = iota
	schedLatencies
)

// SchedMeter measures the scheduler between Start and Stop.
type SchedMeter struct{ start []metrics.Sample }

// Start begins a measurement.
func (m *SchedMeter) Start() { m.start = readMetrics(schedSamples) }

// Stop returns what the scheduler did since Start (nil without a Start,
// or when the runtime does not report these metrics).
func (m *SchedMeter) Stop() *Sched {
	if m.start == nil {
		return nil
	}
	end := readMetrics(schedSamples)
	for _, x := range [][]metrics.Sample{m.start, end} {
		if x[schedCreated].Value.Kind() != metrics.KindUint64 || x[schedLatencies].Value.Kind() != metrics.KindFloat64Histogram {
			return nil
		}
	}
	s := &Sched{Created: end[schedCreated].Value.Uint64() - m.start[schedCreated].Value.Uint64()}
	h0, h1 := m.start[schedLatencies].Value.Float64Histogram(), end[schedLatencies].Value.Float64Histogram()
	if len(h0.Counts) != len(h1.Counts) {
		return s
	}
	counts := make([]uint64, len(h1.Counts))
	var n uint64
	var sum float64
	for i := range counts {
		counts[i] = h1.Counts[i] - h0.Counts[i]
		n += counts[i]
		// Each wait counted at its bucket's middle (a finite bound for
		// the first and last buckets).
		lo, hi := finite(h1.Buckets[i], h1.Buckets[i+1]), finite(h1.Buckets[i+1], h1.Buckets[i])
		sum += float64(counts[i]) * (lo + hi) / 2
	}
	if n == 0 {
		return s
	}
	s.WaitMean = sum / float64(n) * 1e6
	at := func(p float64) float64 {
		rank := uint64(math.Ceil(p * float64(n)))
		var seen uint64
		for i, c := range counts {
			if seen += c; seen >= rank {
				return finite(h1.Buckets[i+1], h1.Buckets[i]) * 1e6
			}
		}
		return 0
	}
	s.WaitP50, s.WaitP99 = at(0.50), at(0.99)
	return s
}

// finite is b, or other when b is infinite (the histogram's outer bounds).
func finite(b, other float64) float64 {
	if math.IsInf(b, 0) {
		return other
	}
	return b
}

// schedNote describes r's scheduling, or "".
func (r *Result) schedNote() string {
	if r.Sched == nil || r.Requests <= 0 {
		return ""
	}
	us := func(v float64) string {
		if v >= 1000 {
			return fmt.Sprintf("%.2f ms", v/1000)
		}
		return fmt.Sprintf("%.1f µs", v)
	}
	return fmt.Sprintf("scheduler: %.1f goroutines created a request; goroutines waited for a CPU %s at the median, %s at p99, %s on average",
		float64(r.Sched.Created)/float64(r.Requests), us(r.Sched.WaitP50), us(r.Sched.WaitP99), us(r.Sched.WaitMean))
}
