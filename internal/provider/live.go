package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// maxResponse bounds what is read of a provider's answer.
const maxResponse = 1 << 20

// routeFailure is a request the route did not answer: no money moved
// (or, with the Idempotency-Key, it may be retried safely elsewhere).
type routeFailure struct {
	cause string // short, for RouteReason and logs
	err   error
	// unsent is set, for a guarded request (see call), when its body
	// provably never left Xaalis: the provider cannot have acted on it.
	unsent bool
}

func (f *routeFailure) Error() string {
	if f.err != nil {
		return f.cause + ": " + f.err.Error()
	}
	return f.cause
}

// businessError is a 4xx answer: the provider refused.
type businessError struct {
	status        int
	code, message string
}

func (b *businessError) Error() string {
	return fmt.Sprintf("http %d %s: %s", b.status, b.code, b.message)
}

// guardedBody is the body of a guarded request. Until the transport
// reads it, not one byte of it has left Xaalis; seal then forbids any
// later read, so that "never read" is final and provable.
type guardedBody struct {
	r     *bytes.Reader
	state *atomic.Int32 // bodyUnread, bodyRead or bodySealed
}

const (
	bodyUnread int32 = iota
	bodyRead
	bodySealed
)

var errBodySealed = errors.New("provider: request abandoned before its body was sent")

func (b *guardedBody) Read(p []byte) (int, error) {
	if !b.state.CompareAndSwap(bodyUnread, bodyRead) && b.state.Load() != bodyRead {
		return 0, errBodySealed
	}
	return b.r.Read(p)
}

func (b *guardedBody) Close() error { return nil }

// call sends one request to one route and decodes a 2xx answer into out.
// It returns nil, a *routeFailure or a *businessError.
//
// A guarded call (payouts and refunds: money leaves) sends its JSON body
// with "Expect: 100-continue": the transport sends the headers, and the
// body only once the provider asks for it (or after the transport's
// ExpectContinueTimeout). When the call fails and the body was never read
// by the transport, the body is sealed and the failure is marked unsent:
// the provider never had the amount or the recipient, so it cannot have
// moved money, and another route may be tried.
func (g *Gateway) call(ctx context.Context, rt xaalis.RouteSpec, method, path, idemKey string, guarded bool, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, rt.Timeout())
	defer cancel()
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("provider: encode request: %w", err)
		}
		body = b
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(rt.BaseURL, "/")+path, nil)
	if err != nil {
		return &routeFailure{cause: "bad base_url", err: err, unsent: true}
	}
	var bodyState atomic.Int32
	if body != nil {
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) {
			if guarded {
				return &guardedBody{r: bytes.NewReader(body), state: &bodyState}, nil
			}
			return io.NopCloser(bytes.NewReader(body)), nil
		}
		req.Body, _ = req.GetBody()
	}
	// unsent seals the body of a guarded request that failed: true when
	// the transport never read it.
	unsent := func() bool {
		return guarded && body != nil && bodyState.CompareAndSwap(bodyUnread, bodySealed)
	}
	req.Header.Set("Authorization", "Bearer "+rt.APIKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
		if guarded {
			req.Header.Set("Expect", "100-continue")
		}
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := g.opts.HTTPClient.Do(req)
	if err != nil {
		return &routeFailure{cause: failureCause(err), err: err, unsent: unsent()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		rf := &routeFailure{cause: failureCause(err), err: err}
		// A 2xx whose answer was cut off is never unsent: the provider
		// may have acted (an idempotent replay needs no body).
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			rf.unsent = unsent()
		}
		return rf
	}
	switch c := resp.StatusCode; {
	case c >= 500 || c == http.StatusTooManyRequests || c == http.StatusRequestTimeout:
		return &routeFailure{cause: fmt.Sprintf("http %d", c), unsent: unsent()}
	case c >= 400:
		var ae APIError
		_ = json.Unmarshal(b, &ae)
		be := &businessError{status: c, code: ae.Error.Code, message: ae.Error.Message}
		if be.code == "" {
			be.code = fmt.Sprintf("http_%d", c)
		}
		return be
	case c < 200 || c >= 300:
		return &routeFailure{cause: fmt.Sprintf("http %d", c)}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &routeFailure{cause: "bad response", err: err}
	}
	return nil
}

