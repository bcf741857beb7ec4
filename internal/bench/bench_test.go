package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"::ffff:127.0.0.1": true, "10.0.0.1": false, "0.0.0.0": false, "::": false, "example.com": false,
		"localhost.example.com": false, "fe80::1%lo": false, "2130706433": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestClientRefusesNonLoopbackAddress(t *testing.T) {
	// The dialer refuses before connecting: no packet leaves.
	c := NewHTTPClient(1)
	_, err := c.Get("http://10.255.255.1:9/")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := Percentiles(d)
	if l.P50 != 500 || l.P90 != 900 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 {
		t.Fatalf("%+v", l)
	}
	if (Percentiles(nil) != Latency{}) {
		t.Fatal("empty input")
	}
}

func TestClosedLoopBounds(t *testing.T) {
	var n atomic.Int64
	r := Run(context.Background(), Load{Concurrency: 3, Duration: time.Minute, MaxRequests: 50, Warmup: 0},
		func(ctx context.Context, seq int64) Outcome {
			n.Add(1)
			if seq%10 == 0 {
				return Outcome{Status: 422, Code: "validation_error"}
			}
			return Outcome{OK: true, Status: 200}
		})
	if r.Requests != 50 || n.Load() != 50 || r.OK != 45 || r.Errors["422 validation_error"] != 5 {
		t.Fatalf("requests %d (ops %d), ok %d, errors %v", r.Requests, n.Load(), r.OK, r.Errors)
	}
}

// An open loop measures from the intended send time: a server that takes
// 20 ms for each of requests meant every 5 ms, one at a time, makes the
// later ones wait, and that wait is in their latency.
func TestOpenLoopCountsQueueing(t *testing.T) {
	r := Run(context.Background(), Load{Rate: 200, Duration: 200 * time.Millisecond, MaxInFlight: 1},
		func(ctx context.Context, seq int64) Outcome {
			time.Sleep(20 * time.Millisecond)
			return Outcome{OK: true}
		})
	if r.Requests != 40 {
		t.Fatalf("requests %d, want 40", r.Requests)
	}
	// The last request was meant at 195 ms and served at about 800 ms.
	if r.Latency.Max < 400 {
		t.Fatalf("max latency %.1f ms: the queueing was hidden", r.Latency.Max)
	}
}

// An open loop tells how late its generator sent: requests that waited
// for the one worker were sent late, and their latency from the actual
// send is the server's 20 ms, not the queue's. A closed loop has no send
// lag.
func TestOpenLoopSendLag(t *testing.T) {
	r := Run(context.Background(), Load{Rate: 200, Duration: 200 * time.Millisecond, MaxInFlight: 1},
		func(ctx context.Context, seq int64) Outcome {
			time.Sleep(20 * time.Millisecond)
			return Outcome{OK: true}
		})
	if r.SendLag == nil || r.FromSend == nil {
		t.Fatal("an open loop without its send lag")
	}
	// 40 requests of 20 ms, one at a time: the last is sent about 600 ms
	// after its time, and most more than 1 ms late.
	if r.SendLag.Max < 400 || r.LateSends < 0.5 {
		t.Fatalf("send lag max %.1f ms, late share %.2f: the generator's queue was hidden", r.SendLag.Max, r.LateSends)
	}
	if r.FromSend.P50 < 20 || r.FromSend.P50 > r.SendLag.Max/2 {
		t.Fatalf("latency from the send p50 %.1f ms, want the server's 20 ms (send lag max %.1f ms)", r.FromSend.P50, r.SendLag.Max)
	}
	var md strings.Builder
	(&Report{Results: []*Result{r}}).WriteMarkdown(&md)
	if !strings.Contains(md.String(), "the generator sent") {
		t.Fatalf("the markdown does not tell the send lag:\n%s", md.String())
	}
	c := Run(context.Background(), Load{Concurrency: 2, Duration: 50 * time.Millisecond},
		func(ctx context.Context, seq int64) Outcome { return Outcome{OK: true} })
	if c.SendLag != nil || c.FromSend != nil {
		t.Fatal("a closed loop with a send lag")
	}
}

