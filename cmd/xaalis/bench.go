package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/bench"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// benchOptions are the flags of `xaalis bench`.
type benchOptions struct {
	scenarios     []string
	dbURL         string
	freshDB       bool // dbURL is a temporary SQLite file of this run
	target        string
	serverProcess bool // run the server as a child process, `xaalis serve`
	apiKey        string
	load          bench.Load
	seed          int
	drainTimeout  time.Duration
	drainRate     float64
	drainDuration time.Duration
	dispatchEvery time.Duration
	cpuprofile    string
	memprofile    string
	trace         string
	freshSchema   bool
	floors        bool
	targetCheck   bool
	big           int           // payments seeded in bulk for the big-database runs (0: none)
	bigDuration   time.Duration // measured time of each big-database run
	configPath    string
	limitsOff     bool
	logLevel      slog.Level
	procs         int    // GOMAXPROCS while an in-process server runs (0: unchanged)
	format        string // text, json, markdown
	out           string
}

func cmdBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	scenario := fs.String("scenario", bench.CreatePayment, "scenario: "+strings.Join(bench.All, ", ")+", or all")
	db := fs.String("database-url", "", "database URL: sqlite://PATH or postgres://... (default: a fresh SQLite database in a temporary directory)")
	target := fs.String("target", "", "URL of a running server on loopback to drive instead of starting one (localhost, 127.0.0.0/8, ::1 only)")
	serverProcess := fs.Bool("server-process", false, "run the server as a process of its own (xaalis serve, this executable, on the database) rather than in the bench's: the generator and the server share the CPUs but not one Go runtime; its statements, commits and CPU are read off its /metrics")
	apiKey := fs.String("api-key", getenv("XAALIS_BENCH_API_KEY"), "with --target and no --database-url: the secret test key to use (env XAALIS_BENCH_API_KEY)")
	rate := fs.Float64("rate", 0, "open loop: requests a second, latency measured from each request's intended send time")
	conc := fs.Int("concurrency", 16, "closed loop: requests in flight (and the floors' concurrency)")
	duration := fs.Duration("duration", 10*time.Second, "measured time per scenario")
	maxReq := fs.Int64("max-requests", 0, "stop a scenario after this many requests (0: no limit but --duration)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured load before each scenario")
	seed := fs.Int("seed", 1000, "payments created before status and mixed")
	drain := fs.Duration("drain-timeout", 60*time.Second, "webhook-drain: how long to wait for every event's delivery after producing")
	drainRate := fs.Float64("drain-rate", 100, "webhook-drain: events produced a second, open loop (0: --rate or --concurrency like the other scenarios)")
	drainDuration := fs.Duration("drain-duration", 0, "webhook-drain: measured time of producing events (0: --duration); its p99 rests on the 1 % slowest events, so more events measure it better")
	dispatch := fs.Duration("dispatch-interval", time.Second, "in-process server: how often the webhook dispatcher polls (serve's is 1s)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured phase of create-payment (or of the one scenario run) to FILE; with --server-process, the server's")
	memprofile := fs.String("memprofile", "", "write where the measured phase of create-payment (or of the one scenario run) allocated to FILE, a pprof profile (go tool pprof -sample_index=alloc_space FILE); with --server-process, the server's")
	traceFile := fs.String("trace", "", "write an execution trace of the measured phase of create-payment (or of the one scenario run) to FILE (go tool trace FILE; -pprof=sched for the waits for a CPU); with --server-process, the server's")
	freshSchema := fs.Bool("fresh-schema", false, "PostgreSQL: run in a new schema, dropped afterwards")
	floors := fs.Bool("floors", true, "measure the floors first (floor-fsync, floor-fsync-busy, floor-tx, floor-http, floor-db), for the ratios")
	targetCheck := fs.Bool("target-check", true, fmt.Sprintf("after create-payment, drive it open loop at %.1f × its saturation for its latency", bench.OpenFraction))
	big := fs.Int("big", 0, "after the scenarios, seed this many payments in bulk for a new merchant and measure create-payment, status and list again (0: no big-database runs)")
	bigDuration := fs.Duration("big-duration", 0, "measured time of each big-database run (0: --duration)")
	configPath := fs.String("config", "", "in-process server: business configuration file (limits are raised either way)")
	limits := fs.String("limits", "raised", "in-process server: volume limits 'raised' (checked on every payment, never reached) or 'off' (not checked: no volume queries)")
	logLevel := fs.String("server-log-level", "info", "in-process server: log level (logs are formatted, then discarded)")
	procs := fs.Int("gomaxprocs", 0, "in-process server: the process's GOMAXPROCS during the run; 0: twice the runtime's own choice, one share for the server and one for the generator, as two processes would have (the environment's GOMAXPROCS, when set, is kept)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	asMarkdown := fs.Bool("markdown", false, "print the results as a Markdown table")
	out := fs.String("out", "", "write the results to FILE instead of standard output")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	o := benchOptions{dbURL: *db, target: *target, serverProcess: *serverProcess, apiKey: *apiKey, seed: *seed, drainTimeout: *drain, drainRate: *drainRate, drainDuration: *drainDuration,
		dispatchEvery: *dispatch, cpuprofile: *cpuprofile, memprofile: *memprofile, trace: *traceFile, freshSchema: *freshSchema, floors: *floors,
		targetCheck: *targetCheck, configPath: *configPath, out: *out, format: "text", big: *big, bigDuration: *bigDuration}
	o.load = bench.Load{Rate: *rate, Concurrency: *conc, Duration: *duration, MaxRequests: *maxReq, Warmup: *warmup}
	switch {
	case *asJSON && *asMarkdown:
		return usagef("bench: --json and --markdown exclude each other")
	case *asJSON:
		o.format = "json"
	case *asMarkdown:
		o.format = "markdown"
	}
	if *scenario == "all" {
		o.scenarios = bench.All
	} else {
		for _, s := range splitComma(*scenario) {
			if !bench.Known(s) {
				return usagef("bench: unknown scenario %q (expected %s or all)", s, strings.Join(bench.All, ", "))
			}
			o.scenarios = append(o.scenarios, s)
		}
		if len(o.scenarios) == 0 {
			return usagef("bench: --scenario is empty")
		}
	}
	switch {
	case *rate < 0, *drainRate < 0, *conc < 1, *duration <= 0, *maxReq < 0, *warmup < 0, *seed < 1, *drain < 0, *dispatch <= 0,
		*big < 0, *bigDuration < 0, *drainDuration < 0:
		return usagef("bench: --rate, --max-requests, --warmup, --big, --big-duration and --drain-duration must be at least 0; --concurrency, --duration, --seed and --dispatch-interval positive")
	case *big > 10_000_000:
		return usagef("bench: --big is at most 10000000")
	case *duration > time.Hour, *drainDuration > time.Hour:
		return usagef("bench: --duration and --drain-duration are at most 1h")
	}
	switch *limits {
	case "raised":
	case "off":
		o.limitsOff = true
	default:
		return usagef("bench: --limits is raised or off")
	}
	switch {
	case *procs < 0:
		return usagef("bench: --gomaxprocs must be at least 0")
	case *procs > 0:
		o.procs = *procs
	case getenv("GOMAXPROCS") == "":
		o.procs = 2 * runtime.GOMAXPROCS(0)
	}
	if err := o.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--server-log-level: %v", err)
	}
	if o.target != "" {
		if _, err := bench.CheckLoopback(o.target); err != nil {
			return usagef("bench: %v", err)
		}
		o.target = strings.TrimRight(o.target, "/")
		if o.dbURL == "" && o.apiKey == "" {
			return usagef("bench: --target needs --database-url (to create the bench's merchant and check the ledger) or --api-key")
		}
	}
	if o.serverProcess {
		switch {
		case o.target != "":
			return usagef("bench: --server-process starts the server --target names: one or the other")
		case *dispatch != time.Second:
			return usagef("bench: --dispatch-interval is the in-process server's; xaalis serve's dispatcher polls every second")
		case *procs > 0:
			return usagef("bench: --gomaxprocs is the in-process server's; with --server-process each process takes the runtime's")
		}
	}
	if o.freshSchema && !isPostgres(o.dbURL) {
		return usagef("bench: --fresh-schema is for a postgres:// --database-url")
	}

	var w io.Writer = stdout
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		w = bw
	}
	rep, err := runBench(ctx, o, stderr)
	if rep != nil {
		switch o.format {
		case "json":
			if jerr := rep.WriteJSON(w); jerr != nil {
				return jerr
			}
		case "markdown":
			rep.WriteMarkdown(w)
		default:
			rep.WriteText(w)
		}
	}
	if err != nil {
		return err
	}
	if rep.Ledger.Problems > 0 {
		return fmt.Errorf("bench: the ledger check found %d problems", rep.Ledger.Problems)
	}
	return nil
}

func isPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// benchTarget is the server a run drives.
type benchTarget struct {
	base  string
	store xaalis.Store // nil: no database access
	app   *xaalis.App
	stop  func() error
	// sample reads the server's store counters (and its process's CPU
	// time, when it runs apart); nil: they cannot be read.
	sample func(context.Context) (serverSample, error)
	apart  bool // the server runs in a process of its own (--server-process)
	// admin is the admin listener's base URL of a server apart, started
	// with --pprof when a profile is asked: the profiles are its.
	admin string
}

// procs counts the in-process runs under way and keeps the GOMAXPROCS
// the first of them found: runs that overlap (the tests') leave it set
// once, and the last restores it.
var procs struct {
	sync.Mutex
	runs  int
	saved int
}

// setProcs sets GOMAXPROCS to n for an in-process run, unless another run
// already set it, and returns what ends the run's share. The generator and
// the server share this process: with the runtime's one P a CPU, the
// generator's goroutines queue for the server's Ps. Measured, status open
// loop at 9,000 req/s: p99 12-14 ms in process, 5-6 ms with the generator
// in its own process (--target), 6.4-6.7 ms in process with twice the Ps.
func setProcs(n int) (done func()) {
	procs.Lock()
	defer procs.Unlock()
	if procs.runs == 0 {
		procs.saved = runtime.GOMAXPROCS(n)
	}
	procs.runs++
	return func() {
		procs.Lock()
		defer procs.Unlock()
		if procs.runs--; procs.runs == 0 {
			runtime.GOMAXPROCS(procs.saved)
		}
	}
}

