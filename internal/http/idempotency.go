package http

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// idemState is the claim a mutating request holds on its Idempotency-Key.
type idemState struct {
	scope xaalis.IdempotencyScope
	token string
	// Set by the commit hook inside the command's transaction.
	status int
	body   []byte
	// stored: the command committed with its response.
	stored bool
}

// idempotent runs h at most once per Idempotency-Key (spec: Idempotency).
// A response the command stores in its own transaction (see committing) is
// never lost between action and record; an answer that changed nothing is
// stored afterwards; 5xx and 429 answers are forgotten so a retry runs.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		Error(w, r, xaalis.E(xaalis.EIdempotencyKeyRequired))
		return
	}
	if utf8.RuneCountInString(key) > xaalis.IdempotencyKeyMaxLen {
		Error(w, r, xaalis.E(xaalis.EIdempotencyKeyTooLong, "max_length", xaalis.IdempotencyKeyMaxLen))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.Config.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			Error(w, r, xaalis.E(xaalis.ERequestTooLarge, "max_bytes", s.Config.MaxBodyBytes))
			return
		}
		Error(w, r, xaalis.Errorf(xaalis.EInvalidRequest, "The request body could not be read."))
		return
	}
	p := principal(r)
	st := &idemState{
		scope: xaalis.IdempotencyScope{MerchantID: p.Merchant.ID, Mode: p.Mode(), Key: key},
		token: xaalis.RandomString(24, keyAlphabet),
	}
	res, err := s.App.Store.ClaimIdempotency(r.Context(), xaalis.Claim{
		Scope:       st.scope,
		Fingerprint: xaalis.Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, body),
		Token:       st.token,
		Now:         s.App.Now(),
		Lease:       s.Config.IdempotencyLease,
		QuotaLimit:  s.Config.IdempotencyQuota,
		QuotaWindow: s.Config.IdempotencyQuotaWindow,
	})
	if err != nil {
		Error(w, r, err)
		return
	}
	switch res.Outcome {
	case xaalis.ClaimReplay:
		hd := w.Header()
		hd.Set("Idempotent-Replay", "true")
		if res.Response.Location != "" {
			hd.Set("Location", res.Response.Location)
		}
		hd.Set("Content-Type", res.Response.ContentType)
		w.WriteHeader(res.Response.Status)
		_, _ = w.Write(res.Response.Body)
		return
	case xaalis.ClaimConflict:
		Error(w, r, xaalis.Errorf(xaalis.EIdempotencyConflict, "This Idempotency-Key was already used with a different request; use a new key for a new request."))
		return
	case xaalis.ClaimInFlight:
		Error(w, r, xaalis.Errorf(xaalis.EIdempotencyConflict, "A request with this Idempotency-Key is still in flight; retry once it has finished."))
		return
	case xaalis.ClaimQuotaExceeded:
		Error(w, r, tooManyRequests(res.RetryAfter, "Quota of new Idempotency-Keys for this account reached; retry after Retry-After seconds. Replays are not counted."))
		return
	}

	rec := &teeWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), ctxIdempotency, st))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	ctx := context.WithoutCancel(r.Context())
	defer func() {
		// Runs on panic too, so that a crashed request does not keep its key.
		if st.stored {
			return
		}
		if rec.status >= 500 || rec.status == http.StatusTooManyRequests || rec.status == 0 || rec.status == http.StatusConflict {
			if err := s.App.Store.ReleaseIdempotency(ctx, st.scope, st.token); err != nil {
				logger(ctx).Error("release idempotency key", "request_id", requestID(ctx), "error", err)
			}
			return
		}
		err := s.App.Store.CompleteIdempotency(ctx, st.scope, st.token, xaalis.StoredResponse{
			Status: rec.status, ContentType: rec.Header().Get("Content-Type"),
			Location: rec.Header().Get("Location"), Body: rec.buf.Bytes(),
		})
		if err != nil {
			logger(ctx).Error("store idempotent response", "request_id", requestID(ctx), "error", err)
		}
	}()
	h(rec, r)
}

// teeWriter keeps a copy of the response to store it.
type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (t *teeWriter) WriteHeader(s int) {
	if t.status == 0 {
		t.status = s
	}
	t.ResponseWriter.WriteHeader(s)
}

func (t *teeWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	t.buf.Write(b)
	return t.ResponseWriter.Write(b)
}

// committing returns the request's context carrying a commit hook: the
// command stores its own response, rendered as status, for the request's
// Idempotency-Key inside its transaction.
func (s *Server) committing(r *http.Request, status int) context.Context {
	st, _ := r.Context().Value(ctxIdempotency).(*idemState)
	if st == nil {
		return r.Context()
	}
	live := principal(r).Mode().Live()
	return xaalis.WithCommitHook(r.Context(), func(ctx context.Context, tx xaalis.Tx, result any) error {
		body, err := encodeRecord(result, live)
		if err != nil {
			return err
		}
		if err := tx.CompleteIdempotency(ctx, st.scope, st.token, xaalis.StoredResponse{
			Status: status, ContentType: "application/json", Body: body,
		}); err != nil {
			return err
		}
		st.status, st.body = status, body
		return nil
	})
}
