// Package bench is the load generator and the scenarios of `xaalis bench`:
// it drives an API server on loopback at a fixed arrival rate (open loop)
// or at a fixed concurrency (closed loop), measures every request, and
// compares the figures with the machine's own floor measured by the same
// generator in the same run (an HTTP server answering a fixed body, and a
// bare durable transaction of the same writes on the same database).
//
// Open loop measures each request from the moment it was meant to be
// sent, not from when it went out: when the server falls behind, the wait
// for a free slot is part of the latency (no coordinated omission).
package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Load is how a scenario is driven. Rate > 0 is open loop: Rate requests
// a second whatever the answers' speed. Otherwise Concurrency workers send
// back to back (closed loop). Both stop at Duration or MaxRequests,
// whichever comes first, after a Warmup whose requests are not counted.
type Load struct {
	Rate        float64
	Concurrency int
	Duration    time.Duration
	MaxRequests int64
	Warmup      time.Duration
	// MaxInFlight bounds open-loop requests in flight (0: 256): that many
	// workers send them. A request waiting for a worker is late, and its
	// latency counts the wait.
	MaxInFlight int
	// OnMeasure, when set, runs as the measured phase starts (after the
	// warmup).
	OnMeasure func()
}

// Open reports whether the load is open loop.
func (l Load) Open() bool { return l.Rate > 0 }

// Describe is the load in words, for reports.
func (l Load) Describe() string {
	if l.Open() {
		return fmt.Sprintf("open loop, %.0f req/s", l.Rate)
	}
	return fmt.Sprintf("closed loop, %d concurrent", l.Concurrency)
}

// Outcome is what one request came to.
type Outcome struct {
	// Kind labels the operation (mixed runs several); "" is the scenario's one.
	Kind string
	OK   bool
	// Status is the HTTP status (0: none, a transport or store error).
	Status int
	// Code is the error code of the answer's envelope, or a short
	// description of a transport or store error.
	Code string
}

// ErrorKey is the key an unsuccessful outcome is counted under:
// "422 insufficient_balance", "transport: connection refused", ...
func (o Outcome) ErrorKey() string {
	switch {
	case o.Status != 0 && o.Code != "":
		return fmt.Sprintf("%d %s", o.Status, o.Code)
	case o.Status != 0:
		return fmt.Sprintf("%d", o.Status)
	case o.Code != "":
		return o.Code
	}
	return "unknown"
}

// Op performs request number seq (counted from 0 across warmup and
// measurement) and says how it went.
type Op func(ctx context.Context, seq int64) Outcome

// sample is one measured request.
type sample struct {
	lat time.Duration
	// lag (open loop) is how late the generator sent the request: from
	// its intended send time to a worker taking it.
	lag time.Duration
	at  time.Duration // completion, from the phase's start
	out Outcome
}

// recorder collects samples from many goroutines. It keeps them without
// pointers (record, outcomes interned), in chunks of a fixed size: the
// generator shares the server's process and garbage collector, and a
// slice of samples, each with an Outcome's two strings, was memory every
// collection scanned again, growing with the run: 72 bytes a request,
// 72 MB by the end of a 60 s closed loop of status at 17,000 a second.
type recorder struct {
	start    time.Time
	mu       sync.Mutex
	chunks   [][]record
	outcomes []Outcome
	index    map[Outcome]uint32
}

// record is a sample as the recorder keeps it: out indexes
// recorder.outcomes. It holds no pointer, so a chunk of them is memory
// the garbage collector does not scan (TestRecordHasNoPointers).
type record struct {
	lat, lag, at time.Duration
	out          uint32
}

// recordChunk is the records of one chunk: 256 KiB, allocated whole, so
// that the samples never move as they grow.
const recordChunk = 8192

