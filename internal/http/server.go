// Package http is the HTTP/JSON API of Xaalis: routes, authentication,
// idempotency, rate limits, and the one error writer.
package http

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Config holds the API's limits.
type Config struct {
	// RateLimit is the steady number of requests a second one key may make,
	// RateBurst how many it may make at once.
	RateLimit float64
	RateBurst int
	// IdempotencyQuota is how many new Idempotency-Keys one merchant may use
	// per IdempotencyQuotaWindow in one mode; 0 disables the quota.
	IdempotencyQuota       int
	IdempotencyQuotaWindow time.Duration
	// IdempotencyLease is how long a claimed key stays exclusive when its
	// request never finishes (the process died).
	IdempotencyLease time.Duration
	// IdempotencyQuotaPublishable is the quota of new Idempotency-Keys of
	// publishable keys, counted apart from secret keys' so that a public
	// key can never spend the merchant's server quota; 0 disables it.
	IdempotencyQuotaPublishable int
	// MaxBodyBytes bounds request bodies.
	MaxBodyBytes int64
	// PageRateLimit and PageRateBurst limit the hosted payment page per
	// client address (requests a second, burst); NotifyRateLimit and
	// NotifyRateBurst limit provider notifications the same way. A limit
	// of 0 is none.
	PageRateLimit   float64
	PageRateBurst   int
	NotifyRateLimit float64
	NotifyRateBurst int

	// The event stream (GET /v1/events/stream): how often it reads new
	// events, the idle time after which it sends a keep-alive comment, how
	// long a client may take to accept one message before it is
	// disconnected, and how many events it reads (and holds) at once.
	StreamPoll         time.Duration
	StreamKeepAlive    time.Duration
	StreamWriteTimeout time.Duration
	StreamBatch        int
	// TrustedProxies are the proxies whose X-Forwarded-For (or Forwarded)
	// is believed, walking right to left past them; empty: the client is
	// the TCP peer and those headers are ignored.
	TrustedProxies []netip.Prefix
	// AuthFailureLimit is how many invalid API keys (or operator tokens)
	// one client address may send per AuthFailureWindow before the next
	// ones answer 429; 0 disables the limit. Past AuthFailureSlowAfter
	// failures in the window, each further 401 waits AuthFailureDelay more,
	// at most AuthFailureMaxDelay.
	AuthFailureLimit     int
	AuthFailureWindow    time.Duration
	AuthFailureSlowAfter int
	AuthFailureDelay     time.Duration
	AuthFailureMaxDelay  time.Duration
}

// DefaultConfig is the configuration `xaalis serve` starts with.
func DefaultConfig() Config {
	return Config{
		RateLimit: 100, RateBurst: 200,
		IdempotencyQuota: 10_000, IdempotencyQuotaWindow: time.Hour,
		IdempotencyQuotaPublishable: 2_000,
		IdempotencyLease:            2 * time.Minute,
		MaxBodyBytes:                1 << 20,
		PageRateLimit:               10, PageRateBurst: 60,
		NotifyRateLimit: 50, NotifyRateBurst: 100,
		StreamPoll: 500 * time.Millisecond, StreamKeepAlive: 15 * time.Second,
		StreamWriteTimeout: 10 * time.Second, StreamBatch: 100,
		AuthFailureLimit: 20, AuthFailureWindow: 10 * time.Minute,
		AuthFailureSlowAfter: 5, AuthFailureDelay: 50 * time.Millisecond, AuthFailureMaxDelay: 500 * time.Millisecond,
	}
}

// Server is the API's http.Handler.
type Server struct {
	App    *xaalis.App
	Logger *slog.Logger
	Config Config
	// OpenAPI is the contract served at GET /v1/openapi.yaml.
	OpenAPI []byte

	mux      *http.ServeMux
	registry []Route
	limiters limiters
	// Per client address, for the routes without an API key.
	pageLimits, notifyLimits limiters
	metrics                  *metrics
	// streamsCtx ends with StopStreams.
	streamsCtx  context.Context
	stopStreams context.CancelFunc
	// Addresses past the failed-auth limit, until their window ends.
	authBlocked blockList
	// inFlight holds the Idempotency-Keys (xaalis.IdempotencyScope) of the
	// requests this process is running, each with its request's
	// fingerprint (a string): see idempotent.
	inFlight sync.Map
}

