package http

import (
	"net/http"
)

// Browsers call the routes a publishable key may call (payment creation
// and its status) from a merchant's web page, on another origin: those
// two answer CORS. A publishable key is public and the API uses no
// cookies, so any origin may read their answers ("*"); the return hosts
// still bound where the hosted page sends the payer. A preflight carries
// no key, so it cannot be told by merchant. Other routes answer no CORS:
// a secret key belongs on a server.

// corsHeaders are the request headers a browser may send to those routes.
const corsHeaders = "Authorization, Content-Type, Idempotency-Key, X-API-Key"

// corsExposed are the answer headers a page's script may read.
const corsExposed = "X-Request-Id, Idempotent-Replay, Retry-After"

// browserCORS lets a page's script read h's answers, errors included (an
// authentication error is answered before the handler runs).
func browserCORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Expose-Headers", corsExposed)
		}
		h.ServeHTTP(w, r)
	})
}

// preflight answers a browser's CORS preflight (OPTIONS) for a route of
// the given method: 204, cached by the browser for ten minutes. allow is
// every method of the path, as a 405 there names them.
func preflight(method, allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", method)
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", "600")
		h.Set("Allow", allow)
		w.WriteHeader(http.StatusNoContent)
	}
}