// An open loop sends through MaxInFlight workers: a slow server makes
// requests wait (late, and measured so), never opens more at once.
func TestOpenLoopBoundsInFlight(t *testing.T) {
	var in, most atomic.Int64
	r := Run(context.Background(), Load{Rate: 2000, Duration: 100 * time.Millisecond, MaxInFlight: 8},
		func(ctx context.Context, seq int64) Outcome {
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(10 * time.Millisecond)
			in.Add(-1)
			return Outcome{OK: true}
		})
	if r.Requests != 200 || most.Load() > 8 || most.Load() < 2 {
		t.Fatalf("requests %d, at most %d in flight; want 200 and at most 8", r.Requests, most.Load())
	}
}

func TestPhonesAreValidAndDistinct(t *testing.T) {
	seen := map[string]bool{}
	for seq := int64(0); seq < 5000; seq++ {
		p := Phone(seq, "0001")
		got, err := xaalis.ParsePhone(p, "SN")
		if err != nil || got != p {
			t.Fatalf("Phone(%d) = %q: ParsePhone gives %q, %v", seq, p, got, err)
		}
		if seen[p] {
			t.Fatalf("Phone(%d) = %q repeats", seq, p)
		}
		seen[p] = true
	}
}

func TestOutcomeOfReply(t *testing.T) {
	rep := &Reply{Status: http.StatusUnprocessableEntity, Body: []byte(`{"error":{"code":"insufficient_balance"}}`)}
	if o := outcome("", rep, nil, http.StatusCreated); o.OK || o.ErrorKey() != "422 insufficient_balance" {
		t.Fatalf("%+v %q", o, o.ErrorKey())
	}
	if o := outcome("", &Reply{Status: 201}, nil, http.StatusCreated); !o.OK {
		t.Fatalf("%+v", o)
	}
}

func TestAims(t *testing.T) {
	res := func(name string, ok float64) *Result { return &Result{Scenario: name, Throughput: ok, Concurrency: 16} }
	open := func(name string, rate, ok, p99 float64) *Result {
		return &Result{Scenario: OpenName(name), Rate: rate, Throughput: ok, Requests: 100, OK: 100, Latency: Latency{P99: p99}}
	}
	for _, c := range []struct {
		name    string
		backend string
		results []*Result
		want    map[string]bool
	}{
		{"sqlite met", "sqlite", []*Result{res(FloorFsync, 3000), res(CreatePayment, 3300), open(CreatePayment, 2310, 2300, 12),
			res(Payout, 2700), res(Replay, 12000)}, map[string]bool{
			"create-payment ≥ 1.0 × floor-fsync": true, "create-payment ≥ 3000 ok/s": true,
			"create-payment p99 ≤ 25 ms open loop at 0.7 × its saturation": true, "payout ≥ 0.8 × create-payment": true,
			"replay ≥ 10,000 ok/s": true}},
		// Above the floor with the CPUs busy (3.3 ×), which the aim does
		// not judge: it is the idle disk's.
		{"sqlite missed", "sqlite", []*Result{res(FloorFsync, 3000), res(FloorFsyncBusy, 600), res(CreatePayment, 2000), open(CreatePayment, 1400, 1100, 40),
			res(Payout, 1500), res(Replay, 9000)}, map[string]bool{
			"create-payment ≥ 1.0 × floor-fsync": false, "create-payment ≥ 3000 ok/s": false,
			"create-payment p99 ≤ 25 ms open loop at 0.7 × its saturation": false, "payout ≥ 0.8 × create-payment": false,
			"replay ≥ 10,000 ok/s": false}},
		{"postgres", "postgres", []*Result{res(FloorFsync, 3000), res(CreatePayment, 2600), open(CreatePayment, 1820, 1820, 30)},
			map[string]bool{"create-payment ≥ 0.7 × floor-fsync": true, "create-payment ≥ 2500 ok/s": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := &Report{Backend: c.backend, Results: c.results}
			got := map[string]bool{}
			for _, ch := range Aims(rep, 0) {
				got[ch.Aim] = ch.Met
			}
			if len(got) != len(c.want) {
				t.Errorf("aims %v, want %v", got, c.want)
			}
			for aim, met := range c.want {
				if g, ok := got[aim]; !ok || g != met {
					t.Errorf("%q: got %v (judged %v), want %v", aim, g, ok, met)
				}
			}
		})
	}
}