// runBench runs the scenarios and returns the report.
func runBench(ctx context.Context, o benchOptions, progress io.Writer) (*bench.Report, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }
	if o.dbURL == "" && o.target == "" {
		dir, err := os.MkdirTemp("", "xaalis-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.dbURL, o.freshDB = "sqlite://"+filepath.Join(dir, "bench.db"), true
	}
	if o.freshSchema {
		u, drop, err := freshSchema(ctx, o.dbURL)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := drop(); err != nil {
				logf("drop schema: %v", err)
			}
		}()
		o.dbURL = u
	}

	if o.target == "" && !o.serverProcess && o.procs > 0 {
		defer setProcs(o.procs)()
	}
	rep := &bench.Report{Machine: machineInfo(), Command: "xaalis bench " + describeOptions(o)}
	drains := false
	for _, s := range o.scenarios {
		drains = drains || s == bench.WebhookDrain
	}

	var tgt *benchTarget
	var err error
	switch {
	case o.serverProcess:
		tgt, err = startServerProcess(ctx, o, drains, logf)
	case o.target == "":
		tgt, err = startInProcess(ctx, o, drains)
	default:
		tgt, err = attachTarget(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := tgt.stop(); err != nil {
			logf("stop: %v", err)
		}
	}()
	if o.dbURL != "" {
		rep.DB = dbInfo(ctx, o.dbURL, tgt.store)
		rep.Backend = rep.DB.Kind
	} else {
		rep.Backend = "unknown (no --database-url)"
	}

	client := bench.NewHTTPClient(max(1024, 2*o.load.Concurrency))
	defer client.CloseIdleConnections()
	runID := "b" + randomHex(6)
	// envs numbers the environments: a scenario measured closed then open
	// loop gets one for each, and with --target and --api-key both drive
	// one merchant, whose Idempotency-Keys (RunID and a sequence number
	// from 0) the open loop would otherwise send again, and be answered
	// with the closed loop's payments.
	envs := 0
	newEnv := func(name string) (*bench.Env, error) {
		envs++
		env := &bench.Env{RunID: fmt.Sprintf("%s-%d-%s", runID, envs, name), Load: o.load, Seed: o.seed, DrainTimeout: o.drainTimeout, Progress: progress,
			API: &bench.API{Base: tgt.base, Client: client, Secret: o.apiKey}, Store: tgt.store, DBURL: o.dbURL}
		if tgt.app != nil {
			m, keys, err := tgt.app.CreateMerchant(ctx, xaalis.MerchantCreate{Name: "Bench " + name, Country: "SN",
				SettlementCurrency: xaalis.XOF, Status: xaalis.MerchantActive, KYC: xaalis.KYCApproved})
			if err != nil {
				return nil, fmt.Errorf("create the bench merchant: %w", err)
			}
			env.API.Secret, env.API.Publishable, env.MerchantID = keys.SecretTest, keys.PublishableTest, m.ID
		}
		return env, nil
	}

	var floors bench.Floors
	// measure runs scenario name on env (nil: a merchant of its own) under
	// load, and records the result under label (name when "").
	measure := func(env *bench.Env, name, label string, load bench.Load, profile bool) (*bench.Result, error) {
		if label == "" {
			label = name
		}
		if env == nil {
			var err error
			if env, err = newEnv(name); err != nil {
				return nil, err
			}
		}
		env.Load = load
		logf("%s: preparing (%s)", label, load.Describe())
		p, err := bench.Prepare(ctx, name, env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if p.Close != nil {
			defer p.Close()
		}
		var profErr error
		stopProfile := func() {}
		// record starts a recording of the measured phase into a new file
		// at path, unless one before it failed; stopProfile ends it and
		// closes the file, then stops what was started before it. profErr
		// keeps the first failure.
		record := func(path string, start func(io.Writer) error, stop func() error) {
			if profErr != nil {
				return
			}
			f, err := os.Create(path)
			if err == nil {
				if err = start(f); err != nil {
					f.Close()
				}
			}
			if err != nil {
				profErr = err
				return
			}
			before := stopProfile
			stopProfile = func() {
				err := stop()
				if err = errors.Join(err, f.Close()); profErr == nil {
					profErr = err
				}
				before()
			}
		}
		var cpu bench.CPUMeter
		var gc bench.GCMeter
		var sched bench.SchedMeter
		var allocs bench.AllocProfile
		// The scenario profiled writes the profiles asked for.
		cpuProfile, memProfile, traced := profile && o.cpuprofile != "", profile && o.memprofile != "", profile && o.trace != ""
		var sample0 serverSample
		var sampleErr error
		// The WAL PostgreSQL wrote, from the bench's own store (with the
		// server apart too: the position is the cluster's).
		wal, _ := tgt.store.(walReporter)
		var wal0 int64
		var walErr error
		var t0 time.Time
		sample, server := tgt.sample, tgt.apart
		if server && bench.IsFloor(name) {
			// The floors run in the bench's process (floor-db through its
			// own store), not in the server's.
			sample, server = localSample(tgt.store), false
		}
		load.OnMeasure = func() {
			if p.OnMeasure != nil {
				p.OnMeasure()
			}
			if sample != nil {
				sample0, sampleErr = sample(ctx)
			}
			if wal != nil {
				wal0, walErr = wal.WALPosition(ctx)
			}
			t0 = time.Now()
			cpu.Start()
			gc.Start()
			sched.Start()
			switch {
			case server:
				// The server's own profiles, fetched from it over the
				// measured phase (serve --pprof).
				for _, f := range []struct {
					on         bool
					path, name string
				}{{cpuProfile, o.cpuprofile, "profile"}, {memProfile, o.memprofile, "allocs"}, {traced, o.trace, "trace"}} {
					if f.on {
						start, stop := fetchProfile(ctx, tgt.admin, f.name, load.Duration)
						record(f.path, start, stop)
					}
				}
			default:
				if memProfile {
					allocs.Start()
				}
				if cpuProfile {
					record(o.cpuprofile, pprof.StartCPUProfile, func() error { pprof.StopCPUProfile(); return nil })
				}
				if traced {
					record(o.trace, trace.Start, func() error { trace.Stop(); return nil })
				}
			}
		}
		logf("%s: measuring for %s", label, load.Duration)
		r := bench.Run(ctx, load, p.Op)
		r.CPUProcess, r.CPUMachine = cpu.Stop()
		wall := time.Since(t0)
		r.GC = gc.Stop()
		r.Sched = sched.Stop()
		if sample != nil && sampleErr == nil {
			var s serverSample
			if s, sampleErr = sample(ctx); sampleErr == nil {
				if server {
					serverCPU(r, s.cpu-sample0.cpu, wall)
				}
				if r.OK > 0 && !bench.IsPhysicalFloor(name) {
					r.StatementsPerOK = float64(s.stats.Statements-sample0.stats.Statements) / float64(r.OK)
					if tx := s.stats.Transactions - sample0.stats.Transactions; tx > 0 {
						r.CommandsPerCommit = float64(s.stats.Commands-sample0.stats.Commands) / float64(tx)
					}
				}
			}
		}
		if sampleErr != nil {
			r.Notes = append(r.Notes, "the server's counters could not be read: "+sampleErr.Error())
		}
		if wal != nil && walErr == nil && r.OK > 0 {
			var wal1 int64
			if wal1, walErr = wal.WALPosition(ctx); walErr == nil {
				r.WALBytesPerOK = float64(wal1-wal0) / float64(r.OK)
			}
		}
		if walErr != nil {
			r.Notes = append(r.Notes, "PostgreSQL's WAL position could not be read: "+walErr.Error())
		}
		r.SetCPUPerOK()
		stopProfile()
		if profErr != nil {
			return nil, fmt.Errorf("profile: %w", profErr)
		}
		if memProfile && !server {
			if err := writeAllocs(&allocs, o.memprofile); err != nil {
				return nil, err
			}
		}
		r.Scenario, r.Backend, r.Notes = label, rep.Backend, append(r.Notes, p.Notes...)
		if p.After != nil {
			if err := p.After(ctx, r); err != nil {
				return nil, fmt.Errorf("%s: %w", label, err)
			}
		}
		if cpuProfile {
			r.Notes = append(r.Notes, "CPU profile of the measured phase: "+o.cpuprofile)
		}
		if memProfile {
			r.Notes = append(r.Notes, "allocation profile of the measured phase: "+o.memprofile)
		}
		if traced {
			r.Notes = append(r.Notes, "execution trace of the measured phase: "+o.trace)
		}
		if name == bench.WebhookDrain && o.target == "" {
			r.Notes = append(r.Notes, fmt.Sprintf("the dispatcher is woken by each commit and polls every %s as a fallback; its retries "+
				"wait webhook.Schedule × %g (%s, ...), so that failed attempts are retried within the run", o.dispatchEvery,
				bench.RetryScale, strings.Trim(fmt.Sprint(bench.ShortSchedule()[:4]), "[]")))
		}
		if !bench.IsFloor(name) {
			r.SetRatios(floors)
			if o.limitsOff {
				r.Notes = append(r.Notes, "--limits off: merchant, provider and BCEAO volume limits are 0 (none), so no volume query runs")
			}
		}
		logf("%s: %.0f ok/s, p50 %.2f ms, p99 %.2f ms, errors %d", label, r.Throughput, r.Latency.P50, r.Latency.P99, r.Requests-r.OK)
		rep.Results = append(rep.Results, r)
		return r, ctx.Err()
	}
	// saturateThenOpen measures name closed loop, then open loop at
	// OpenFraction of the closed loop's throughput: its latency at a load
	// it sustains.
	saturateThenOpen := func(env *bench.Env, name, label string, load bench.Load, profile bool) error {
		if label == "" {
			label = name
		}
		closed, err := measure(env, name, label, load, profile)
		if err != nil || closed.Throughput <= 0 {
			return err
		}
		open := load
		open.Rate, open.Concurrency = bench.OpenFraction*closed.Throughput, 0
		_, err = measure(env, name, bench.OpenName(label), open, false)
		return err
	}

	// The floors, always closed loop: the physical ones one operation at a
	// time (what one fsync per request would allow), floor-http and
	// floor-db at --concurrency like the scenarios compared with them.
	floorLoad := o.load
	floorLoad.Rate = 0
	physical := floorLoad
	physical.Concurrency = 1
	wanted := func(name string) bool { return o.floors || slices.Contains(o.scenarios, name) }
	for _, f := range []struct {
		name string
		load bench.Load
		dst  **bench.Result
	}{
		{bench.FloorFsync, physical, &floors.Fsync},
		{bench.FloorFsyncBusy, physical, new(*bench.Result)}, // no ratio: told beside floor-fsync's aim
		{bench.FloorTx, physical, &floors.Tx},
		{bench.FloorHTTP, floorLoad, &floors.HTTP},
		{bench.FloorDB, floorLoad, &floors.DB},
	} {
		if !wanted(f.name) {
			continue
		}
		if f.name != bench.FloorHTTP && (tgt.store == nil || o.dbURL == "") {
			logf("%s: skipped (no --database-url)", f.name)
			continue
		}
		if *f.dst, err = measure(nil, f.name, "", f.load, false); err != nil {
			return rep, err
		}
	}
	profiled := false
	for _, name := range o.scenarios {
		if bench.IsFloor(name) {
			continue
		}
		profile := (o.cpuprofile != "" || o.memprofile != "" || o.trace != "") && !profiled && (name == bench.CreatePayment || len(o.scenarios) == 1)
		profiled = profiled || profile
		load := o.load
		if name == bench.WebhookDrain && o.drainRate > 0 {
			load.Rate = o.drainRate
		}
		if name == bench.WebhookDrain && o.drainDuration > 0 {
			load.Duration = o.drainDuration
		}
		if name == bench.CreatePayment && o.targetCheck && load.Rate == 0 {
			err = saturateThenOpen(nil, name, "", load, profile)
		} else {
			_, err = measure(nil, name, "", load, profile)
		}
		if err != nil {
			return rep, err
		}
	}
	if o.big > 0 {
		if err := runBig(ctx, o, tgt, newEnv, measure, saturateThenOpen, logf); err != nil {
			return rep, err
		}
	}

	// The disk's and the CPUs' floors again at the end. This machine's
	// disk and CPUs are shared, and how fast they are moves from one hour
	// to the next (floor-fsync 973 to 5,124 fdatasync/s, floor-http 24,652
	// to 48,646 req/s, on one machine within two days): the ratios stay to
	// the first measures, and the second tells how far the machine moved
	// while the scenarios ran.
	scenarios := slices.ContainsFunc(rep.Results, func(r *bench.Result) bool { return !bench.IsFloor(r.Scenario) })
	for _, f := range []struct {
		first *bench.Result
		load  bench.Load
	}{{floors.Fsync, physical}, {floors.HTTP, floorLoad}} {
		if f.first == nil || !scenarios {
			continue
		}
		r, err := measure(nil, f.first.Scenario, bench.AgainName(f.first.Scenario), f.load, false)
		if err != nil {
			return rep, err
		}
		r.Extra = map[string]any{"since the first measure": rep.Drift(f.first.Scenario)}
	}

	rep.Ledger = ledgerCheck(ctx, tgt.app)
	if rep.Ledger.Ran {
		logf("ledger check: %d problems", rep.Ledger.Problems)
	}
	rep.Checks = bench.Aims(rep, o.big)
	return rep, nil
}

// runBig seeds o.big payments in bulk for a merchant of their own, then
// measures create-payment, status and list for that merchant: the cost of
// a big database.
func runBig(ctx context.Context, o benchOptions, tgt *benchTarget, newEnv func(string) (*bench.Env, error),
	measure func(*bench.Env, string, string, bench.Load, bool) (*bench.Result, error),
	saturateThenOpen func(*bench.Env, string, string, bench.Load, bool) error, logf func(string, ...any)) error {
	seeder, ok := tgt.store.(xaalis.BulkSeeder)
	if !ok || tgt.app == nil {
		logf("big: skipped (the bench needs the database, --database-url, to seed it)")
		return nil
	}
	env, err := newEnv("big")
	if err != nil {
		return err
	}
	// The seeded payments are priced as the configuration prices a
	// 1 000 XOF payment through channel_a, and spread over the past year
	// up to yesterday.
	amount := xaalis.Amount{Minor: 100000, Currency: xaalis.XOF}
	fee := tgt.app.PaymentFee("channel_a", "SN", amount)
	to := xaalis.Day(time.Now())
	logf("big: seeding %d payments in bulk", o.big)
	t0 := time.Now()
	sample, err := seeder.SeedPayments(ctx, xaalis.SeedSpec{MerchantID: env.MerchantID, Mode: xaalis.ModeTest, N: o.big,
		Amount: amount, Fee: fee, Provider: "channel_a", Country: "SN", From: to.AddDate(-1, 0, 0), To: to, Sample: 10000,
		BaseURL: tgt.app.BaseURL, Expiry: time.Duration(tgt.app.Config.PaymentExpirySeconds) * time.Second})
	if err != nil {
		return fmt.Errorf("big: seed: %w", err)
	}
	logf("big: seeded %d payments in %s", o.big, time.Since(t0).Round(100*time.Millisecond))
	env.Existing = sample
	load := o.load
	load.Rate = 0
	if o.bigDuration > 0 {
		load.Duration = o.bigDuration
	}
	if _, err := measure(env, bench.CreatePayment, bench.BigName(bench.CreatePayment, o.big), load, false); err != nil {
		return err
	}
	for _, s := range []string{bench.Status, bench.List} {
		if err := saturateThenOpen(env, s, bench.BigName(s, o.big), load, false); err != nil {
			return err
		}
	}
	return nil
}

// walReporter is a store on PostgreSQL: the WAL it wrote during a
// scenario is the cluster's WAL position moved.
type walReporter interface {
	WALPosition(ctx context.Context) (int64, error)
}

// localSample reads the counters of a store of this process; its CPU is
// the process's, measured with the generator's.
func localSample(store xaalis.Store) func(context.Context) (serverSample, error) {
	st, ok := store.(xaalis.StatsReporter)
	if !ok {
		return nil
	}
	return func(context.Context) (serverSample, error) { return serverSample{stats: st.Stats()}, nil }
}

// serverCPU adds the CPU of a server in its own process to r's: the
// process columns then count both processes, and CPUServer tells the
// server's share. The garbage collector's and the scheduler's notes would be the
// generator's alone, not the server's: they are left out.
func serverCPU(r *bench.Result, cpu, wall time.Duration) {
	if wall <= 0 {
		return
	}
	r.CPUServer = cpu.Seconds() / wall.Seconds()
	r.CPUProcess += r.CPUServer
	r.GC, r.Sched = nil, nil
}

// ledgerCheck runs App.LedgerCheck.
func ledgerCheck(ctx context.Context, app *xaalis.App) bench.LedgerCheck {
	if app == nil {
		return bench.LedgerCheck{Skipped: "no --database-url"}
	}
	// Payouts and notifications may still settle for a moment; the check
	// reads committed state, which is consistent at every commit anyway.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	ps, err := app.LedgerCheck(lctx)
	if err != nil {
		return bench.LedgerCheck{Ran: true, Problems: 1, Details: []string{"the check failed: " + err.Error()}}
	}
	out := bench.LedgerCheck{Ran: true, Problems: len(ps)}
	for i, p := range ps {
		if i == 20 {
			out.Details = append(out.Details, fmt.Sprintf("... and %d more", len(ps)-i))
			break
		}
		out.Details = append(out.Details, p.String())
	}
	return out
}

// benchConfig is the business configuration of the in-process server:
// the embedded defaults (or --config) with every volume limit raised out
// of reach, so that limits are checked on every payment, as in
// production, but never refuse one.
//
// off sets them to 0 instead: no limit, so the volume queries behind them
// do not run (what create-payment would cost if volumes were kept as
// counters rather than summed).
func benchConfig(path string, off bool) (*xaalis.Config, error) {
	c, err := xaalis.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	var huge int64 = 1 << 50
	if off {
		huge = 0
	}
	for name, p := range c.Providers {
		p.DailyLimit = huge
		c.Providers[name] = p
	}
	c.MerchantLimits.Daily, c.MerchantLimits.Monthly = huge, huge
	for i := range c.BCEAO.Tiers {
		c.BCEAO.Tiers[i].Ceiling = huge
	}
	return c, nil
}

// startInProcess runs what `xaalis serve` runs (newStack: the App with
// its configuration and gateway, the API and operator handlers with their
// metrics, the instance, the background work and the webhook dispatcher)
// over the bench's database, on 127.0.0.1:0 with serve's listener
// settings. Rate limits and the idempotency quota are raised out of reach
// (they still run); with short, webhook retries come within a run.
func startInProcess(ctx context.Context, o benchOptions, short bool) (*benchTarget, error) {
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: o.logLevel}))
	business, err := benchConfig(o.configPath, o.limitsOff)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, o.dbURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	cfg := xhttp.DefaultConfig()
	cfg.RateLimit, cfg.RateBurst, cfg.IdempotencyQuota = 1e9, 1<<30, 1<<30
	retry := 1.0
	if short {
		retry = bench.RetryScale
	}
	// The drain's receivers are on loopback over http.
	st, err := newStack(ctx, store, stackOptions{Business: business, InsecureHooks: true, HTTP: cfg, Log: log,
		Heartbeat: xaalis.DefaultHeartbeat, HookTimeout: 15 * time.Second, RetryScale: retry, DispatchEvery: o.dispatchEvery,
		JobEvery: 5 * time.Second, LedgerEvery: 0})
	if err != nil {
		store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.stop(ctx)
		store.Close()
		return nil, err
	}
	srv := xhttp.NewHTTPServer(st.api, log, xhttp.DefaultTimeouts(), nil)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	st.app.BaseURL = "http://localhost:" + port
	go func() { _ = srv.Serve(ln) }()
	st.start(ctx)
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		st.stop(ctx)
		return errors.Join(err, store.Close())
	}
	return &benchTarget{base: "http://" + ln.Addr().String(), store: store, app: st.app, stop: stop, sample: localSample(store)}, nil
}