func (r *recorder) add(s sample) {
	at := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[s.out]
	if !ok {
		if r.index == nil {
			r.index = map[Outcome]uint32{}
		}
		i = uint32(len(r.outcomes))
		r.outcomes = append(r.outcomes, s.out)
		r.index[s.out] = i
	}
	if n := len(r.chunks); n == 0 || len(r.chunks[n-1]) == recordChunk {
		r.chunks = append(r.chunks, make([]record, 0, recordChunk))
	}
	last := &r.chunks[len(r.chunks)-1]
	*last = append(*last, record{lat: s.lat, lag: s.lag, at: at, out: i})
}

// samples returns the samples recorded, in the order they were added.
func (r *recorder) samples() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.chunks {
		n += len(c)
	}
	out := make([]sample, 0, n)
	for _, c := range r.chunks {
		for _, x := range c {
			out = append(out, sample{lat: x.lat, lag: x.lag, at: x.at, out: r.outcomes[x.out]})
		}
	}
	return out
}

// Run drives op under load and returns the measured phase's samples as a
// Result (Scenario and Backend left for the caller). seq numbers keep
// increasing from the warmup into the measurement, so an op can use them
// for unique keys.
func Run(ctx context.Context, load Load, op Op) *Result {
	var seq atomic.Int64
	if load.Warmup > 0 {
		w := load
		w.Duration, w.MaxRequests = load.Warmup, 0
		if load.MaxRequests > 0 {
			w.MaxRequests = load.MaxRequests // a warmup never outlasts the run it warms
		}
		phase(ctx, w, op, &seq, nil)
	}
	rec := &recorder{}
	if load.OnMeasure != nil {
		load.OnMeasure()
	}
	rec.start = time.Now()
	elapsed := phase(ctx, load, op, &seq, rec)
	return summarize(load, rec.samples(), elapsed)
}

// phase runs one phase and returns how long it took, from its start to
// the last answer.
func phase(ctx context.Context, load Load, op Op, seq *atomic.Int64, rec *recorder) time.Duration {
	if load.Open() {
		return openLoop(ctx, load, op, seq, rec)
	}
	return closedLoop(ctx, load, op, seq, rec)
}

