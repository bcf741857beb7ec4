package http

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// errorBody is the error envelope of the specification.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code             xaalis.Code         `json:"code"`
	Message          string              `json:"message"`
	Context          map[string]any      `json:"context,omitempty"`
	DocumentationURL string              `json:"documentation_url"`
	Errors           map[string][]string `json:"errors,omitempty"`
}

// Error writes err as the error envelope. Every error leaves the API
// through here. An error that is not an *xaalis.Error is logged in full
// and answered as 500 api_error carrying only the request id.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	var refused *xaalis.ClaimRefused
	if errors.As(err, &refused) {
		// The command's transaction found its Idempotency-Key taken.
		writeClaimOutcome(w, r, refused.Result)
		return
	}
	var e *xaalis.Error
	if !errors.As(err, &e) {
		rid := requestID(r.Context())
		if !errors.Is(err, context.Canceled) {
			logger(r.Context()).LogAttrs(r.Context(), slog.LevelError, "internal error",
				slog.String("request_id", rid), slog.String("error", err.Error()))
		}
		e = xaalis.E(xaalis.EInternal, "request_id", rid)
	} else if e.Cause != nil {
		// The client sees the code and message; the log keeps the cause
		// (a driver's error behind service_unavailable).
		logger(r.Context()).LogAttrs(r.Context(), slog.LevelWarn, "service unavailable",
			slog.String("request_id", requestID(r.Context())), slog.String("code", string(e.Code)), slog.String("cause", e.Cause.Error()))
	}
	entry, ok := xaalis.Lookup(e.Code)
	if !ok {
		entry, _ = xaalis.Lookup(xaalis.EInternal)
	}
	msg := e.Text()
	if msg == "" {
		msg = entry.Message
	}
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	} else if entry.Status == http.StatusTooManyRequests || entry.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	if len(e.Allow) > 0 {
		h.Set("Allow", strings.Join(e.Allow, ", "))
	}
	switch {
	case e.Code == xaalis.EInvalidSignature:
		// A provider's notification is authenticated by its signature
		// header, not by a Bearer key: the challenge names that scheme.
		h.Set("WWW-Authenticate", ProviderSignatureChallenge)
	case entry.Status == http.StatusUnauthorized:
		// RFC 9110 11.6.1: a 401 names the scheme that authenticates.
		h.Set("WWW-Authenticate", `Bearer realm="xaalis"`)
	}
	var fields map[string][]string
	if e.Code == xaalis.EValidation {
		fields = e.Fields
		if fields == nil {
			fields = map[string][]string{}
		}
	}
	writeJSON(w, entry.Status, errorBody{Error: errorObject{
		Code: e.Code, Message: msg, Context: e.Context,
		DocumentationURL: xaalis.DocumentationURL(e.Code), Errors: fields,
	}})
}

// writeJSON encodes v with a trailing newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error reaches here: every record marshals.
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"api_error","message":"An internal error occurred; report it with the request id.","documentation_url":"https://docs.xaalis.dev/errors#api_error"}}`)
	}
	writeBytes(w, status, append(b, '\n'))
}

func writeBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// retryAfter returns a too_many_requests error asking to wait d.
func tooManyRequests(d time.Duration, msg string) *xaalis.Error {
	if d < time.Second {
		d = time.Second
	}
	return &xaalis.Error{Code: xaalis.ETooManyRequests, Message: msg, RetryAfter: d}
}

// ProviderSignatureChallenge is the WWW-Authenticate of a provider
// notification's 401 (RFC 9110 11.6.1 asks every 401 for one): the
// scheme is the X-Provider-Signature header's HMAC-SHA256.
const ProviderSignatureChallenge = `X-Provider-Signature realm="xaalis-provider-notifications", algorithm="hmac-sha256"`
