package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// idemState is the claim a mutating request holds on its Idempotency-Key.
type idemState struct {
	scope xaalis.IdempotencyScope
	token string
	claim *xaalis.PendingClaim
	// Set by the commit hook inside the command's transaction.
	status int
	body   []byte
	// stored: the command committed with its response.
	stored bool
}

// idempotent runs h at most once per Idempotency-Key (spec: Idempotency).
//
// A key already known answers from its row, read without writing: the
// stored response again (a replay), or 409. A new key is claimed inside
// the first transaction of the command (App.update), so a command done in
// one transaction (a test-mode payment, a plan) commits its record, its
// claim and its stored answer with one fsync, and nothing is ever done
// without its answer or the reverse. An answer that changed nothing (a
// validation error) is stored afterwards; 5xx and 429 answers are
// forgotten so a retry runs.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	key := r.Header.Get("Idempotency-Key")
	if err := checkIdempotencyKey(key); err != nil {
		Error(w, r, err)
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
		scope: xaalis.IdempotencyScope{MerchantID: p.Merchant.ID, Mode: p.Mode(), KeyType: p.Key.Type, Key: key},
		token: xaalis.RandomString(24, keyAlphabet),
	}
	quota := s.Config.IdempotencyQuota
	if p.Key.Type == xaalis.KeyPublishable {
		quota = s.Config.IdempotencyQuotaPublishable
	}
	claim := xaalis.Claim{
		Scope:       st.scope,
		Fingerprint: xaalis.Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, body),
		Token:       st.token,
		Now:         s.App.Now(),
		Instance:    s.App.InstanceID(),
		OwnerStale:  s.App.OwnerStale(),
		Running:     s.App.ClaimRunning,
		Lease:       s.Config.IdempotencyLease,
		QuotaLimit:  quota,
		QuotaWindow: s.Config.IdempotencyQuotaWindow,
	}
	// While this request runs, its claim is this instance's: a key of ours
	// that no request of ours runs was left behind, and is taken over.
	running := s.App.HoldClaim(st.token)
	defer running()
	// A known key answers from its row: a replay costs one read, the one
	// that authenticated the request (knownKey).
	var rec *xaalis.IdempotencyRecord
	if known, ok := r.Context().Value(ctxKnownKey).(knownKey); ok && known.key == key {
		if rec, err = known.rec, nil; rec == nil {
			err = xaalis.ErrNotFound
		}
	} else {
		rec, err = s.App.Store.IdempotencyKey(r.Context(), st.scope)
	}
	switch {
	case errors.Is(err, xaalis.ErrNotFound):
		// The store may write the key with the command's answer, once.
		claim.Unseen = true
	case err != nil:
		Error(w, r, err)
		return
	default:
		if res := rec.Outcome(claim); res.Outcome != xaalis.ClaimAcquired {
			if res.Outcome == xaalis.ClaimReplay {
				s.App.CountReplay()
			}
			writeClaimOutcome(w, r, res)
			return
		}
	}

	// A second request with a key this process is running answers 409 at
	// once (spec: "Key in flight (concurrent request)"). Without this, a
	// command done in one transaction never shows its claim before its
	// COMMIT, and the second request waited for it to replay its answer.
	// The key stays held until its answer is stored (the deferred function
	// below runs first); requests to another process meet the claim in the
	// database as before.
	// The running request's fingerprint is kept: another request under
	// its key is a conflict (no Retry-After: no retry mends it), not the
	// same request in flight.
	if held, busy := s.inFlight.LoadOrStore(st.scope, string(claim.Fingerprint)); busy {
		outcome := xaalis.ClaimInFlight
		if held.(string) != string(claim.Fingerprint) {
			outcome = xaalis.ClaimConflict
		}
		writeClaimOutcome(w, r, xaalis.ClaimResult{Outcome: outcome})
		return
	}
	defer s.inFlight.Delete(st.scope)

	st.claim = &xaalis.PendingClaim{Claim: claim}
	rec2 := &teeWriter{ResponseWriter: w}
	ctx := xaalis.WithPendingClaim(context.WithValue(r.Context(), ctxIdempotency, st), st.claim)
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	bg := context.WithoutCancel(ctx)
	defer func() {
		// Runs on panic too, so that a crashed request does not keep its key.
		if rec2.replayed {
			s.App.CountReplay()
		}
		if st.stored || rec2.refused {
			return
		}
		taken := st.claim.Taken()
		if rec2.status >= 500 || rec2.status == http.StatusTooManyRequests || rec2.status == http.StatusConflict || rec2.status == 0 {
			if taken {
				release := func(ctx context.Context) error { return s.App.Store.ReleaseIdempotency(ctx, st.scope, st.token) }
				if err := release(bg); err != nil {
					// The database is away: forget the claim once it is back,
					// so that a retry to another instance runs (this one
					// takes over its own left claims at once).
					logger(bg).Error("release idempotency key; retried later", "request_id", requestID(bg), "error", err)
					s.App.RetryLater(release)
				}
			}
			return
		}
		resp := xaalis.StoredResponse{Status: rec2.status, ContentType: rec2.Header().Get("Content-Type"),
			Location: rec2.Header().Get("Location"), Body: rec2.buf.Bytes()}
		if taken {
			complete := func(ctx context.Context) error {
				err := s.App.Store.CompleteIdempotency(ctx, st.scope, st.token, resp)
				if errors.Is(err, xaalis.ErrClaimLost) {
					return nil // taken over meanwhile: the new holder answers
				}
				return err
			}
			if err := complete(bg); err != nil {
				logger(bg).Error("store idempotent response; retried later", "request_id", requestID(bg), "error", err)
				s.App.RetryLater(complete)
			}
		} else if err := s.App.StoreAnswer(bg, claim, resp); err != nil {
			// The command changed nothing: the key and its answer commit
			// together now. A key a concurrent request took meanwhile
			// keeps that request's answer.
			logger(bg).Error("store idempotent response", "request_id", requestID(bg), "error", err)
		}
	}()
	h(rec2, r)
}

