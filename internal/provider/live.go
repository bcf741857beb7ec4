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

// call sends one request to one route and decodes a 2xx answer into out.
// It returns nil, a *routeFailure or a *businessError.
func (g *Gateway) call(ctx context.Context, rt xaalis.RouteSpec, method, path, idemKey string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, rt.Timeout())
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("provider: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(rt.BaseURL, "/")+path, body)
	if err != nil {
		return &routeFailure{cause: "bad base_url", err: err}
	}
	req.Header.Set("Authorization", "Bearer "+rt.APIKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := g.opts.HTTPClient.Do(req)
	if err != nil {
		return &routeFailure{cause: failureCause(err), err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return &routeFailure{cause: failureCause(err), err: err}
	}
	switch c := resp.StatusCode; {
	case c >= 500 || c == http.StatusTooManyRequests || c == http.StatusRequestTimeout:
		return &routeFailure{cause: fmt.Sprintf("http %d", c)}
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

// tryRoutes runs call on the routes in order, skipping open breakers and
// passing over routes that fail, and returns the route that answered and
// why it was chosen. A business refusal stops at once as gateway_error.
func (g *Gateway) tryRoutes(ctx context.Context, provider, op string, routes []xaalis.RouteSpec, call func(context.Context, xaalis.RouteSpec) error) (string, string, error) {
	if len(routes) == 0 {
		return "", "", refuse(provider, "The provider %s has no live route configured.", provider)
	}
	var passed []string
	for _, rt := range routes {
		b := g.breaker(provider, rt.Name)
		if !b.allow(g.now()) {
			passed = append(passed, rt.Name+": circuit open")
			continue
		}
		err := call(ctx, rt)
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
		case errors.As(err, &be):
			b.success()
			g.log.Info("provider refused", "provider", provider, "route", rt.Name, "op", op, "status", be.status, "code", be.code)
			msg := be.message
			if msg == "" {
				msg = "no message"
			}
			return rt.Name, "", refuse(provider, "The provider %s refused the request: %s (%s).", provider, msg, be.code)
		case errors.As(err, &rf):
			if ctx.Err() != nil {
				b.release()
				return "", "", unavailable(provider, 5*time.Second, "The request to the provider %s was cancelled.", provider)
			}
			opened := b.failure(g.now())
			g.log.Warn("provider route failed", "provider", provider, "route", rt.Name, "op", op, "cause", rf.cause, "err", err)
			if opened {
				g.log.Warn("provider route circuit opened", "provider", provider, "route", rt.Name)
			}
			passed = append(passed, rt.Name+": "+rf.cause)
		default:
			b.release()
			return "", "", err
		}
	}
	return "", "", g.noRoute(provider, routes, passed)
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
		if err := g.call(ctx, rt, http.MethodPost, "/collections", key, body, &c); err != nil {
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
	in := xaalis.Initiation{ProviderRef: col.ID, State: st, Route: route, RouteReason: reason}
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
		if err := g.call(ctx, rt, http.MethodGet, "/collections/"+url.PathEscape(ref), "", nil, &c); err != nil {
			return err
		}
		st, err := collectionStatus(c)
		out = st
		return err
	})
	return out, err
}

func (g *Gateway) liveOTP(ctx context.Context, provider, route, ref, otp string) (xaalis.ProviderStatus, error) {
	spec, _ := g.spec(provider)
	var out xaalis.ProviderStatus
	_, _, err := g.tryRoutes(ctx, provider, "otp", orderFrom(spec.Routes, route), func(ctx context.Context, rt xaalis.RouteSpec) error {
		var c Collection
		if err := g.call(ctx, rt, http.MethodPost, "/collections/"+url.PathEscape(ref)+"/otp", "", OTPRequest{OTP: otp}, &c); err != nil {
			return err
		}
		st, err := collectionStatus(c)
		out = st
		return err
	})
	return out, err
}
