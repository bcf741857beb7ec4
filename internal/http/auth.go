package http

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// access levels of a route.
type routeAuth struct {
	// scopes a secret key must carry, every one of them.
	scopes []xaalis.Scope
	// publishable keys may call the route (payment creation, status).
	publishable bool
	// changesNothing marks a POST that writes nothing (the payment
	// precheck): it takes no Idempotency-Key, as there is nothing to run
	// twice nor an answer to keep. The one exception among mutating routes.
	changesNothing bool
}

// secretKey is a route for secret keys carrying every one of scopes.
func secretKey(scopes ...xaalis.Scope) routeAuth { return routeAuth{scopes: scopes} }

// presentedKey reads the key from Authorization: Bearer or X-API-Key.
func presentedKey(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token), true
		}
		return "", true // some credential was sent, in a form we do not take
	}
	if k := r.Header.Get("X-API-Key"); k != "" {
		return strings.TrimSpace(k), true
	}
	return "", false
}

// api wraps an authenticated route: the key is checked, the per-key rate
// limit taken, the route's permission checked, and mutating methods run
// under their Idempotency-Key.
func (s *Server) api(ra routeAuth, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, sent := presentedKey(r)
		if !sent {
			Error(w, r, xaalis.E(xaalis.ECredentialsMissing))
			return
		}
		if secret == "" {
			Error(w, r, s.authFailed(r, xaalis.Errorf(xaalis.EUnauthorized, "Send the API key as `Authorization: Bearer <key>` or `X-API-Key: <key>`.")))
			return
		}
		// A request that runs under its Idempotency-Key reads the key's row
		// with the API key's (knownKey): a replay is then answered from that
		// one read, and a new key costs no read of its own.
		idemKey := ""
		if mutating(r.Method) && !ra.changesNothing {
			if key := r.Header.Get("Idempotency-Key"); checkIdempotencyKey(key) == nil {
				idemKey = key
			}
		}
		p, rec, err := s.App.AuthenticateIdempotent(r.Context(), secret, clientIP(r), idemKey)
		if err != nil {
			Error(w, r, s.authFailed(r, err))
			return
		}
		if acc, ok := r.Context().Value(ctxAccess).(*access); ok {
			acc.merchantID, acc.keyID = p.Merchant.ID, p.Key.ID
		}
		if ok, wait := s.limiters.allow(p.Key.ID, rate.Limit(s.Config.RateLimit), s.Config.RateBurst, time.Now()); !ok {
			Error(w, r, tooManyRequests(wait, "Rate limit of this API key reached; retry after Retry-After seconds."))
			return
		}
		if p.Key.Type == xaalis.KeyPublishable && !ra.publishable {
			Error(w, r, xaalis.Errorf(xaalis.EForbidden, "Publishable keys may only create payments and read their status; use a secret key from your server."))
			return
		}
		if p.Key.Type == xaalis.KeySecret {
			for _, sc := range ra.scopes {
				if !p.Key.HasScope(sc) {
					Error(w, r, xaalis.E(xaalis.EScopeInsufficient, "required_scope", string(sc)))
					return
				}
			}
		}
		// Query parameters never reach a handler, a log line or a
		// fingerprint with control characters or invalid UTF-8.
		if err := checkQuery(r.URL.RawQuery); err != nil {
			Error(w, r, err)
			return
		}
		if id := r.PathValue("id"); id != "" && idsOnly(r.URL.Path) {
			// These routes' {id} is a UUID (a dispute's, or its DSP-
			// reference): found in either case, as a payment's is.
			r.SetPathValue("id", xaalis.UUIDLower(id))
		}
		ctx := context.WithValue(r.Context(), ctxPrincipal, p)
		if idemKey != "" {
			ctx = context.WithValue(ctx, ctxKnownKey, knownKey{key: idemKey, rec: rec})
		}
		r = r.WithContext(ctx)
		if mutating(r.Method) {
			if !ra.changesNothing {
				s.idempotent(w, r, h)
				return
			}
			// A key sent is ignored, but held to the same rules as where it
			// counts: a client that sends a malformed one learns it here.
			if key := r.Header.Get("Idempotency-Key"); key != "" {
				if err := checkHeader("Idempotency-Key", key); err != nil {
					Error(w, r, err)
					return
				}
			}
			// Bounded as idempotent() bounds the bodies it reads.
			r.Body = http.MaxBytesReader(w, r.Body, s.Config.MaxBodyBytes)
		}
		h(w, r)
	})
}

// throttled limits a route without an API key (the hosted page, provider
// notifications) per client address, so that one address cannot flood it.
func (s *Server) throttled(l *limiters, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		lim, burst := s.Config.PageRateLimit, s.Config.PageRateBurst
		if l == &s.notifyLimits {
			lim, burst = s.Config.NotifyRateLimit, s.Config.NotifyRateBurst
		}
		if lim > 0 {
			if ok, wait := l.allow(addressKey(clientIP(r)), rate.Limit(lim), burst, time.Now()); !ok {
				// Kept by no cache, as the pages themselves: a cached 429
				// would refuse the page after the limit passed.
				w.Header().Set("Cache-Control", "no-store")
				Error(w, r, tooManyRequests(wait, "Too many requests from this address; retry after Retry-After seconds."))
				return
			}
		}
		h(w, r)
	}
}

// addressKey is the limiter key of a client address: an IPv6 client by
// its /64, which one subscriber usually holds whole.
func addressKey(ip netip.Addr) string {
	if ip.Is6() && !ip.Is4In6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// idsOnly reports whether a path's {id} names an object by its UUID (or a
// reference no UUID resembles), never by a merchant's own text: there an
// id in upper case is the same id. A payment's {id} may be a merchant_ref
// that only looks like a UUID; lookup tries it as written first.
func idsOnly(path string) bool {
	for _, p := range []string{"/v1/plans/", "/v1/customers/", "/v1/subscriptions/", "/v1/events/", "/v1/webhook-endpoints/", "/v1/disputes/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
