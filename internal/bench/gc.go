package bench

import (
	"fmt"
	"runtime/metrics"
)

// GC is what the garbage collector of this process (the generator and the
// in-process server) did during a measured phase. Every open loop's tail
// passes through it: a collection takes CPU from the handlers for its
// mark phase, and the latency of the requests queued meanwhile shows it.
type GC struct {
	// Cycles is the collections completed during the phase.
	Cycles uint64 `json:"cycles"`
	// CPUShare is the collector's share of the process's CPU time (its
	// mark workers, the assists of allocating goroutines, its pauses).
	CPUShare float64 `json:"cpu_share"`
	// LiveMB is the heap that survived the last collection of the phase:
	// what each collection marks.
	LiveMB float64 `json:"live_heap_mb"`
	// AllocBytes is what the phase allocated on the heap: what drives
	// the collections. Unlike a p99, it hardly varies from run to run,
	// so two builds compare on it with one run each.
	AllocBytes uint64 `json:"allocated_bytes"`
}

// gcSamples are the runtime/metrics the meter reads, at the indexes below.
var gcSamples = []string{
	gcCycles:  "/gc/cycles/total:gc-cycles",
	gcCPU:     "/cpu/classes/gc/total:cpu-seconds",
	totalCPU:  "/cpu/classes/total:cpu-seconds",
	idleCPU:   "/cpu/classes/idle:cpu-seconds",
	liveBytes: "/gc/heap/live:bytes",
	allocated: "/gc/heap/allocs:bytes",
}

const (
	gcCycles = iota
	gcCPU
	totalCPU
	idleCPU
	liveBytes
	allocated
)

// GCMeter measures the garbage collector between Start and Stop.
type GCMeter struct{ start []metrics.Sample }

// readMetrics reads the runtime/metrics named, in their order.
func readMetrics(names []string) []metrics.Sample {
	s := make([]metrics.Sample, len(names))
	for i, name := range names {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

// Start begins a measurement.
func (m *GCMeter) Start() { m.start = readMetrics(gcSamples) }

// Stop returns what the collector did since Start (nil without a Start).
func (m *GCMeter) Stop() *GC {
	if m.start == nil {
		return nil
	}
	end := readMetrics(gcSamples)
	u := func(s []metrics.Sample, i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	f := func(s []metrics.Sample, i int) float64 {
		if s[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s[i].Value.Float64()
	}
	g := &GC{Cycles: u(end, gcCycles) - u(m.start, gcCycles), LiveMB: float64(u(end, liveBytes)) / (1 << 20),
		AllocBytes: u(end, allocated) - u(m.start, allocated)}
	// The runtime's total is GOMAXPROCS over the wall clock; without its
	// idle time, it is what the process's Go code and runtime used.
	delta := func(i int) float64 { return f(end, i) - f(m.start, i) }
	if used := delta(totalCPU) - delta(idleCPU); used > 0 {
		g.CPUShare = delta(gcCPU) / used
	}
	return g
}

// gcNote describes r's garbage collection, or "".
func (r *Result) gcNote() string {
	if r.GC == nil || r.Seconds <= 0 {
		return ""
	}
	n := fmt.Sprintf("garbage collection: %d cycles (%.1f a second), %.1f %% of the process's CPU, live heap %.0f MB at the end",
		r.GC.Cycles, float64(r.GC.Cycles)/r.Seconds, 100*r.GC.CPUShare, r.GC.LiveMB)
	if r.Requests > 0 {
		n += fmt.Sprintf("; %.1f KB allocated a request", float64(r.GC.AllocBytes)/float64(r.Requests)/1000)
	}
	return n
}
