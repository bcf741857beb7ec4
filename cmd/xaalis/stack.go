package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xaalis/xaalis/api"
	"github.com/xaalis/xaalis/internal/console"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/metrics"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// stackOptions configure what `xaalis serve` runs over a store. `xaalis
// bench` builds its in-process server with the same constructor, so that
// it measures what serve runs.
type stackOptions struct {
	Business *xaalis.Config
	// LiveOnly makes an installation without test mode.
	LiveOnly bool
	// InsecureHooks allows http and loopback webhook URLs (development).
	InsecureHooks bool
	HTTP          xhttp.Config
	Log           *slog.Logger
	// Heartbeat is how often the instance records that it lives.
	Heartbeat time.Duration
	// HookTimeout bounds a webhook receiver's answer; RetryScale shrinks
	// the retry schedule (1: the documented one); DispatchEvery is the
	// dispatcher's fallback poll.
	HookTimeout   time.Duration
	RetryScale    float64
	DispatchEvery time.Duration
	// JobEvery is how often expiry and reconciliation run; LedgerEvery
	// how often the ledger check does (0: never).
	JobEvery    time.Duration
	LedgerEvery time.Duration
	// SecureCookies marks the console's cookies Secure.
	SecureCookies bool
	// Pprof serves the runtime's profiles on the admin listener.
	Pprof bool
}

// stack is the application over one store: the App with its gateway, the
// API and operator handlers with their metrics, this process's instance,
// and the background work.
type stack struct {
	app   *xaalis.App
	store xaalis.Store
	log   *slog.Logger
	api   *xhttp.Server
	admin http.Handler
	opts  stackOptions

	inst       *xaalis.InstanceRun
	dispatcher *webhook.Dispatcher
	stopBG     context.CancelFunc
	wg         sync.WaitGroup
}

// newStack builds the stack over store and records this process as an
// instance in the database (stop removes it). Errors: the database's.
func newStack(ctx context.Context, store xaalis.Store, o stackOptions) (*stack, error) {
	log := o.Log
	policy := &webhook.Policy{AllowInsecure: o.InsecureHooks, AllowUnresolved: true}
	app := xaalis.NewApp(store)
	app.LiveOnly = o.LiveOnly
	app.CheckWebhookURL = policy.Check
	app.Config = o.Business
	// The registry of /metrics on the admin listener: the Go and process
	// collectors, the API's request series, the providers' requests (this
	// process's), the store's statements and commits (this process's),
	// and the business series read from the database at scrape time
	// (internal/metrics).
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&metrics.Collector{App: app, Logger: log})
	if st, ok := store.(xaalis.StatsReporter); ok {
		reg.MustRegister(&metrics.Store{Stats: st})
	}
	app.Gateway = provider.New(o.Business, provider.Options{
		Logger:   log,
		Observer: metrics.NewProvider(reg),
		// Simulated providers notify in-process, as real ones post to
		// /v1/providers/{provider}/notifications.
		Notify: func(ctx context.Context, n xaalis.Notification) {
			if _, err := app.ApplyNotification(ctx, xaalis.ModeTest, n); err != nil {
				log.Error("apply simulator notification", "provider", n.Provider, "error", err)
			}
		},
	})
	// This process in the database: Idempotency-Keys its requests claim are
	// its own, and a restart takes over those of a dead predecessor at once.
	host, _ := os.Hostname()
	inst, err := app.StartInstance(ctx, xaalis.InstanceOptions{Host: host, PID: os.Getpid(), Process: processID,
		Heartbeat: o.Heartbeat, Alive: processAlive, Logger: log})
	if err != nil {
		return nil, err
	}
	s := &stack{app: app, store: store, log: log, opts: o, inst: inst}
	s.api = xhttp.NewServer(app, log, o.HTTP, api.OpenAPI, reg)
	// A scrape whose database reads fail still serves the process's
	// series; the failure is logged.
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
	s.admin = xhttp.NewAdmin(app, log, s.api, metricsHandler, xhttp.AdminOptions{Console: console.Options{SecureCookies: o.SecureCookies}, Pprof: o.Pprof})
	s.dispatcher = &webhook.Dispatcher{Store: store, Policy: policy, Sender: &webhook.Sender{Client: policy.Client(o.HookTimeout)},
		Now: app.Now, NewID: app.NewID, Logger: log, Timeout: o.HookTimeout, Wake: store.Subscribe(xaalis.WakeDeliveries),
		RetryScale: o.RetryScale}
	return s, nil
}

// start runs the background work until stop: the replay counter's flush,
// the idempotency purge, the ledger check and housekeeping, the jobs, and
// the webhook dispatcher (every process claims due deliveries from the
// outbox in the database, so several may run together).
func (s *stack) start(ctx context.Context) {
	if s.opts.RetryScale != 1 {
		s.log.Warn("--webhook-retry-scale: webhook retries do not follow the documented schedule; testing only", "scale", s.opts.RetryScale)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopBG = stop
	app, log := s.app, s.log
	s.wg.Add(5)
	go func() { defer s.wg.Done(); flushReplays(bg, app, log) }()
	go func() { defer s.wg.Done(); purgeIdempotency(bg, app, log) }()
	go func() { defer s.wg.Done(); maintain(bg, app, log, s.opts.LedgerEvery) }()
	go func() { defer s.wg.Done(); runJobs(bg, app, log, s.opts.JobEvery) }()
	go func() { defer s.wg.Done(); s.dispatcher.Run(bg, s.opts.DispatchEvery) }()
}

// stop ends the background work, then removes this instance's row (and
// with it any claim a request left): call it once every request has
// finished.
func (s *stack) stop(ctx context.Context) {
	if s.stopBG != nil {
		s.stopBG()
		s.wg.Wait()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.inst.Stop(ctx); err != nil {
		s.log.Warn("instance shutdown", "error", err)
	}
}
