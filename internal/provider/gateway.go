package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Options tune a Gateway. The zero value is usable.
type Options struct {
	// Now is the clock (default time.Now): breakers and signature
	// timestamps use it.
	Now func() time.Time
	// HTTPClient carries live requests (default: a client without its own
	// timeout; each route's timeout_ms bounds each request). Its transport
	// should set ExpectContinueTimeout, as http.DefaultTransport does:
	// payouts and refunds fail over only when their body provably never
	// left (see the package documentation).
	HTTPClient *http.Client
	// Notify receives, asynchronously, the notifications the simulators
	// send, as a real provider's webhook would arrive. It may be nil.
	Notify func(ctx context.Context, n xaalis.Notification)
	// Logger (default: discard).
	Logger *slog.Logger
	// BreakerThreshold is how many consecutive failures open a route's
	// breaker (default 3).
	BreakerThreshold int
	// BreakerCooldown is how long a breaker stays open before one trial
	// request is let through (default 30 s).
	BreakerCooldown time.Duration
	// Observer hears of every provider request, for the metrics; nil
	// hears nothing.
	Observer Observer
	// SimulatorMemory is how many collections, and how many payouts and
	// refunds, each test-mode simulator remembers (default 16,384): past
	// it the oldest are forgotten, as a restart forgets them all.
	SimulatorMemory int
}

// Observer hears of provider requests. Operations are initiate, status,
// otp, payout, payout_status, refund and refund_status; routes are the configured ones in
// live mode and "simulator" in test mode. Outcomes:
//
//	ok            the provider answered
//	refused       the provider refused (a business error, HTTP 4xx)
//	not_found     the route does not know the reference (a lookup by it:
//	              payout_status, refund_status, status)
//	failure       no usable answer: timeout, HTTP 5xx or 429, connection
//	              refused or closed, a malformed answer
//	cancelled     the caller gave up first
//	circuit_open  not sent: the route's breaker is open (duration 0)
type Observer interface {
	ProviderRequest(provider, route, operation, outcome string, d time.Duration)
}

// Request outcomes, as Observer hears them.
const (
	OutcomeOK          = "ok"
	OutcomeRefused     = "refused"
	OutcomeNotFound    = "not_found"
	OutcomeFailure     = "failure"
	OutcomeCancelled   = "cancelled"
	OutcomeCircuitOpen = "circuit_open"
)

// observe tells the Observer of one request.
func (g *Gateway) observe(provider, route, op, outcome string, d time.Duration) {
	if g.opts.Observer != nil {
		g.opts.Observer.ProviderRequest(provider, route, strings.ReplaceAll(op, " ", "_"), outcome, d)
	}
}

// observeSim tells the Observer of a simulator call that started at start.
func (g *Gateway) observeSim(provider, op string, start time.Time, err error) {
	res := OutcomeOK
	switch {
	case errors.Is(err, xaalis.ErrNotFound):
		res = OutcomeNotFound
	case xaalis.ErrorCode(err) == xaalis.EGatewayUnavailable:
		// The simulated outage (0006): counted as a live route's
		// unreachable provider is.
		res = OutcomeFailure
	case err != nil:
		res = OutcomeRefused
	}
	g.observe(provider, simRoute, op, res, time.Since(start))
}

// Gateway implements xaalis.Gateway: simulators in test mode, HTTP
// adapters with routing and failover in live mode.
type Gateway struct {
	cfg  *xaalis.Config
	opts Options
	log  *slog.Logger

	sims map[string]*simulator // by provider

	mu       sync.Mutex
	breakers map[string]*breaker // by provider + "/" + route
}

var _ xaalis.Gateway = (*Gateway)(nil)

// New returns a Gateway over the providers of cfg.
func New(cfg *xaalis.Config, opts Options) *Gateway {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BreakerThreshold <= 0 {
		opts.BreakerThreshold = 3
	}
	if opts.BreakerCooldown <= 0 {
		opts.BreakerCooldown = 30 * time.Second
	}
	if opts.SimulatorMemory <= 0 {
		opts.SimulatorMemory = DefaultSimulatorMemory
	}
	g := &Gateway{
		cfg:      cfg,
		opts:     opts,
		log:      opts.Logger.With("component", "provider"),
		sims:     make(map[string]*simulator, len(cfg.Providers)),
		breakers: make(map[string]*breaker),
	}
	for name := range cfg.Providers {
		g.sims[name] = newSimulator(name, g)
	}
	return g
}

func (g *Gateway) now() time.Time { return g.opts.Now() }

// spec returns a provider's configuration.
func (g *Gateway) spec(provider string) (xaalis.ProviderSpec, bool) {
	p, ok := g.cfg.Providers[provider]
	return p, ok
}

// refuse is the gateway_error of a provider, with a message.
func refuse(provider, format string, args ...any) *xaalis.Error {
	e := xaalis.E(xaalis.EGatewayError, "provider", provider)
	e.Message = fmt.Sprintf(format, args...)
	return e
}

// unavailable is the gateway_unavailable of a provider.
func unavailable(provider string, retryAfter time.Duration, format string, args ...any) *xaalis.Error {
	e := xaalis.E(xaalis.EGatewayUnavailable, "provider", provider)
	e.Message = fmt.Sprintf(format, args...)
	e.RetryAfter = retryAfter
	return e
}

// checkServes returns gateway_error unless the provider is configured,
// enabled, takes payments and serves the country.
func (g *Gateway) checkServes(provider string, country xaalis.Country) (xaalis.ProviderSpec, error) {
	p, ok := g.spec(provider)
	switch {
	case !ok:
		return p, refuse(provider, "The provider %q is not configured.", provider)
	case !p.Enabled:
		return p, refuse(provider, "The provider %s is disabled.", provider)
	case !p.Payments:
		return p, refuse(provider, "The provider %s does not take payments.", provider)
	case !p.Serves(country):
		return p, refuse(provider, "The provider %s does not serve country %q.", provider, country)
	}
	return p, nil
}

