package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	def := xhttp.DefaultConfig()
	env := envDefaults{getenv: getenv}
	addr := fs.String("addr", envOr(getenv, "XAALIS_ADDR", ":8080"), "API listen address (env XAALIS_ADDR)")
	adminAddr := fs.String("admin-addr", envOr(getenv, "XAALIS_ADMIN_ADDR", "127.0.0.1:8081"), "operator listen address: health and metrics (env XAALIS_ADMIN_ADDR)")
	db := databaseFlag(fs, getenv)
	testModeDef := env.Bool("test-mode", "XAALIS_TEST_MODE", true)
	testMode := fs.Bool("test-mode", testModeDef, "accept test keys; false makes a live-only installation (env XAALIS_TEST_MODE)")
	tlsCert := fs.String("tls-cert", getenv("XAALIS_TLS_CERT"), "TLS certificate file: serve HTTPS, TLS 1.2 at least (env XAALIS_TLS_CERT)")
	tlsKey := fs.String("tls-key", getenv("XAALIS_TLS_KEY"), "TLS key file (env XAALIS_TLS_KEY)")
	rateLimitDef := env.Float("rate-limit", "XAALIS_RATE_LIMIT", def.RateLimit)
	rateBurstDef := env.Int("rate-burst", "XAALIS_RATE_BURST", def.RateBurst)
	quotaDef := env.Int("idempotency-quota", "XAALIS_IDEMPOTENCY_QUOTA", def.IdempotencyQuota)
	pkQuotaDef := env.Int("idempotency-quota-publishable", "XAALIS_IDEMPOTENCY_QUOTA_PUBLISHABLE", def.IdempotencyQuotaPublishable)
	pageRateDef := env.Float("page-rate-limit", "XAALIS_PAGE_RATE_LIMIT", def.PageRateLimit)
	notifyRateDef := env.Float("notify-rate-limit", "XAALIS_NOTIFY_RATE_LIMIT", def.NotifyRateLimit)
	pkQuota := fs.Int("idempotency-quota-publishable", pkQuotaDef, "new Idempotency-Keys of publishable keys per merchant and mode an hour, apart from secret keys'; 0: no quota (env XAALIS_IDEMPOTENCY_QUOTA_PUBLISHABLE)")
	pageRate := fs.Float64("page-rate-limit", pageRateDef, "requests a second per client address to the hosted payment page; 0: no limit (env XAALIS_PAGE_RATE_LIMIT)")
	notifyRate := fs.Float64("notify-rate-limit", notifyRateDef, "provider notifications a second per client address; 0: no limit (env XAALIS_NOTIFY_RATE_LIMIT)")
	rateLimit := fs.Float64("rate-limit", rateLimitDef, "requests a second per API key (env XAALIS_RATE_LIMIT)")
	rateBurst := fs.Int("rate-burst", rateBurstDef, "burst per API key (env XAALIS_RATE_BURST)")
	quota := fs.Int("idempotency-quota", quotaDef, "new Idempotency-Keys per merchant and mode an hour; 0: no quota (env XAALIS_IDEMPOTENCY_QUOTA)")
	logLevel := fs.String("log-level", envOr(getenv, "XAALIS_LOG_LEVEL", "info"), "debug, info, warn or error (env XAALIS_LOG_LEVEL)")
	configPath := fs.String("config", getenv("XAALIS_CONFIG"), "business configuration file (JSON); empty: the embedded defaults (env XAALIS_CONFIG)")
	publicURL := fs.String("public-url", getenv("XAALIS_PUBLIC_URL"), "public base URL of the API, for payment URLs and provider notifications (env XAALIS_PUBLIC_URL; default http://localhost:PORT)")
	jobEvery := fs.Duration("jobs-interval", 5*time.Second, "how often expiry and reconciliation run")
	heartbeatDef := env.Duration("heartbeat", "XAALIS_HEARTBEAT", xaalis.DefaultHeartbeat)
	heartbeat := fs.Duration("heartbeat", heartbeatDef, "how often this instance records that it lives; its Idempotency-Keys are taken over once it is silent for three intervals (env XAALIS_HEARTBEAT)")
	insecureDef := env.Bool("insecure-webhooks", "XAALIS_INSECURE_WEBHOOKS", false)
	insecureHooks := fs.Bool("insecure-webhooks", insecureDef, "DEVELOPMENT ONLY: allow http and loopback webhook URLs (env XAALIS_INSECURE_WEBHOOKS)")
	hookTimeout := fs.Duration("webhook-timeout", 15*time.Second, "how long a webhook receiver may take to answer")
	authLimitDef := env.Int("auth-failure-limit", "XAALIS_AUTH_FAILURE_LIMIT", def.AuthFailureLimit)
	authWindowDef := env.Duration("auth-failure-window", "XAALIS_AUTH_FAILURE_WINDOW", def.AuthFailureWindow)
	authLimit := fs.Int("auth-failure-limit", authLimitDef, "invalid API keys one client address may send per --auth-failure-window before 429; 0: no limit (env XAALIS_AUTH_FAILURE_LIMIT)")
	authWindow := fs.Duration("auth-failure-window", authWindowDef, "window of --auth-failure-limit, at most 24h (env XAALIS_AUTH_FAILURE_WINDOW)")
	secretKeyFile := secretKeyFlag(fs, getenv)
	trustedProxies := fs.String("trusted-proxies", getenv("XAALIS_TRUSTED_PROXIES"), "comma-separated CIDRs of the reverse proxies whose X-Forwarded-For or Forwarded names the client; empty: the client is the TCP peer (env XAALIS_TRUSTED_PROXIES)")
	ledgerEveryDef := env.Duration("ledger-check-interval", "XAALIS_LEDGER_CHECK_INTERVAL", time.Hour)
	ledgerEvery := fs.Duration("ledger-check-interval", ledgerEveryDef, "how often the ledger check runs (shared by every process on the database; 0: never) (env XAALIS_LEDGER_CHECK_INTERVAL)")
	secureCookiesDef := env.Bool("console-secure-cookies", "XAALIS_CONSOLE_SECURE_COOKIES", false)
	secureCookies := fs.Bool("console-secure-cookies", secureCookiesDef, "mark the operator console's cookies Secure on plain HTTP: a TLS proxy fronts the admin listener (env XAALIS_CONSOLE_SECURE_COOKIES)")
	pprofDef := env.Bool("pprof", "XAALIS_PPROF", false)
	pprofOn := fs.Bool("pprof", pprofDef, "serve the Go runtime's profiles at /debug/pprof/ on the admin listener, without a token: only where that listener is private (env XAALIS_PPROF)")
	retryScaleDef := env.Float("webhook-retry-scale", "XAALIS_WEBHOOK_RETRY_SCALE", 1)
	retryScale := fs.Float64("webhook-retry-scale", retryScaleDef, "TESTING ONLY: multiply the webhook retry schedule's waits (1: 1 min, 5 min, 30 min, ...; 0.001: 60 ms, 300 ms, ...) (env XAALIS_WEBHOOK_RETRY_SCALE)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	if err := env.check(fs); err != nil {
		return err
	}
	if *ledgerEvery < 0 {
		return usagef("serve: --ledger-check-interval must be at least 0")
	}
	if *heartbeat <= 0 {
		return usagef("serve: --heartbeat must be positive")
	}
	if *jobEvery <= 0 || *hookTimeout <= 0 {
		// A ticker of 0 panics once the server listens.
		return usagef("serve: --jobs-interval and --webhook-timeout must be positive")
	}
	base, err := publicBase(*publicURL)
	if err != nil {
		return err
	}
	*publicURL = base
	if *retryScale <= 0 || *retryScale > 1 {
		return usagef("serve: --webhook-retry-scale must be within (0, 1]")
	}
	if *rateLimit <= 0 || *rateBurst < 1 || *quota < 0 || *pkQuota < 0 || *pageRate < 0 || *notifyRate < 0 {
		return usagef("serve: --rate-limit and --rate-burst must be positive; --idempotency-quota, --idempotency-quota-publishable, --page-rate-limit and --notify-rate-limit at least 0")
	}
	if *authLimit < 0 || *authWindow < time.Second || *authWindow > xaalis.IdempotencyTTL {
		return usagef("serve: --auth-failure-limit must be at least 0 and --auth-failure-window from 1s to 24h")
	}
	proxies, err := xhttp.ParseTrustedProxies(*trustedProxies)
	if err != nil {
		return usagef("--trusted-proxies: %v", err)
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
	// The key file's messages go to the log, not between its lines.
	keyCtx := withKeySetup(ctx, keySetup{file: *secretKeyFile, stderr: io.Discard})
	store, keys, err := openStoreKeyed(keyCtx, *db, true)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	if err := sealSecretsInClear(ctx, store, keys, log); err != nil {
		return err
	}
	if len(proxies) > 0 {
		log.Info("trusting forwarding headers from proxies", "trusted_proxies", *trustedProxies)
		for _, p := range proxies {
			if p.Bits() == 0 {
				log.Warn("--trusted-proxies trusts every address: any client can choose the address it is known by", "prefix", p.String())
			}
		}
	}
	if *insecureHooks {
		log.Warn("--insecure-webhooks: webhook URLs may be http and loopback; never use this in production")
	}
	cfg := def
	cfg.RateLimit, cfg.RateBurst, cfg.IdempotencyQuota = *rateLimit, *rateBurst, *quota
	cfg.IdempotencyQuotaPublishable, cfg.PageRateLimit, cfg.NotifyRateLimit = *pkQuota, *pageRate, *notifyRate
	cfg.TrustedProxies = proxies
	cfg.AuthFailureLimit, cfg.AuthFailureWindow = *authLimit, *authWindow
	st, err := newStack(ctx, store, stackOptions{Business: business, LiveOnly: !*testMode, InsecureHooks: *insecureHooks,
		HTTP: cfg, Log: log, Heartbeat: *heartbeat, HookTimeout: *hookTimeout, RetryScale: *retryScale,
		DispatchEvery: time.Second, JobEvery: *jobEvery, LedgerEvery: *ledgerEvery, SecureCookies: *secureCookies,
		Pprof: *pprofOn})
	if err != nil {
		return err
	}
	app := st.app

	// A live route without usable credentials is never offered; say so
	// now rather than at the first live payment.
	for _, u := range business.UnavailableRoutes() {
		fmt.Fprintf(stdout, "Live route %s/%s is unavailable: %s.\n", u.Provider, u.Route, u.Reason)
		log.Warn("live route unavailable", "provider", u.Provider, "route", u.Route, "reason", u.Reason)
	}
	for _, name := range xaalis.Providers {
		if spec, ok := business.Providers[name]; ok && spec.Enabled && !spec.LiveReady() {
			fmt.Fprintf(stdout, "Provider %s is unavailable in live mode: no route has usable credentials (see docs/security.md).\n", name)
		}
	}

	// The listeners first: a start that cannot listen (a port taken)
	// must not have made the demo merchant, whose keys are shown only
	// once.
	apiLn, err := net.Listen("tcp", *addr)
	if err != nil {
		st.stop(ctx)
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	adminLn, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		apiLn.Close()
		st.stop(ctx)
		return fmt.Errorf("listen admin %s: %w", *adminAddr, err)
	}
	if *pprofOn {
		if ap, ok := adminLn.Addr().(*net.TCPAddr); ok && !ap.IP.IsLoopback() {
			// The profiles need no token: anyone who reaches the
			// listener reads the process's memory layout and stacks.
			log.Warn("--pprof on an admin listener that is not loopback: /debug/pprof/ answers anyone who reaches it without a token",
				"admin_addr", adminLn.Addr().String())
		}
	}

	if *testMode {
		demo, err := app.EnsureDemoMerchant(ctx)
		if err != nil {
			apiLn.Close()
			adminLn.Close()
			st.stop(ctx)
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

	// Ordinary requests are bounded by the listeners' timeouts; a
	// streaming route (Server-Sent Events) extends its own deadlines
	// (xhttp.ExtendDeadlines). Shutdown waits for connections to go idle;
	// event streams never do, so they are ended first.
	apiSrv := xhttp.NewHTTPServer(st.api, log, xhttp.DefaultTimeouts(), tlsConfig)
	apiSrv.RegisterOnShutdown(st.api.StopStreams)
	// The operator listener has the API's timeouts (and, in the handlers,
	// its body limit): a slow client must not hold it open either.
	adminSrv := xhttp.NewHTTPServer(st.admin, log, xhttp.DefaultTimeouts(), nil)

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
	fmt.Fprintf(stdout, "Operator console: http://%s/console/ (sign in with a token of `xaalis operator token create`)\n", adminLn.Addr())
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

	st.start(ctx)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing requests in flight")
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = errors.Join(apiSrv.Shutdown(shutdownCtx), adminSrv.Shutdown(shutdownCtx))
	// Every request has finished: the background work ends, then this
	// instance's row goes, and with it any claim a request left.
	st.stop(ctx)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// sealSecretsInClear warns about a key file kept beside the database, and
// encrypts the secrets an earlier version stored in clear.
func sealSecretsInClear(ctx context.Context, store xaalis.Store, keys keyInfo, log *slog.Logger) error {
	path := keys.keyring.Path()
	switch {
	case keys.generated && keys.supplied:
		log.Warn("made the secret key file, which did not exist: back it up apart from the database, and give every "+
			"server process on this database the same file (docs/deployment.md)", "key_file", path)
	case keys.generated:
		log.Warn("made a secret key file in the data directory: the database's secrets are encrypted under it, and every "+
			"server process on this database needs the same file; set XAALIS_SECRET_KEY_FILE to a file kept apart from the "+
			"database and its backups (docs/deployment.md)", "key_file", path)
	case !keys.supplied:
		log.Warn("the database's secrets are encrypted under the key file in the data directory, beside the database: "+
			"a copy of the directory holds both; set XAALIS_SECRET_KEY_FILE (docs/deployment.md)", "key_file", path)
	}
	if keys.keyring.WorldReadable() {
		log.Warn("the secret key file is readable by every user of the machine: chmod 600 (or 640 with the service's group)", "key_file", path)
	}
	total := 0
	for {
		n, err := store.ResealSecrets(ctx, 500, true)
		if err != nil {
			return fmt.Errorf("encrypt the secrets stored in clear: %w", err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total > 0 {
		log.Info("encrypted the secrets an earlier version stored in clear", "count", total)
	}
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

// maintain runs the periodic ledger check when it is due (the last
// recorded check, by any process, is older than every; 0 never runs it)
// and, every ten minutes, the housekeeping: idle console sessions and old
// stat counters.
func maintain(ctx context.Context, app *xaalis.App, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	var lastHousekeeping time.Time
	for {
		if every > 0 {
			due, err := app.LedgerCheckDue(ctx, every)
			if err == nil && due {
				// One of the processes that find it due runs it.
				due, err = app.ClaimScheduledLedgerCheck(ctx, every)
			}
			if err != nil && ctx.Err() == nil {
				log.Error("ledger check schedule", "error", err)
			} else if due {
				if run, _, err := app.RunLedgerCheck(ctx, true); err != nil && ctx.Err() == nil {
					log.Error("ledger check", "error", err)
				} else if err == nil && run.Problems > 0 {
					log.Error("ledger check found differences", "problems", run.Problems)
				} else if err == nil {
					log.Info("ledger check: consistent", "duration_ms", run.Duration.Milliseconds())
				}
			}
		}
		if time.Since(lastHousekeeping) >= 10*time.Minute {
			if err := app.Housekeeping(ctx); err != nil && ctx.Err() == nil {
				log.Error("housekeeping", "error", err)
			}
			lastHousekeeping = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// flushReplays adds this process's idempotent replays to the database's
// counters every second, and once more at shutdown.
func flushReplays(ctx context.Context, app *xaalis.App, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := app.FlushReplays(context.WithoutCancel(ctx)); err != nil {
				log.Error("idempotency replays", "error", err)
			}
			return
		case <-t.C:
			if err := app.FlushReplays(ctx); err != nil && ctx.Err() == nil {
				log.Error("idempotency replays", "error", err)
			}
		}
	}
}

// runJobs expires payments past their expires_at, reconciles payments
// pending too long (and asks about closed ones a payer may still pay),
// loses disputes past their deadline, renews subscriptions, and asks
// providers about payouts and refunds whose outcome is unknown. The work
// is read from the database itself, so it survives restarts, and several
// processes may run it at once.
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

// processID tells this operating-system process from an earlier one
// that had its PID.
var processID = xaalis.RandomString(16, "0123456789abcdefghijklmnopqrstuvwxyz")

// envDefaults reads flags' defaults from the environment. A malformed
// value is a usage error rather than a silent default, but only when its
// flag does not override it: flags win over the environment.
type envDefaults struct {
	getenv func(string) string
	errs   []flagEnvError
}

type flagEnvError struct {
	flag string
	err  error
}

func (e *envDefaults) note(flag string, err error) {
	if err != nil {
		e.errs = append(e.errs, flagEnvError{flag, err})
	}
}

func (e *envDefaults) Bool(flag, name string, def bool) bool {
	v, err := boolEnv(e.getenv, name, def)
	e.note(flag, err)
	return v
}

func (e *envDefaults) Int(flag, name string, def int) int {
	v, err := envInt(e.getenv, name, def)
	e.note(flag, err)
	return v
}

func (e *envDefaults) Float(flag, name string, def float64) float64 {
	v, err := envFloat(e.getenv, name, def)
	e.note(flag, err)
	return v
}

func (e *envDefaults) Duration(flag, name string, def time.Duration) time.Duration {
	v, err := envDuration(e.getenv, name, def)
	e.note(flag, err)
	return v
}

// check returns the first malformed value whose flag fs was not given.
func (e *envDefaults) check(fs *flag.FlagSet) error {
	set := setFlags(fs)
	for _, fe := range e.errs {
		if !set[fe.flag] {
			return fe.err
		}
	}
	return nil
}

// envInt reads an integer environment variable; unset is def, malformed
// is a usage error rather than a silent default.
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

func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, usagef("%s=%q: expected a duration such as 10m", name, s)
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