// NewServer builds the API over app. reg may be nil; when set, request
// metrics are registered on it.
func NewServer(app *xaalis.App, logger *slog.Logger, cfg Config, openapi []byte, reg prometheus.Registerer) *Server {
	s := &Server{App: app, Logger: logger, Config: cfg, OpenAPI: openapi, mux: http.NewServeMux()}
	s.limiters.m = map[string]*limiterEntry{}
	s.pageLimits.m = map[string]*limiterEntry{}
	s.notifyLimits.m = map[string]*limiterEntry{}
	s.metrics = newMetrics(reg)
	s.streamsCtx, s.stopStreams = context.WithCancel(context.Background())
	s.routes()
	return s
}

type ctxKey int

const (
	ctxRequestID ctxKey = iota
	ctxLogger
	ctxPrincipal
	ctxIdempotency
	ctxAccess
	ctxClient
	ctxKnownKey
)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxRequestID).(string)
	return id
}

func logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxLogger).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// principal is the authenticated caller; routes behind s.api always have one.
func principal(r *http.Request) *xaalis.Principal {
	p, _ := r.Context().Value(ctxPrincipal).(*xaalis.Principal)
	return p
}

// access collects what the access log line says about a request as the
// handlers learn it.
type access struct {
	merchantID string
	keyID      string
	// operatorTokenID: the operator token of an admin request.
	operatorTokenID string
}

// ServeHTTP gives every request an id, recovers panics, logs one line and
// routes; unmatched requests get the JSON 404 or 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serveWith(s.mux, w, r) }

// serveWith serves r through mux with the API's request ids, recovery,
// access log and JSON 404/405 (the admin listener shares them).
func (s *Server) serveWith(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := "req_" + xaalis.RandomString(24, keyAlphabet)
	w.Header().Set("X-Request-Id", rid)
	if noStore(r.URL.Path) {
		// A merchant's records, balances and secrets are kept by no cache
		// on the way (a proxy, the client's own HTTP cache).
		w.Header().Set("Cache-Control", "no-store")
	}
	acc := &access{}
	peer := peerAddr(r)
	client := clientAddr(peer, r.Header, s.Config.TrustedProxies)
	ctx := context.WithValue(r.Context(), ctxRequestID, rid)
	ctx = context.WithValue(ctx, ctxClient, client)
	ctx = context.WithValue(ctx, ctxLogger, s.Logger)
	ctx = context.WithValue(ctx, ctxAccess, acc)

	// mux.Handler names the route for the log; only mux.ServeHTTP sets the
	// path values, so matched requests go through it.
	var h http.Handler = mux
	fallback, pattern := mux.Handler(r)
	if pattern == "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.unmatched(w, r, fallback) })
		pattern = "unmatched"
	} else if xaalis.TextFault(r.URL.Path, false) != "" {
		// A path segment (an id) with a control character or invalid
		// UTF-8 names nothing that can exist; PostgreSQL would refuse the
		// text itself (500) where SQLite finds no row.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { Error(w, r, xaalis.E(xaalis.ENotFound)) })
	}
	if !readsAll[pattern] {
		// The answer waits for what the request's reads saw to be
		// durable (statusWriter), not for every commit of the moment.
		ctx = xaalis.WithReadMark(ctx)
	}
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w, r: r}
	if !readsNothing[pattern] {
		sw.durable = s.App.Store.Durable
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.Logger.Error("panic", "request_id", rid, "panic", v)
			if !sw.wrote {
				Error(sw, r, errPanic{v})
			}
		}
		d := time.Since(start)
		s.metrics.observe(pattern, sw.status, d)
		attrs := []slog.Attr{
			slog.String("request_id", rid),
			slog.String("method", r.Method),
			slog.String("route", pattern),
			slog.String("path", r.URL.Path),
			slog.String("query", RedactQuery(r.URL.RawQuery)),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Float64("latency_ms", float64(d.Microseconds())/1000),
			slog.String("merchant_id", acc.merchantID),
			slog.String("key_id", acc.keyID),
			slog.String("operator_token_id", acc.operatorTokenID),
			slog.String("remote_ip", client.String()),
		}
		if client != peer {
			// Behind a trusted proxy: which one passed the request on.
			attrs = append(attrs, slog.String("proxy_ip", peer.String()))
		}
		s.Logger.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
	}()
	h.ServeHTTP(sw, r)
}

// noStore reports whether the answers at path are never to be cached:
// the API's and the operator API's, but for the contract and checkout.js,
// which are public and the same for everyone.
func noStore(path string) bool {
	switch path {
	case "/v1/openapi.yaml", "/v1/checkout.js":
		return false
	}
	return strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/admin/v1/")
}

type errPanic struct{ v any }

func (e errPanic) Error() string { return "panic in handler" }

// unmatched answers the mux's own 404 and 405 in the error envelope.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &headerRecorder{h: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		allow := strings.Split(rec.h.Get("Allow"), ", ")
		Error(w, r, &xaalis.Error{Code: xaalis.EMethodNotAllowed, Allow: allow})
		return
	}
	Error(w, r, xaalis.ErrNotFound)
}

