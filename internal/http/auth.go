package http

import (
	"context"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// access levels of a route.
type routeAuth struct {
	// scope a secret key must carry.
	scope xaalis.Scope
	// publishable keys may call the route (payment creation, status).
	publishable bool
}

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
			Error(w, r, xaalis.Errorf(xaalis.EUnauthorized, "Send the API key as `Authorization: Bearer <key>` or `X-API-Key: <key>`."))
			return
		}
		p, err := s.App.Authenticate(r.Context(), secret, clientIP(r))
		if err != nil {
			Error(w, r, err)
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
		if p.Key.Type == xaalis.KeySecret && ra.scope != "" && !p.Key.HasScope(ra.scope) {
			Error(w, r, xaalis.E(xaalis.EScopeInsufficient, "required_scope", string(ra.scope)))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxPrincipal, p))
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			s.idempotent(w, r, h)
		default:
			h(w, r)
		}
	})
}
