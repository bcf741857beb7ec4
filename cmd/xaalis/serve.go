package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	def := xhttp.DefaultConfig()
	addr := fs.String("addr", envOr(getenv, "XAALIS_ADDR", ":8080"), "API listen address (env XAALIS_ADDR)")
	adminAddr := fs.String("admin-addr", envOr(getenv, "XAALIS_ADMIN_ADDR", "127.0.0.1:8081"), "operator listen address: health and metrics (env XAALIS_ADMIN_ADDR)")
	db := databaseFlag(fs, getenv)
	testModeDef, err := boolEnv(getenv, "XAALIS_TEST_MODE", true)
	if err != nil {
		return err
	}
	testMode := fs.Bool("test-mode", testModeDef, "accept test keys; false makes a live-only installation (env XAALIS_TEST_MODE)")
	tlsCert := fs.String("tls-cert", getenv("XAALIS_TLS_CERT"), "TLS certificate file: serve HTTPS, TLS 1.2 at least (env XAALIS_TLS_CERT)")
	tlsKey := fs.String("tls-key", getenv("XAALIS_TLS_KEY"), "TLS key file (env XAALIS_TLS_KEY)")
	rateLimitDef, err := envFloat(getenv, "XAALIS_RATE_LIMIT", def.RateLimit)
	if err != nil {
		return err
	}
	rateBurstDef, err := envInt(getenv, "XAALIS_RATE_BURST", def.RateBurst)
	if err != nil {
		return err
	}
	quotaDef, err := envInt(getenv, "XAALIS_IDEMPOTENCY_QUOTA", def.IdempotencyQuota)
	if err != nil {
		return err
	}
	rateLimit := fs.Float64("rate-limit", rateLimitDef, "requests a second per API key (env XAALIS_RATE_LIMIT)")
	rateBurst := fs.Int("rate-burst", rateBurstDef, "burst per API key (env XAALIS_RATE_BURST)")
	quota := fs.Int("idempotency-quota", quotaDef, "new Idempotency-Keys per merchant and mode an hour; 0: no quota (env XAALIS_IDEMPOTENCY_QUOTA)")
	logLevel := fs.String("log-level", envOr(getenv, "XAALIS_LOG_LEVEL", "info"), "debug, info, warn or error (env XAALIS_LOG_LEVEL)")
	configPath := fs.String("config", getenv("XAALIS_CONFIG"), "business configuration file (JSON); empty: the embedded defaults (env XAALIS_CONFIG)")
	publicURL := fs.String("public-url", getenv("XAALIS_PUBLIC_URL"), "public base URL of the API, for payment URLs and provider notifications (env XAALIS_PUBLIC_URL; default http://localhost:PORT)")
	jobEvery := fs.Duration("jobs-interval", 5*time.Second, "how often expiry and reconciliation run")
	insecureDef, err := boolEnv(getenv, "XAALIS_INSECURE_WEBHOOKS", false)
	if err != nil {
		return err
	}
	insecureHooks := fs.Bool("insecure-webhooks", insecureDef, "DEVELOPMENT ONLY: allow http and loopback webhook URLs (env XAALIS_INSECURE_WEBHOOKS)")
	hookTimeout := fs.Duration("webhook-timeout", 15*time.Second, "how long a webhook receiver may take to answer")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	if *rateLimit <= 0 || *rateBurst < 1 || *quota < 0 {
		return usagef("serve: --rate-limit and --rate-burst must be positive, --idempotency-quota at least 0")
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("serve: --tls-cert and --tls-key go together")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if *tlsCert != "" {
		// Load the pair first: a bad certificate stops serve before it
		// touches the database or prints a listening line.
		pair, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	business, err := xaalis.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, *db)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	if *insecureHooks {
		log.Warn("--insecure-webhooks: webhook URLs may be http and loopback; never use this in production")
	}
	policy := &webhook.Policy{AllowInsecure: *insecureHooks, AllowUnresolved: true}
	app := xaalis.NewApp(store)
	app.LiveOnly = !*testMode
	app.CheckWebhookURL = policy.Check
	app.Config = business
	app.Gateway = provider.New(business, provider.Options{
		Logger: log,
		// Simulated providers notify in-process, as real ones post to
		// /v1/providers/{provider}/notifications.
		Notify: func(ctx context.Context, n xaalis.Notification) {
			if _, err := app.ApplyNotification(ctx, xaalis.ModeTest, n); err != nil {
				log.Error("apply simulator notification", "provider", n.Provider, "error", err)
			}
		},
	})

	if *testMode {
		demo, err := app.EnsureDemoMerchant(ctx)
		if err != nil {
			return fmt.Errorf("create demo merchant: %w", err)
		}
		if demo != nil {
			fmt.Fprintf(stdout, "Demo merchant %s created (active, test mode). Its keys are shown once:\n", demo.Merchant.ID)
			fmt.Fprintf(stdout, "  secret test key:      %s\n", demo.Keys.SecretTest)
			fmt.Fprintf(stdout, "  publishable test key: %s\n", demo.Keys.PublishableTest)
		}
	} else {
		log.Info("live-only installation: test keys answer test_key_in_production")
	}

	cfg := def
	cfg.RateLimit, cfg.RateBurst, cfg.IdempotencyQuota = *rateLimit, *rateBurst, *quota
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api := xhttp.NewServer(app, log, cfg, api.OpenAPI, reg)

	apiLn, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	adminLn, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("listen admin %s: %w", *adminAddr, err)
	}
	apiSrv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}
	admin := xhttp.NewAdmin(app, log, api, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	adminSrv := &http.Server{Handler: admin, ReadHeaderTimeout: 10 * time.Second}

	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	app.BaseURL = *publicURL
	if app.BaseURL == "" {
		_, port, _ := net.SplitHostPort(apiLn.Addr().String())
		app.BaseURL = scheme + "://localhost:" + port
	}
	fmt.Fprintf(stdout, "Xaalis API listening on %s://%s (admin on http://%s)\n", scheme, apiLn.Addr(), adminLn.Addr())
	log.Info("listening", "addr", apiLn.Addr().String(), "admin_addr", adminLn.Addr().String(), "tls", *tlsCert != "")

	errc := make(chan error, 2)
	go func() {
		var err error
		if *tlsCert != "" {
			err = apiSrv.ServeTLS(apiLn, "", "")
		} else {
			err = apiSrv.Serve(apiLn)
		}
		errc <- err
	}()
	go func() { errc <- adminSrv.Serve(adminLn) }()

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	dispatcher := &webhook.Dispatcher{Store: store, Policy: policy, Sender: &webhook.Sender{Client: policy.Client(*hookTimeout)},
		Now: app.Now, NewID: app.NewID, Logger: log, Timeout: *hookTimeout}
	wg.Add(3)
	go func() { defer wg.Done(); purgeIdempotency(bg, app, log) }()
	go func() { defer wg.Done(); runJobs(bg, app, log, *jobEvery) }()
	// Webhook deliveries: every process claims due deliveries from the
	// outbox in the database, so several may run together.
	go func() { defer wg.Done(); dispatcher.Run(bg, time.Second) }()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing requests in flight")
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = errors.Join(apiSrv.Shutdown(shutdownCtx), adminSrv.Shutdown(shutdownCtx))
	stopBG()
	wg.Wait()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// purgeIdempotency deletes expired Idempotency-Keys every ten minutes.
func purgeIdempotency(ctx context.Context, app *xaalis.App, log *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		n, err := app.Store.PurgeIdempotency(ctx, app.Now())
		if err != nil && ctx.Err() == nil {
			log.Error("purge idempotency keys", "error", err)
		} else if n > 0 {
			log.Info("purged idempotency keys", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// envInt reads an integer environment variable; unset is def, malformed
// is a usage error rather than a silent default.
// runJobs expires payments past their expires_at, reconciles payments
// pending too long, and asks providers about payouts and refunds whose
// outcome is unknown. The work is read from the transactions themselves, so
// it survives restarts, and several processes may run it at once.
func runJobs(ctx context.Context, app *xaalis.App, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := app.ExpireDue(ctx, 200); err != nil && ctx.Err() == nil {
			log.Error("expire payments", "error", err)
		} else if n > 0 {
			log.Info("expired payments", "count", n)
		}
		if n, err := app.ReconcileDue(ctx, 100); err != nil && ctx.Err() == nil {
			log.Error("reconcile payments", "error", err)
		} else if n > 0 {
			log.Info("reconciled payments", "changed", n)
		}
		if n, err := app.ExpireDisputes(ctx, 100); err != nil && ctx.Err() == nil {
			log.Error("expire disputes", "error", err)
		} else if n > 0 {
			log.Info("disputes lost by deadline", "count", n)
		}
		if n, err := app.RenewDue(ctx, 100); err != nil && ctx.Err() == nil {
			log.Error("renew subscriptions", "error", err)
		} else if n > 0 {
			log.Info("subscriptions moved on", "count", n)
		}
		if n, err := app.DispatchDue(ctx, 100); err != nil && ctx.Err() == nil {
			log.Error("dispatch payouts and refunds", "error", err)
		} else if n > 0 {
			log.Info("asked providers about payouts and refunds", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func envInt(getenv func(string) string, name string, def int) (int, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, usagef("%s=%q: expected an integer", name, s)
	}
	return v, nil
}

func envFloat(getenv func(string) string, name string, def float64) (float64, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, usagef("%s=%q: expected a number", name, s)
	}
	return v, nil
}