// headerRecorder captures what the mux's default handlers write.
type headerRecorder struct {
	h      http.Header
	status int
}

func (r *headerRecorder) Header() http.Header         { return r.h }
func (r *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *headerRecorder) WriteHeader(s int)           { r.status = s }

// readsNothing are the routes whose answers show nothing of the database:
// they need not wait for its writes to be durable (statusWriter), and the
// probes must answer whatever the disk does (/readyz reads the database's
// health, none of its rows).
var readsNothing = map[string]bool{
	"GET /healthz": true, "GET /readyz": true, "GET /v1/openapi.yaml": true,
	"GET /checkout-assets/{name}": true, "GET /v1/checkout.js": true, "unmatched": true,
	"OPTIONS /v1/payments": true, "OPTIONS /v1/status/{reference}": true,
}

// readsAll are the routes whose reads do not run in the request's context
// (the metrics' collectors): their answers wait for every write committed
// before them, not for what a ReadMark recorded.
var readsAll = map[string]bool{"GET /metrics": true}

// dropOnRefuse are the headers that describe the answer a refused handler
// had prepared; the others (the request id, the security headers) stay.
var dropOnRefuse = []string{"Content-Type", "Content-Length", "Content-Disposition", "Content-Encoding",
	"Location", "Idempotent-Replay", "ETag", "Last-Modified", "Link", "Set-Cookie", "Cache-Control"}

// statusWriter records an answer's status and size for the access log,
// and holds every byte of it until the writes the request's reads may
// have seen are durable (Store.Durable, with the request's ReadMark): a
// handler may have read a commit that the database has not yet made
// durable, and nothing of it may leave before it is. When the database
// could not make it durable, an answer not started yet is replaced by the
// 503 that says so; a streamed one stops.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// durable waits for what the request's reads saw (Store.Durable; nil:
	// no wait); r is the request, its context and ReadMark.
	durable func(context.Context) error
	r       *http.Request
	// refused: the handler's answer was replaced; what it writes is dropped.
	refused bool
}

func (w *statusWriter) WriteHeader(s int) {
	if w.refused {
		return
	}
	if !w.wrote {
		if err := w.hold(); err != nil {
			w.refuse(err)
			return
		}
		w.status, w.wrote = s, true
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	} else if err := w.hold(); err != nil && !w.refused {
		// A streamed answer whose next bytes may show what the database
		// could not make durable: it ends here.
		w.refused = true
		return 0, err
	}
	if w.refused {
		// The handler's answer does not leave; a stream stops writing.
		return 0, errRefused
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// errRefused is what a refused answer's writes return.
var errRefused = errors.New("the answer was refused: what it shows is not durable")

// hold waits until what the request's reads saw is durable.
func (w *statusWriter) hold() error {
	if w.durable == nil {
		return nil
	}
	return w.durable(w.r.Context())
}

// refuse answers err in place of the handler's answer, which had not
// started: the headers describing that answer are dropped. A client that
// went away gets nothing (499 in the log).
func (w *statusWriter) refuse(err error) {
	w.wrote, w.refused = true, true
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		w.status = 499
		return
	}
	h := w.Header()
	for _, k := range dropOnRefuse {
		h.Del(k)
	}
	if noStore(w.r.URL.Path) {
		h.Set("Cache-Control", "no-store") // the 503 too
	}
	inner := &statusWriter{ResponseWriter: w.ResponseWriter}
	Error(inner, w.r, err)
	w.status, w.bytes = inner.status, inner.bytes
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// clientIP is the request's client address, derived once per request from
// the TCP peer and, behind a trusted proxy, its forwarding headers
// (clientAddr). Every use of the client's address reads it here.
func clientIP(r *http.Request) netip.Addr {
	if a, ok := r.Context().Value(ctxClient).(netip.Addr); ok {
		return a
	}
	return peerAddr(r)
}

const keyAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// limiters holds one token bucket per API key.
type limiters struct {
	mu sync.Mutex
	m  map[string]*limiterEntry
}

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

// allow takes one token for the key; when none is left it returns how long
// until one is.
func (l *limiters) allow(key string, limit rate.Limit, burst int, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil {
		if len(l.m) >= 100_000 {
			// Forget buckets idle long enough to be full again.
			for k, v := range l.m {
				if now.Sub(v.seen) > time.Minute {
					delete(l.m, k)
				}
			}
		}
		e = &limiterEntry{lim: rate.NewLimiter(limit, burst)}
		l.m[key] = e
	}
	e.seen = now
	res := e.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}