func closedLoop(ctx context.Context, load Load, op Op, seq *atomic.Int64, rec *recorder) time.Duration {
	c := max(1, load.Concurrency)
	start := time.Now()
	deadline := start.Add(load.Duration)
	var issued atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if load.MaxRequests > 0 && issued.Add(1) > load.MaxRequests {
					return
				}
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				out := op(ctx, seq.Add(1)-1)
				if rec != nil {
					rec.add(sample{lat: time.Since(t0), out: out})
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// defaultMaxInFlight is the open loop's workers when Load.MaxInFlight is
// 0: many times what a rate the server sustains keeps in flight (rate ×
// latency: about 15 at 0.7 × this machine's saturation), so a stall of
// the server queues requests, late and measured so, rather than making
// the generator open a connection and a goroutine for each. With one of
// each per request (up to 4,096), a stall of a few milliseconds at
// 10,000 requests a second set off thousands of new connections, and the
// generator, on the server's CPUs, could no longer send at the rate.
const defaultMaxInFlight = 256

// openLoop sends request i at start + i/Rate, whatever the answers'
// speed: MaxInFlight workers take the requests due, in order. A request
// no worker is free for waits, and its latency, from its intended send
// time, counts the wait.
func openLoop(ctx context.Context, load Load, op Op, seq *atomic.Int64, rec *recorder) time.Duration {
	workers := load.MaxInFlight
	if workers <= 0 {
		workers = defaultMaxInFlight
	}
	type due struct {
		n        int64
		intended time.Time
	}
	queue := make(chan due, 1<<16)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range queue {
				lag := time.Since(d.intended)
				out := op(ctx, d.n)
				if rec != nil {
					// From the intended send time: a late send is the
					// server's delay too.
					rec.add(sample{lat: time.Since(d.intended), lag: lag, out: out})
				}
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / load.Rate)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i := int64(0); ctx.Err() == nil; i++ {
		if load.MaxRequests > 0 && i >= load.MaxRequests {
			break
		}
		intended := start.Add(time.Duration(i) * interval)
		if intended.Sub(start) >= load.Duration {
			break
		}
		// Every request already due goes at once; the timer only waits
		// for the next one not yet due.
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		select {
		case queue <- due{seq.Add(1) - 1, intended}:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	return time.Since(start)
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Percentiles computes Latency over durations (nearest rank). It sorts d.
func Percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) float64 {
		k := int(p*float64(len(d))+0.999999) - 1 // ceil(p·n) - 1
		k = min(max(k, 0), len(d)-1)
		return ms(d[k])
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999), Max: ms(d[len(d)-1]),
		Mean: ms(sum / time.Duration(len(d)))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lateSend is how late a send must be to count in Result.LateSends.
const lateSend = time.Millisecond

// setSendLag fills the open loop's SendLag, LateSends and FromSend.
func (r *Result) setSendLag(samples []sample) {
	lags, from := make([]time.Duration, len(samples)), make([]time.Duration, len(samples))
	late := 0
	for i, s := range samples {
		lags[i], from[i] = s.lag, s.lat-s.lag
		if s.lag > lateSend {
			late++
		}
	}
	sl, fs := Percentiles(lags), Percentiles(from)
	r.SendLag, r.FromSend = &sl, &fs
	r.LateSends = float64(late) / float64(len(samples))
}

func tenSeconds(counts []int64) float64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return float64(n) / float64(len(counts))
}

// KindStats are the figures of one kind of operation in a mixed run.
type KindStats struct {
	Requests   int64            `json:"requests"`
	OK         int64            `json:"ok"`
	Throughput float64          `json:"throughput_ok_per_s"`
	Latency    Latency          `json:"latency"`
	Errors     map[string]int64 `json:"errors,omitempty"`
}

// summarize turns samples into a Result.
func summarize(load Load, samples []sample, elapsed time.Duration) *Result {
	r := &Result{Load: load.Describe(), Rate: load.Rate, Concurrency: load.Concurrency,
		Seconds: elapsed.Seconds(), Errors: map[string]int64{}}
	if !load.Open() {
		r.Rate = 0
	} else {
		r.Concurrency = 0
	}
	lat := make([]time.Duration, 0, len(samples))
	kinds := map[string][]sample{}
	for _, s := range samples {
		r.Requests++
		if s.out.OK {
			r.OK++
		} else {
			r.Errors[s.out.ErrorKey()]++
		}
		lat = append(lat, s.lat)
		if s.out.Kind != "" {
			kinds[s.out.Kind] = append(kinds[s.out.Kind], s)
		}
	}
	if elapsed > 0 {
		r.Throughput = float64(r.OK) / elapsed.Seconds()
	}
	r.Latency = Percentiles(lat)
	if load.Open() && len(samples) > 0 {
		r.setSendLag(samples)
	}
	// Successes per whole second of the phase: a throughput that decays
	// as the run goes on shows work growing with the data.
	if secs := int(elapsed / time.Second); secs > 0 {
		r.Timeline = make([]int64, secs)
		for _, s := range samples {
			if i := int(s.at / time.Second); s.out.OK && i < secs {
				r.Timeline[i]++
			}
		}
		if secs >= 20 {
			r.FirstTen, r.LastTen = tenSeconds(r.Timeline[:10]), tenSeconds(r.Timeline[secs-10:])
		}
	}
	if len(kinds) > 0 {
		r.Kinds = map[string]*KindStats{}
		for k, list := range kinds {
			ks := &KindStats{Errors: map[string]int64{}}
			d := make([]time.Duration, 0, len(list))
			for _, s := range list {
				ks.Requests++
				if s.out.OK {
					ks.OK++
				} else {
					ks.Errors[s.out.ErrorKey()]++
				}
				d = append(d, s.lat)
			}
			if elapsed > 0 {
				ks.Throughput = float64(ks.OK) / elapsed.Seconds()
			}
			ks.Latency = Percentiles(d)
			r.Kinds[k] = ks
		}
	}
	return r
}