// TestDrainLags: an event the drain never saw acknowledged still counts,
// with the lag it had when the drain ended; events from the warmup do not.
func TestDrainLags(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	from, produced, now := t0.Add(time.Second), t0.Add(10*time.Second), t0.Add(40*time.Second)
	acked := map[string]ack{
		"warm": {created: t0, lag: 5 * time.Millisecond},                        // before the measure: out
		"a":    {created: t0.Add(2 * time.Second), lag: 7 * time.Millisecond},   // in
		"b":    {created: t0.Add(3 * time.Second), lag: 600 * time.Millisecond}, // in
	}
	seen := map[string]time.Time{
		"a": t0.Add(2 * time.Second), "b": t0.Add(3 * time.Second), "warm": t0,
		"failing":      t0.Add(4 * time.Second), // attempted, never acknowledged: 36 s so far
		"failing-warm": t0,                      // attempted in the warmup: out
	}
	// 7 produced: 3 acknowledged, 2 seen and not, 2 never seen.
	got := drainLags(acked, seen, 7, from, produced, now)
	slices.Sort(got)
	want := []time.Duration{7 * time.Millisecond, 600 * time.Millisecond, 30 * time.Second, 30 * time.Second, 36 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("lags %v, want %v", got, want)
	}
}

// TestRecorder: samples added from many goroutines, past a chunk's end,
// come back whole, each with its own outcome and times.
func TestRecorder(t *testing.T) {
	r := &recorder{start: time.Now()}
	outs := []Outcome{{OK: true, Status: 201}, {Status: 422, Code: "insufficient_balance"},
		{Kind: "status", OK: true, Status: 200}, {Code: "transport: timeout"}}
	const workers, each = 8, recordChunk/4 + 7 // 4 chunks and a bit
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i
				r.add(sample{lat: time.Duration(n), lag: time.Duration(2 * n), out: outs[n%len(outs)]})
			}
		}()
	}
	wg.Wait()
	got := r.samples()
	if len(got) != workers*each {
		t.Fatalf("%d samples, want %d", len(got), workers*each)
	}
	if len(r.outcomes) != len(outs) {
		t.Errorf("%d outcomes kept, want %d (interned)", len(r.outcomes), len(outs))
	}
	seen := make([]bool, workers*each)
	for _, s := range got {
		n := int(s.lat)
		if n < 0 || n >= len(seen) || seen[n] {
			t.Fatalf("sample %d: out of range or twice", n)
		}
		seen[n] = true
		if s.lag != 2*s.lat || s.out != outs[n%len(outs)] || s.at <= 0 {
			t.Fatalf("sample %d: lag %v, outcome %+v, at %v", n, s.lag, s.out, s.at)
		}
	}
}

// TestRecordHasNoPointers: the recorder's chunks hold every sample of a
// run, and the garbage collector scans memory that holds pointers at
// every collection, in the server's process. A field with a pointer
// (a string, an Outcome) would bring that back.
func TestRecordHasNoPointers(t *testing.T) {
	rt := reflect.TypeFor[record]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Bool:
		default:
			t.Errorf("record.%s is a %s: keep records free of pointers", f.Name, f.Type)
		}
	}
}

// TestGCMeter: collections during a measurement are counted, with the
// collector's share of the CPU, the heap they left live and what was
// allocated.
func TestGCMeter(t *testing.T) {
	var m GCMeter
	if m.Stop() != nil {
		t.Fatal("a meter never started measured something")
	}
	keep := make([][]byte, 0, 64)
	m.Start()
	for range 3 {
		for range 2000 {
			gcSink = make([]byte, 4096) // garbage, on the heap
		}
		keep = append(keep, make([]byte, 1<<20))
		runtime.GC()
	}
	g := m.Stop()
	runtime.KeepAlive(keep)
	if g == nil || g.Cycles < 3 || g.CPUShare < 0 || g.CPUShare > 1 || g.LiveMB < 3 {
		t.Fatalf("after 3 forced collections with 3 MiB kept: %+v", g)
	}
	// 3 MiB kept and 6,000 blocks of 4 KiB dropped: at least 27 MiB.
	if want := uint64(3<<20 + 6000*4096); g.AllocBytes < want {
		t.Fatalf("allocated %d bytes, want at least %d", g.AllocBytes, want)
	}
	r := &Result{Seconds: 2, Requests: 1000, GC: g}
	n := r.gcNote()
	if !strings.Contains(n, fmt.Sprintf("%d cycles", g.Cycles)) || !strings.Contains(n, "live heap") {
		t.Errorf("note: %q", n)
	}
	if want := fmt.Sprintf("%.1f KB allocated a request", float64(g.AllocBytes)/1000/1000); !strings.Contains(n, want) {
		t.Errorf("note %q lacks %q", n, want)
	}
}