// knownKey is the row of a request's Idempotency-Key, read with its API
// key (App.AuthenticateIdempotent): rec is nil when the key is new.
type knownKey struct {
	key string
	rec *xaalis.IdempotencyRecord
}

// mutating reports whether a method runs under an Idempotency-Key (unless
// its route changes nothing).
func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// checkIdempotencyKey returns idempotency_key_required,
// idempotency_key_too_long, or the input hygiene rules' error: the key is
// stored.
func checkIdempotencyKey(key string) error {
	if key == "" {
		return xaalis.E(xaalis.EIdempotencyKeyRequired)
	}
	if utf8.RuneCountInString(key) > xaalis.IdempotencyKeyMaxLen {
		return xaalis.E(xaalis.EIdempotencyKeyTooLong, "max_length", xaalis.IdempotencyKeyMaxLen)
	}
	return checkHeader("Idempotency-Key", key)
}

// writeClaimOutcome answers a request whose Idempotency-Key is taken.
func writeClaimOutcome(w http.ResponseWriter, r *http.Request, res xaalis.ClaimResult) {
	if t, ok := w.(*teeWriter); ok {
		t.refused = true
	}
	switch res.Outcome {
	case xaalis.ClaimReplay:
		if t, ok := w.(*teeWriter); ok {
			t.replayed = true
		}
		hd := w.Header()
		hd.Set("Idempotent-Replay", "true")
		if res.Response.Location != "" {
			hd.Set("Location", res.Response.Location)
		}
		hd.Set("Content-Type", res.Response.ContentType)
		w.WriteHeader(res.Response.Status)
		_, _ = w.Write(replayView(r, res.Response.Body))
	case xaalis.ClaimConflict:
		Error(w, r, xaalis.Errorf(xaalis.EIdempotencyConflict, "This Idempotency-Key was already used with a different request; use a new key for a new request."))
	case xaalis.ClaimInFlight:
		// Retry-After tells it from a key used with another request
		// (which no retry mends): a client that meets its own request
		// still running (an answer lost, the same request sent again at
		// once) retries it, and gets its answer once it has finished.
		e := xaalis.Errorf(xaalis.EIdempotencyConflict, "A request with this Idempotency-Key is still in flight; retry once it has finished.")
		e.RetryAfter = time.Second
		Error(w, r, e)
	case xaalis.ClaimQuotaExceeded:
		Error(w, r, tooManyRequests(res.RetryAfter, "Quota of new Idempotency-Keys for this account reached; retry after Retry-After seconds. Replays are not counted."))
	default:
		Error(w, r, fmt.Errorf("unexpected claim outcome %d", res.Outcome))
	}
}

// teeWriter keeps a copy of the response to store it.
type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
	// refused: the answer is the key's (a replay, 409, 429), not the
	// request's own.
	refused bool
	// replayed: the answer is the key's stored response, counted for
	// xaalis_idempotency_replays_total.
	replayed bool
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
	return s.committingAs(r, status, nil)
}

// committingAs is committing for a handler that answers view(result)
// rather than the command's result (nil: the result itself), so that
// the stored answer, which the request is answered from, is the one its
// handler gives.
func (s *Server) committingAs(r *http.Request, status int, view func(any) any) context.Context {
	st, _ := r.Context().Value(ctxIdempotency).(*idemState)
	if st == nil {
		return r.Context()
	}
	live := principal(r).Mode().Live()
	return xaalis.WithCommitHook(r.Context(), func(ctx context.Context, tx xaalis.Tx, result any) error {
		if view != nil {
			result = view(result)
		}
		body, err := encodeRecord(result, live)
		if err != nil {
			return err
		}
		// An answer that shows a secret is stored sealed, like the secret.
		rs, secret := result.(xaalis.RevealsSecret)
		if err := tx.CompleteIdempotency(ctx, st.scope, st.token, xaalis.StoredResponse{
			Status: status, ContentType: "application/json", Body: body, Secret: secret && rs.RevealsSecret(),
		}); err != nil {
			return err
		}
		st.status, st.body = status, body
		return nil
	})
}