// failureCause names a transport error briefly.
func failureCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection closed"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "connection error"
}

// policy tunes tryRoutes for one kind of call.
type policy struct {
	// unsentOnly passes over a failed route only when the request
	// provably never reached it (routeFailure.unsent): payouts and
	// refunds move money without anyone's approval, so a request whose
	// outcome is unknown must not be sent again elsewhere. Any other
	// failure stops at once with gateway_unavailable.
	unsentOnly bool
	// notFound makes the call a lookup: a 404 {"error":{"code":"not_found"}}
	// is "this route does not know it", the next route is asked, and when
	// every route answered so, the result is not_found. Any other refusal
	// (but those refusal maps) tells nothing either way, as a failure
	// does: the next route is asked, and when none knows it, the answer is
	// gateway_unavailable, never gateway_error. Told "refused", a caller
	// would take a payout or refund the provider may have made for failed.
	notFound bool
	// refusal maps a business refusal to the error returned; nil is
	// gateway_error.
	refusal func(provider string, be *businessError) error
	// unknown ends the message of an unknown outcome (unsentOnly): what
	// the caller should do.
	unknown string
}

// tryRoutes runs call on the routes in order, skipping open breakers and
// passing over routes that fail, and returns the route that answered and
// why it was chosen. A business refusal stops at once as gateway_error.
func (g *Gateway) tryRoutes(ctx context.Context, provider, op string, routes []xaalis.RouteSpec, call func(context.Context, xaalis.RouteSpec) error) (string, string, error) {
	return g.tryRoutesWith(ctx, provider, op, routes, policy{}, call)
}

// tryRoutesWith is tryRoutes under a policy.
func (g *Gateway) tryRoutesWith(ctx context.Context, provider, op string, routes []xaalis.RouteSpec, pol policy, call func(context.Context, xaalis.RouteSpec) error) (string, string, error) {
	if len(routes) == 0 {
		return "", "", refuse(provider, "The provider %s has no live route configured.", provider)
	}
	var passed []string
	notFound := 0
	for _, rt := range routes {
		b := g.breaker(provider, rt.Name)
		if !b.allow(g.now()) {
			g.observe(provider, rt.Name, op, OutcomeCircuitOpen, 0)
			passed = append(passed, rt.Name+": circuit open")
			continue
		}
		start := time.Now()
		err := call(ctx, rt)
		g.observe(provider, rt.Name, op, outcome(ctx, err, pol), time.Since(start))
		var rf *routeFailure
		var be *businessError
		switch {
		case err == nil:
			if b.success() {
				g.log.Info("provider route recovered", "provider", provider, "route", rt.Name)
			}
			reason := "primary"
			if len(passed) > 0 {
				reason = "failover: " + strings.Join(passed, "; ")
			}
			return rt.Name, reason, nil
		case errors.As(err, &be) && pol.notFound && be.status == http.StatusNotFound && be.code == CodeNotFound:
			b.success()
			notFound++
			passed = append(passed, rt.Name+": not found")
		case errors.As(err, &be):
			b.success()
			g.log.Info("provider refused", "provider", provider, "route", rt.Name, "op", op, "status", be.status, "code", be.code)
			if pol.refusal != nil {
				if err := pol.refusal(provider, be); err != nil {
					return rt.Name, "", err
				}
			}
			if pol.notFound {
				passed = append(passed, rt.Name+": refused ("+be.code+")")
				continue
			}
			msg := be.message
			if msg == "" {
				msg = "no message"
			}
			return rt.Name, "", refuse(provider, "The provider %s refused the request: %s (%s).", provider, msg, be.code)
		case errors.As(err, &rf):
			if ctx.Err() != nil {
				// The request may have left: its route is returned, as
				// for an unknown outcome.
				b.release()
				return rt.Name, "", unavailable(provider, 5*time.Second, "The request to the provider %s was cancelled.", provider)
			}
			opened := b.failure(g.now())
			g.log.Warn("provider route failed", "provider", provider, "route", rt.Name, "op", op, "cause", rf.cause, "unsent", rf.unsent, "err", err)
			if opened {
				g.log.Warn("provider route circuit opened", "provider", provider, "route", rt.Name)
			}
			if pol.unsentOnly && !rf.unsent {
				return rt.Name, "", unavailable(provider, 5*time.Second,
					"The outcome of the %s on the provider %s is unknown (%s: %s): %s.", op, provider, rt.Name, rf.cause, pol.unknown)
			}
			passed = append(passed, rt.Name+": "+rf.cause)
		default:
			b.release()
			return "", "", err
		}
	}
	if pol.notFound && notFound == len(routes) {
		// xaalis.ErrNotFound itself, so that both errors.Is and
		// xaalis.ErrorCode recognise it.
		return "", "", xaalis.ErrNotFound
	}
	return "", "", g.noRoute(provider, routes, passed)
}