// TestSchedMeter: the goroutines created between Start and Stop are
// counted, and the waits for a CPU (some, with more goroutines runnable
// than CPUs) come out as ordered percentiles.
func TestSchedMeter(t *testing.T) {
	var m SchedMeter
	if m.Stop() != nil {
		t.Fatal("a meter never started measured something")
	}
	m.Start()
	var wg sync.WaitGroup
	var work atomic.Int64 // each goroutine's loop, kept
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for i := range 20000 {
				x += i
			}
			work.Add(int64(x))
		}()
	}
	wg.Wait()
	s := m.Stop()
	if s == nil || s.Created < 200 {
		t.Fatalf("after 200 goroutines: %+v", s)
	}
	if s.WaitP50 < 0 || s.WaitP99 < s.WaitP50 || s.WaitMean <= 0 {
		t.Fatalf("waits for a CPU: %+v", s)
	}
	r := &Result{Requests: 100, Sched: s}
	if n, want := r.schedNote(), fmt.Sprintf("%.1f goroutines created a request", float64(s.Created)/100); !strings.Contains(n, want) {
		t.Errorf("note %q lacks %q", n, want)
	}
}

// TestSpin: floor-fsync-busy's spinners run until stopped, and the stop
// waits for every one of them.
func TestSpin(t *testing.T) {
	before := spinSink.Load()
	base := runtime.NumGoroutine()
	stop := spin(3)
	if n := runtime.NumGoroutine(); n < base+3 {
		t.Fatalf("%d goroutines with 3 spinning, %d before", n, base)
	}
	time.Sleep(20 * time.Millisecond)
	stop()
	if spinSink.Load() == before {
		t.Error("the spinners did no work")
	}
	// A goroutine is counted until it has exited, just after its Done.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("%d goroutines after the stop, %d before", n, base)
	}
}

// gcSink keeps TestGCMeter's garbage from being allocated on the stack.
var gcSink []byte

// TestAPIDoReadsBody: an answer is read whole, with a Content-Length or
// without one (chunked), empty or not, and its connection serves the next
// request.
func TestAPIDoReadsBody(t *testing.T) {
	big := strings.Repeat("x", 5000)
	srv, conns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sized":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			w.Write([]byte(big))
		case "/chunked":
			w.Write([]byte(big[:2000]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[2000:]))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	for _, c := range []struct {
		path string
		want string
	}{{"/sized", big}, {"/sized", big}, {"/chunked", big}, {"/empty", ""}, {"/sized", big}} {
		rep, err := api.Do(context.Background(), "GET", c.path, "k", "", nil)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if string(rep.Body) != c.want {
			t.Errorf("%s: body of %d bytes, want %d", c.path, len(rep.Body), len(c.want))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("five requests one after another opened %d connections, want 1", n)
	}
}

// TestAllocProfile: the profile holds what was allocated between Start
// and Stop, not what was allocated before.
func TestAllocProfile(t *testing.T) {
	var a AllocProfile
	if err := a.Stop(io.Discard); err == nil {
		t.Fatal("a profile never started wrote something")
	}
	allocBefore(32)
	runtime.GC() // publishes allocBefore's allocations before Start
	a.Start()
	allocDuring(32) // published by Stop's own collection
	var b bytes.Buffer
	if err := a.Stop(&b); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	space := -1
	for i, st := range p.SampleType {
		if st.Type == "alloc_space" {
			space = i
		}
	}
	if space < 0 {
		t.Fatalf("no alloc_space in %v", p.SampleType)
	}
	by := map[string]int64{}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			for _, ln := range l.Line {
				if n := ln.Function.Name; strings.HasSuffix(n, ".allocBefore") || strings.HasSuffix(n, ".allocDuring") {
					by[n[strings.LastIndex(n, ".")+1:]] += s.Value[space]
				}
			}
		}
	}
	// 32 MiB in blocks of 64 KiB, sampled every 512 KiB on average.
	if by["allocDuring"] < 16<<20 || by["allocBefore"] != 0 {
		t.Fatalf("alloc_space by function %v: want allocDuring about 32 MiB and allocBefore nothing", by)
	}
}

