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
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/xaalis/xaalis/api"
	"github.com/xaalis/xaalis/internal/bench"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// The aim for create-payment: at least this share of the DB
// floor, with a p99 under this many milliseconds.
const (
	targetRatio = 0.7
	targetP99   = 25.0
)

// benchOptions are the flags of `xaalis bench`.
type benchOptions struct {
	scenarios     []string
	dbURL         string
	freshDB       bool // dbURL is a temporary SQLite file of this run
	target        string
	apiKey        string
	load          bench.Load
	seed          int
	drainTimeout  time.Duration
	drainRate     float64
	dispatchEvery time.Duration
	cpuprofile    string
	freshSchema   bool
	floors        bool
	targetCheck   bool
	configPath    string
	limitsOff     bool
	logLevel      slog.Level
	format        string // text, json, markdown
	out           string
}

func cmdBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	scenario := fs.String("scenario", bench.CreatePayment, "scenario: "+strings.Join(bench.All, ", ")+", or all")
	db := fs.String("database-url", "", "database URL: sqlite://PATH or postgres://... (default: a fresh SQLite database in a temporary directory)")
	target := fs.String("target", "", "URL of a running server on loopback to drive instead of starting one (localhost, 127.0.0.0/8, ::1 only)")
	apiKey := fs.String("api-key", getenv("XAALIS_BENCH_API_KEY"), "with --target and no --database-url: the secret test key to use (env XAALIS_BENCH_API_KEY)")
	rate := fs.Float64("rate", 0, "open loop: requests a second, latency measured from each request's intended send time")
	conc := fs.Int("concurrency", 16, "closed loop: requests in flight (and the floors' concurrency)")
	duration := fs.Duration("duration", 10*time.Second, "measured time per scenario")
	maxReq := fs.Int64("max-requests", 0, "stop a scenario after this many requests (0: no limit but --duration)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured load before each scenario")
	seed := fs.Int("seed", 1000, "payments created before status and mixed")
	drain := fs.Duration("drain-timeout", 60*time.Second, "webhook-drain: how long to wait for every event's delivery after producing")
	drainRate := fs.Float64("drain-rate", 100, "webhook-drain: events produced a second, open loop (0: --rate or --concurrency like the other scenarios)")
	dispatch := fs.Duration("dispatch-interval", time.Second, "in-process server: how often the webhook dispatcher polls (serve's is 1s)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured phase of create-payment (or of the one scenario run) to FILE")
	freshSchema := fs.Bool("fresh-schema", false, "PostgreSQL: run in a new schema, dropped afterwards")
	floors := fs.Bool("floors", true, "measure the HTTP and DB floors first, for the ratios")
	targetCheck := fs.Bool("target-check", true, fmt.Sprintf("after create-payment, drive it open loop at %.1f × the DB floor and check p99 < %.0f ms", targetRatio, targetP99))
	configPath := fs.String("config", "", "in-process server: business configuration file (limits are raised either way)")
	limits := fs.String("limits", "raised", "in-process server: volume limits 'raised' (checked on every payment, never reached) or 'off' (not checked: no volume queries)")
	logLevel := fs.String("server-log-level", "info", "in-process server: log level (logs are formatted, then discarded)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	asMarkdown := fs.Bool("markdown", false, "print the results as a Markdown table")
	out := fs.String("out", "", "write the results to FILE instead of standard output")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("bench: unexpected argument %q", fs.Arg(0))
	}
	o := benchOptions{dbURL: *db, target: *target, apiKey: *apiKey, seed: *seed, drainTimeout: *drain, drainRate: *drainRate,
		dispatchEvery: *dispatch, cpuprofile: *cpuprofile, freshSchema: *freshSchema, floors: *floors,
		targetCheck: *targetCheck, configPath: *configPath, out: *out, format: "text"}
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
	case *rate < 0, *drainRate < 0, *conc < 1, *duration <= 0, *maxReq < 0, *warmup < 0, *seed < 1, *drain < 0, *dispatch <= 0:
		return usagef("bench: --rate, --max-requests and --warmup must be at least 0; --concurrency, --duration, --seed and --dispatch-interval positive")
	case *duration > time.Hour:
		return usagef("bench: --duration is at most 1h")
	}
	switch *limits {
	case "raised":
	case "off":
		o.limitsOff = true
	default:
		return usagef("bench: --limits is raised or off")
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

	rep := &bench.Report{Machine: machineInfo(), Command: "xaalis bench " + describeOptions(o)}
	drains := false
	for _, s := range o.scenarios {
		drains = drains || s == bench.WebhookDrain
	}

	var tgt *benchTarget
	var err error
	if o.target == "" {
		tgt, err = startInProcess(ctx, o, drains)
	} else {
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
	newEnv := func(name string) (*bench.Env, error) {
		env := &bench.Env{RunID: runID + "-" + name, Load: o.load, Seed: o.seed, DrainTimeout: o.drainTimeout, Progress: progress,
			API: &bench.API{Base: tgt.base, Client: client, Secret: o.apiKey}, Store: tgt.store}
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

	var httpFloor, dbFloor *bench.Result
	run := func(name string, load bench.Load, profile bool) (*bench.Result, error) {
		env, err := newEnv(name)
		if err != nil {
			return nil, err
		}
		env.Load = load
		logf("%s: preparing (%s)", name, load.Describe())
		p, err := bench.Prepare(ctx, name, env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if p.Close != nil {
			defer p.Close()
		}
		var profErr error
		stopProfile := func() {}
		var cpu bench.CPUMeter
		load.OnMeasure = func() {
			if p.OnMeasure != nil {
				p.OnMeasure()
			}
			cpu.Start()
			if profile {
				f, err := os.Create(o.cpuprofile)
				if err != nil {
					profErr = err
					return
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					profErr = err
					return
				}
				stopProfile = func() { pprof.StopCPUProfile(); profErr = f.Close() }
			}
		}
		logf("%s: measuring for %s", name, load.Duration)
		r := bench.Run(ctx, load, p.Op)
		r.CPUProcess, r.CPUMachine = cpu.Stop()
		stopProfile()
		if profErr != nil {
			return nil, fmt.Errorf("cpu profile: %w", profErr)
		}
		r.Scenario, r.Backend, r.Notes = name, rep.Backend, append(r.Notes, p.Notes...)
		if p.After != nil {
			if err := p.After(ctx, r); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		if profile {
			r.Notes = append(r.Notes, "CPU profile of the measured phase: "+o.cpuprofile)
		}
		if name == bench.WebhookDrain && o.target == "" {
			r.Notes = append(r.Notes, fmt.Sprintf("the dispatcher polls every %s (serve's interval) and retries on webhook.Schedule ÷ 600 "+
				"(%s, ...), so that failed attempts are retried within the run", o.dispatchEvery, strings.Trim(fmt.Sprint(bench.ShortSchedule()[:4]), "[]")))
		}
		if !bench.IsFloor(name) {
			r.SetRatios(httpFloor, dbFloor)
			if o.limitsOff {
				r.Notes = append(r.Notes, "--limits off: merchant, provider and BCEAO volume limits are 0 (none), so no volume query runs")
			}
		}
		logf("%s: %.0f ok/s, p50 %.2f ms, p99 %.2f ms, errors %d", name, r.Throughput, r.Latency.P50, r.Latency.P99, r.Requests-r.OK)
		rep.Results = append(rep.Results, r)
		return r, ctx.Err()
	}

	// Floors: always closed loop at --concurrency, so that every scenario
	// is compared with what the machine does at that concurrency.
	floorLoad := o.load
	floorLoad.Rate = 0
	wantFloor := func(name string) bool {
		for _, s := range o.scenarios {
			if s == name {
				return true
			}
		}
		return o.floors
	}
	if wantFloor(bench.FloorHTTP) {
		if httpFloor, err = run(bench.FloorHTTP, floorLoad, false); err != nil {
			return rep, err
		}
	}
	if wantFloor(bench.FloorDB) {
		if tgt.store == nil {
			logf("floor-db: skipped (no --database-url)")
		} else if dbFloor, err = run(bench.FloorDB, floorLoad, false); err != nil {
			return rep, err
		}
	}
	profiled := false
	for _, name := range o.scenarios {
		if bench.IsFloor(name) {
			continue
		}
		profile := o.cpuprofile != "" && !profiled && (name == bench.CreatePayment || len(o.scenarios) == 1)
		profiled = profiled || profile
		load := o.load
		if name == bench.WebhookDrain && o.drainRate > 0 {
			load.Rate = o.drainRate
		}
		cp, err := run(name, load, profile)
		if err != nil {
			return rep, err
		}
		if name == bench.CreatePayment && o.targetCheck && dbFloor != nil && o.load.Rate == 0 {
			// Offer 0.7 × the DB floor open loop. When saturation is below
			// that already, the aim is missed on throughput, and offering it
			// would only measure a growing queue: offer 0.7 × create-payment's
			// own saturation instead, for its latency at a load it sustains.
			frac, base, label := targetRatio, dbFloor.Throughput, "db-floor"
			if cp.Throughput < targetRatio*dbFloor.Throughput {
				base, label = cp.Throughput, "own-max"
			}
			load := o.load
			load.Rate, load.Concurrency = frac*base, 0
			open, err := run(bench.CreatePayment, load, false)
			if err != nil {
				return rep, err
			}
			open.Scenario = fmt.Sprintf("%s@%.1f×%s", bench.CreatePayment, frac, label)
			rep.Target = targetVerdict(cp, open, dbFloor, load.Rate, label)
		}
	}

	rep.Ledger = ledgerCheck(ctx, tgt.app)
	if rep.Ledger.Ran {
		logf("ledger check: %d problems", rep.Ledger.Problems)
	}
	return rep, nil
}

// targetVerdict judges create-payment against the aim: sustain
// 0.7 × the DB floor with a p99 under 25 ms. open was offered rate, 0.7 ×
// the DB floor ("db-floor") or 0.7 × create-payment's own saturation
// ("own-max") when that is below the aim already.
func targetVerdict(closed, open, floor *bench.Result, rate float64, label string) *bench.TargetCheck {
	closedRatio := closed.Throughput / floor.Throughput
	t := &bench.TargetCheck{Scenario: bench.CreatePayment, WantRatio: targetRatio, WantP99: targetP99,
		RatioDB: closedRatio, P99: open.Latency.P99}
	keptUp := open.Requests > 0 && open.OK == open.Requests && open.Throughput >= 0.95*rate
	sat := fmt.Sprintf("at saturation (closed loop, %d concurrent) %.0f ok/s = %.2f × the db floor of %.0f ok/s, p99 %.1f ms",
		closed.Concurrency, closed.Throughput, closedRatio, floor.Throughput, closed.Latency.P99)
	if label == "own-max" {
		t.Explanation = fmt.Sprintf("not met: %s, below %.1f × floor; offered %.0f req/s open loop (%.1f × its own saturation) "+
			"it completed %.0f ok/s with p99 %.1f ms", sat, targetRatio, rate, targetRatio, open.Throughput, open.Latency.P99)
		return t
	}
	t.RatioDB = open.Throughput / floor.Throughput
	t.Met = keptUp && open.Latency.P99 < targetP99
	verdict := "met"
	if !t.Met {
		verdict = "not met"
	}
	t.Explanation = fmt.Sprintf("%s: offered %.0f req/s open loop (%.1f × db floor), it completed %.0f ok/s (%.2f × floor) "+
		"with p99 %.1f ms; %s", verdict, rate, targetRatio, open.Throughput, t.RatioDB, open.Latency.P99, sat)
	return t
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

// startInProcess builds the stack `xaalis serve` runs, on 127.0.0.1:0:
// store, App with configuration and gateway, the HTTP API with its
// metrics, the background jobs and the webhook dispatcher. Rate limits and
// the idempotency quota are raised out of reach (they still run).
func startInProcess(ctx context.Context, o benchOptions, shortSchedule bool) (*benchTarget, error) {
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: o.logLevel}))
	business, err := benchConfig(o.configPath, o.limitsOff)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, o.dbURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	policy := &webhook.Policy{AllowInsecure: true, AllowUnresolved: true}
	app := xaalis.NewApp(store)
	app.CheckWebhookURL = policy.Check
	app.Config = business
	app.Gateway = provider.New(business, provider.Options{
		Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			if _, err := app.ApplyNotification(ctx, xaalis.ModeTest, n); err != nil {
				log.Error("apply simulator notification", "provider", n.Provider, "error", err)
			}
		},
	})
	cfg := xhttp.DefaultConfig()
	cfg.RateLimit, cfg.RateBurst, cfg.IdempotencyQuota = 1e9, 1<<30, 1<<30
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	handler := xhttp.NewServer(app, log, cfg, api.OpenAPI, reg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		return nil, err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	app.BaseURL = "http://localhost:" + port
	go func() { _ = srv.Serve(ln) }()

	// The retry schedule is set before the dispatcher starts and restored
	// after it stops, so no goroutine reads it while it changes.
	saved := webhook.Schedule
	if shortSchedule {
		webhook.Schedule = bench.ShortSchedule()
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	const hookTimeout = 15 * time.Second
	dispatcher := &webhook.Dispatcher{Store: store, Policy: policy, Sender: &webhook.Sender{Client: policy.Client(hookTimeout)},
		Now: app.Now, NewID: app.NewID, Logger: log, Timeout: hookTimeout}
	wg.Add(3)
	go func() { defer wg.Done(); purgeIdempotency(bg, app, log) }()
	go func() { defer wg.Done(); runJobs(bg, app, log, 5*time.Second) }()
	go func() { defer wg.Done(); dispatcher.Run(bg, o.dispatchEvery) }()

	stop := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		stopBG()
		wg.Wait()
		webhook.Schedule = saved
		return errors.Join(err, store.Close())
	}
	return &benchTarget{base: "http://" + ln.Addr().String(), store: store, app: app, stop: stop}, nil
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
		info.Settings["pool"] = fmt.Sprintf("pgxpool default: at most max(4, NumCPU) = %d connections", max(4, runtime.NumCPU()))
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
	if info.Settings["synchronous"] == "2" {
		info.Settings["synchronous"] = "2 (FULL)"
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
		}
	}
	if o.target != "" {
		parts = append(parts, "--target "+o.target)
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