// outcome classifies a route's answer for the Observer.
func outcome(ctx context.Context, err error, pol policy) string {
	var rf *routeFailure
	var be *businessError
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &be) && pol.notFound && be.status == http.StatusNotFound && be.code == CodeNotFound:
		return OutcomeNotFound
	case errors.As(err, &be):
		return OutcomeRefused
	case ctx.Err() != nil:
		return OutcomeCancelled
	case errors.As(err, &rf):
		return OutcomeFailure
	}
	return OutcomeFailure
}

// noRoute is the gateway_unavailable when every route was passed over:
// RetryAfter is the time until the earliest open breaker half-opens (at
// least 1 s), or 5 s when no breaker is open.
func (g *Gateway) noRoute(provider string, routes []xaalis.RouteSpec, passed []string) error {
	now := g.now()
	retry := time.Duration(-1)
	for _, rt := range routes {
		st, wait := g.breaker(provider, rt.Name).snapshot(now)
		if st == BreakerClosed {
			continue
		}
		if retry < 0 || wait < retry {
			retry = wait
		}
	}
	switch {
	case retry < 0:
		retry = 5 * time.Second
	case retry < time.Second:
		retry = time.Second
	default:
		// Whole seconds, rounded up: Retry-After must not invite an early retry.
		retry = (retry + time.Second - 1).Truncate(time.Second)
	}
	return unavailable(provider, retry, "No route to the provider %s is available (%s).", provider, strings.Join(passed, "; "))
}

func (g *Gateway) liveInitiate(ctx context.Context, r xaalis.InitiateRequest) (xaalis.Initiation, error) {
	spec, err := g.checkServes(r.Provider, r.Country)
	if err != nil {
		return xaalis.Initiation{}, err
	}
	body := CollectionRequest{
		Reference: r.Reference,
		Amount:    r.Amount.Minor,
		Currency:  string(r.Amount.Currency),
		Phone:     r.PayerPhone,
		Country:   string(r.Country),
		PayerName: r.PayerName,
		NotifyURL: r.NotifyURL,
		ExpiresAt: r.ExpiresAt.UTC(),
	}
	if spec.SubMerchant {
		body.SubMerchant = r.SubMerchant
	}
	key := r.Reference
	if key == "" {
		key = r.TransactionID
	}
	var col Collection
	route, reason, err := g.tryRoutes(ctx, r.Provider, "initiate", spec.Routes, func(ctx context.Context, rt xaalis.RouteSpec) error {
		var c Collection
		if err := g.call(ctx, rt, http.MethodPost, "/collections", key, false, body, &c); err != nil {
			return err
		}
		if _, ok := state(c.Status); !ok || c.ID == "" {
			return &routeFailure{cause: "bad response", err: fmt.Errorf("collection %q status %q", c.ID, c.Status)}
		}
		col = c
		return nil
	})
	if err != nil {
		return xaalis.Initiation{}, err
	}
	st, _ := state(col.Status)
	in := xaalis.Initiation{ProviderRef: col.ID, State: st, Reason: col.Reason, Route: route, RouteReason: reason}
	if st == xaalis.ProviderPending {
		in.NextAction = col.NextAction
	}
	if reason != "primary" {
		g.log.Warn("provider failover", "provider", r.Provider, "reference", r.Reference, "route", route, "reason", reason)
	}
	return in, nil
}