// attachTarget points at a running server; with its --database-url the
// bench makes its own merchants there (as `xaalis merchant create` does)
// and checks the ledger at the end.
func attachTarget(ctx context.Context, o benchOptions) (*benchTarget, error) {
	t := &benchTarget{base: o.target, stop: func() error { return nil }}
	if o.dbURL != "" {
		store, err := openStore(ctx, o.dbURL)
		if err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		t.store, t.app, t.stop = store, xaalis.NewApp(store), store.Close
	}
	return t, nil
}

// freshSchema creates a schema for this run in the database of url and
// returns url with it as search_path, and a function that drops it.
func freshSchema(ctx context.Context, base string) (string, func() error, error) {
	schema := "xaalis_bench_" + randomHex(6)
	ident := pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.Connect(ctx, withoutPoolParams(base))
	if err != nil {
		return "", nil, fmt.Errorf("connect to create a schema: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+ident); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() error {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(dctx, withoutPoolParams(base))
		if err != nil {
			return err
		}
		defer c.Close(dctx)
		_, err = c.Exec(dctx, `DROP SCHEMA `+ident+` CASCADE`)
		return err
	}
	return u.String(), drop, nil
}

// withoutPoolParams drops pgxpool's own parameters (pool_max_conns, ...)
// from a URL, for a single pgx connection that would send them to the
// server as run-time parameters.
func withoutPoolParams(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dbInfo reads the database's version and durability settings.
func dbInfo(ctx context.Context, dbURL string, store xaalis.Store) bench.DBInfo {
	if isPostgres(dbURL) {
		info := bench.DBInfo{Kind: "postgres", Settings: map[string]string{}}
		conn, err := pgx.Connect(ctx, withoutPoolParams(dbURL))
		if err != nil {
			return info
		}
		defer conn.Close(ctx)
		_ = conn.QueryRow(ctx, `SHOW server_version`).Scan(&info.Version)
		info.Version = "PostgreSQL " + info.Version
		for _, s := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers", "max_connections"} {
			var v string
			if conn.QueryRow(ctx, "SHOW "+s).Scan(&v) == nil {
				info.Settings[s] = v
			}
		}
		info.Settings["pool"] = fmt.Sprintf("the store's default: at most %d connections", postgres.DefaultMaxConns)
		if u, err := url.Parse(dbURL); err == nil && u.Query().Get("pool_max_conns") != "" {
			info.Settings["pool"] = "pool_max_conns=" + u.Query().Get("pool_max_conns")
		}
		return info
	}
	info := bench.DBInfo{Kind: "sqlite", Settings: map[string]string{}}
	if p, ok := store.(interface {
		Pragmas(context.Context) map[string]string
	}); ok {
		for k, v := range p.Pragmas(ctx) {
			info.Settings[k] = v
		}
	}
	switch info.Settings["synchronous"] {
	case "2":
		info.Settings["synchronous"] = "2 (FULL)"
	case "1":
		// The writer's COMMIT does not wait for the disk; its syncer
		// fdatasyncs the WAL before any answer (internal/sqlite/syncer.go).
		info.Settings["synchronous"] = "1 (NORMAL, the WAL fdatasynced before every answer)"
	}
	if path, err := sqlite.ParseURL(dbURL); err == nil {
		if d, err := sql.Open("sqlite", "file:"+path+"?mode=ro"); err == nil {
			_ = d.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&info.Version)
			d.Close()
		}
	}
	info.Version = "SQLite " + info.Version + " (modernc.org/sqlite)"
	return info
}