//go:noinline
func allocBefore(mib int) {
	for range mib * 16 {
		gcSink = make([]byte, 64<<10)
	}
}

//go:noinline
func allocDuring(mib int) {
	for range mib * 16 {
		gcSink = make([]byte, 64<<10)
	}
}

// The CPU a request is the process's CPU over the measured phase divided
// among its successes, and the text and the Markdown table show it; a run
// without a success or a measure has none.
func TestCPUPerOK(t *testing.T) {
	for _, c := range []struct {
		name         string
		cores, secs  float64
		ok           int64
		want         float64
		text, column string
	}{
		{"measured", 1.5, 10, 30000, 500, "cores; this process 500 µs a request\n", "| 1.50/1.80 | 500 |"},
		{"no success", 1.5, 10, 0, 0, "cores\n", "| 1.50/1.80 | — |"},
		{"no measure", 0, 10, 30000, 0, "cores\n", "| 0.00/1.80 | — |"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Result{Scenario: "create-payment", Load: "closed loop", Seconds: c.secs, Requests: c.ok, OK: c.ok,
				CPUProcess: c.cores, CPUMachine: 1.8}
			r.SetCPUPerOK()
			if math.Abs(r.CPUPerOK-c.want) > 1e-9 {
				t.Fatalf("CPUPerOK %v, want %v", r.CPUPerOK, c.want)
			}
			var text, md strings.Builder
			rep := &Report{Results: []*Result{r}}
			rep.WriteText(&text)
			rep.WriteMarkdown(&md)
			if line := "  CPU: this process " + strconv.FormatFloat(c.cores, 'f', 2, 64) + " cores, the machine 1.80 " + c.text; !strings.Contains(text.String(), line) {
				t.Errorf("the text has no %q:\n%s", line, text.String())
			}
			if !strings.Contains(md.String(), c.column) {
				t.Errorf("the Markdown has no %q:\n%s", c.column, md.String())
			}
		})
	}
}

// TestRetrySeed: a seeding request is sent again, with the same
// Idempotency-Key and body, after a 5xx or a 409, and not after another
// refusal; it gives up after seedAttempts.
func TestRetrySeed(t *testing.T) {
	for _, c := range []struct {
		name     string
		statuses []int // the answers, in order; the last repeats
		wantOK   bool
		attempts int
	}{
		{"503 then in flight then created", []int{503, 409, 201}, true, 3},
		{"created at once", []int{201}, true, 1},
		{"422 is not retried", []int{422, 201}, false, 1},
		{"gives up", []int{503}, false, seedAttempts},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int64
			var mu sync.Mutex
			keys, bodies := map[string]bool{}, map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				keys[r.Header.Get("Idempotency-Key")], bodies[string(b)] = true, true
				mu.Unlock()
				i := int(n.Add(1)) - 1
				w.WriteHeader(c.statuses[min(i, len(c.statuses)-1)])
				w.Write([]byte(`{}`))
			}))
			defer srv.Close()
			api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
			_, out := retrySeed(context.Background(), func() (*Reply, error) {
				return api.Do(context.Background(), http.MethodPost, "/v1/payments", "k", "key-1", []byte(`{"amount":1}`))
			})
			if out.OK != c.wantOK || int(n.Load()) != c.attempts {
				t.Errorf("ok %v after %d attempts, want %v after %d", out.OK, n.Load(), c.wantOK, c.attempts)
			}
			if len(keys) != 1 || len(bodies) != 1 {
				t.Errorf("%d keys and %d bodies sent, want one of each", len(keys), len(bodies))
			}
		})
	}
}