// orderFrom puts the named route first, then the others in order.
func orderFrom(routes []xaalis.RouteSpec, first string) []xaalis.RouteSpec {
	out := make([]xaalis.RouteSpec, 0, len(routes))
	for _, rt := range routes {
		if rt.Name == first {
			out = append(out, rt)
		}
	}
	for _, rt := range routes {
		if rt.Name != first {
			out = append(out, rt)
		}
	}
	return out
}

// collectionStatus checks a provider's answer about one collection.
func collectionStatus(c Collection) (xaalis.ProviderStatus, error) {
	st, ok := state(c.Status)
	if !ok {
		return xaalis.ProviderStatus{}, &routeFailure{cause: "bad response", err: fmt.Errorf("status %q", c.Status)}
	}
	return xaalis.ProviderStatus{State: st, Reason: c.Reason}, nil
}

func (g *Gateway) liveStatus(ctx context.Context, provider, route, ref string) (xaalis.ProviderStatus, error) {
	spec, ok := g.spec(provider)
	if !ok {
		return xaalis.ProviderStatus{}, refuse(provider, "The provider %q is not configured.", provider)
	}
	var out xaalis.ProviderStatus
	_, _, err := g.tryRoutes(ctx, provider, "status", orderFrom(spec.Routes, route), func(ctx context.Context, rt xaalis.RouteSpec) error {
		var c Collection
		if err := g.call(ctx, rt, http.MethodGet, "/collections/"+url.PathEscape(ref), "", false, nil, &c); err != nil {
			return err
		}
		st, err := collectionStatus(c)
		out = st
		return err
	})
	return out, err
}

// liveCollection asks the provider's routes about a collection by
// reference (GET {base}/collections?reference=), the first that knows it
// answering; xaalis.ErrNotFound when none does.
func (g *Gateway) liveCollection(ctx context.Context, provider, reference string) (xaalis.Initiation, error) {
	spec, ok := g.spec(provider)
	if !ok {
		return xaalis.Initiation{}, refuse(provider, "The provider %q is not configured.", provider)
	}
	var out xaalis.Initiation
	route, reason, err := g.tryRoutesWith(ctx, provider, "status", spec.Routes, policy{notFound: true}, func(ctx context.Context, rt xaalis.RouteSpec) error {
		var c Collection
		if err := g.call(ctx, rt, http.MethodGet, "/collections?reference="+url.QueryEscape(reference), "", false, nil, &c); err != nil {
			return err
		}
		if c.ID == "" || (c.Reference != "" && c.Reference != reference) {
			return &routeFailure{cause: "bad response", err: fmt.Errorf("collection %q reference %q", c.ID, c.Reference)}
		}
		st, err := collectionStatus(c)
		if err != nil {
			return err
		}
		out = xaalis.Initiation{ProviderRef: c.ID, State: st.State, Reason: st.Reason}
		return nil
	})
	if err != nil {
		return xaalis.Initiation{}, err
	}
	out.Route, out.RouteReason = route, reason
	return out, nil
}

func (g *Gateway) liveOTP(ctx context.Context, provider, route, ref, otp string) (xaalis.ProviderStatus, error) {
	spec, _ := g.spec(provider)
	var out xaalis.ProviderStatus
	_, _, err := g.tryRoutes(ctx, provider, "otp", orderFrom(spec.Routes, route), func(ctx context.Context, rt xaalis.RouteSpec) error {
		var c Collection
		if err := g.call(ctx, rt, http.MethodPost, "/collections/"+url.PathEscape(ref)+"/otp", "", false, OTPRequest{OTP: otp}, &c); err != nil {
			return err
		}
		st, err := collectionStatus(c)
		out = st
		return err
	})
	return out, err
}