// InProcess reports whether mode's providers answer in this process: the
// simulators of test mode do.
func (g *Gateway) InProcess(mode xaalis.Mode) bool { return mode == xaalis.ModeTest }

// Initiate starts a collection: in test mode on the provider's simulator,
// in live mode over its routes.
func (g *Gateway) Initiate(ctx context.Context, r xaalis.InitiateRequest) (xaalis.Initiation, error) {
	switch r.Mode {
	case xaalis.ModeTest:
		sim, err := g.sim(r.Provider)
		if err != nil {
			return xaalis.Initiation{}, err
		}
		start := time.Now()
		in, err := sim.initiate(r)
		g.observeSim(r.Provider, "initiate", start, err)
		return in, err
	case xaalis.ModeLive:
		return g.liveInitiate(ctx, r)
	}
	return xaalis.Initiation{}, fmt.Errorf("provider: initiate: unknown mode %q", r.Mode)
}

// Status polls the provider about a collection.
func (g *Gateway) Status(ctx context.Context, mode xaalis.Mode, provider, route, providerRef string) (xaalis.ProviderStatus, error) {
	switch mode {
	case xaalis.ModeTest:
		sim, err := g.sim(provider)
		if err != nil {
			return xaalis.ProviderStatus{}, err
		}
		start := time.Now()
		st := sim.status(providerRef)
		g.observeSim(provider, "status", start, nil)
		return st, nil
	case xaalis.ModeLive:
		return g.liveStatus(ctx, provider, route, providerRef)
	}
	return xaalis.ProviderStatus{}, fmt.Errorf("provider: status: unknown mode %q", mode)
}

// Collection asks about a payment by its reference, for one whose
// initiation's answer never came back: xaalis.ErrNotFound when no route
// of the provider knows it.
func (g *Gateway) Collection(ctx context.Context, mode xaalis.Mode, provider, reference string) (xaalis.Initiation, error) {
	if reference == "" {
		return xaalis.Initiation{}, fmt.Errorf("provider: collection without a reference")
	}
	switch mode {
	case xaalis.ModeTest:
		sim, err := g.sim(provider)
		if err != nil {
			return xaalis.Initiation{}, err
		}
		start := time.Now()
		in, err := sim.collection(reference)
		g.observeSim(provider, "status", start, err)
		return in, err
	case xaalis.ModeLive:
		return g.liveCollection(ctx, provider, reference)
	}
	return xaalis.Initiation{}, fmt.Errorf("provider: collection: unknown mode %q", mode)
}

// SubmitOTP forwards the payer's one-time code to an OTP provider.
func (g *Gateway) SubmitOTP(ctx context.Context, mode xaalis.Mode, provider, route, providerRef, otp string) (xaalis.ProviderStatus, error) {
	p, ok := g.spec(provider)
	if !ok {
		return xaalis.ProviderStatus{}, refuse(provider, "The provider %q is not configured.", provider)
	}
	if p.NextAction != xaalis.NextOTP {
		return xaalis.ProviderStatus{}, refuse(provider, "The provider %s does not take one-time codes.", provider)
	}
	switch mode {
	case xaalis.ModeTest:
		sim, err := g.sim(provider)
		if err != nil {
			return xaalis.ProviderStatus{}, err
		}
		start := time.Now()
		st, err := sim.submitOTP(providerRef, otp)
		g.observeSim(provider, "otp", start, err)
		return st, err
	case xaalis.ModeLive:
		return g.liveOTP(ctx, provider, route, providerRef, otp)
	}
	return xaalis.ProviderStatus{}, fmt.Errorf("provider: otp: unknown mode %q", mode)
}

// PayerAction records what the simulated payer did (test mode only): a
// pending collection moves to outcome and the simulator's notification
// goes to Options.Notify.
func (g *Gateway) PayerAction(ctx context.Context, provider, providerRef string, outcome xaalis.ProviderState) error {
	sim, err := g.sim(provider)
	if err != nil {
		return err
	}
	return sim.payerAction(ctx, providerRef, outcome)
}

// Health reports every route of a provider: in test mode the one
// simulator route, in live mode each configured route's breaker.
func (g *Gateway) Health(mode xaalis.Mode, provider string) []xaalis.RouteHealth {
	p, ok := g.spec(provider)
	if !ok {
		return nil
	}
	if mode == xaalis.ModeTest {
		return []xaalis.RouteHealth{{Route: simRoute, Healthy: true, State: BreakerClosed}}
	}
	now := g.now()
	out := make([]xaalis.RouteHealth, 0, len(p.Routes))
	for _, rt := range p.Routes {
		st, _ := g.breaker(provider, rt.Name).snapshot(now)
		out = append(out, xaalis.RouteHealth{Route: rt.Name, Healthy: st != BreakerOpen, State: st})
	}
	return out
}

func (g *Gateway) sim(provider string) (*simulator, error) {
	if s, ok := g.sims[provider]; ok {
		return s, nil
	}
	return nil, refuse(provider, "The provider %q is not configured.", provider)
}

func (g *Gateway) breaker(provider, route string) *breaker {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := provider + "/" + route
	b, ok := g.breakers[k]
	if !ok {
		b = newBreaker(g.opts.BreakerThreshold, g.opts.BreakerCooldown)
		g.breakers[k] = b
	}
	return b
}

// randomID returns prefix followed by 24 random hex digits.
func randomID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