// machineInfo describes this machine.
func machineInfo() bench.Machine {
	m := bench.Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				m.MemoryMiB = kb / 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// describeOptions renders the run's options as flags, without secrets.
func describeOptions(o benchOptions) string {
	parts := []string{"--scenario " + strings.Join(o.scenarios, ",")}
	if o.load.Rate > 0 {
		parts = append(parts, fmt.Sprintf("--rate %g", o.load.Rate))
	}
	parts = append(parts, fmt.Sprintf("--concurrency %d --duration %s --warmup %s", o.load.Concurrency, o.load.Duration, o.load.Warmup))
	if o.load.MaxRequests > 0 {
		parts = append(parts, fmt.Sprintf("--max-requests %d", o.load.MaxRequests))
	}
	if o.limitsOff {
		parts = append(parts, "--limits off")
	}
	for _, s := range o.scenarios {
		if s == bench.WebhookDrain {
			parts = append(parts, fmt.Sprintf("--drain-rate %g --drain-timeout %s", o.drainRate, o.drainTimeout))
			if o.drainDuration > 0 {
				parts = append(parts, fmt.Sprintf("--drain-duration %s", o.drainDuration))
			}
		}
	}
	if o.target != "" {
		parts = append(parts, "--target "+o.target)
	}
	if o.serverProcess {
		parts = append(parts, "--server-process")
	}
	switch {
	case o.freshDB:
		parts = append(parts, "(fresh SQLite database)")
	case isPostgres(o.dbURL):
		parts = append(parts, "--database-url postgres://…")
	case o.dbURL != "":
		parts = append(parts, "--database-url "+o.dbURL)
	}
	return strings.Join(parts, " ")
}

// writeAllocs writes what was allocated since a's Start to the file path.
func writeAllocs(a *bench.AllocProfile, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("allocation profile: %w", err)
	}
	if err := a.Stop(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("allocation profile: %w", err)
	}
	return nil
}
