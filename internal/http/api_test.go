package http_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func TestAuthentication(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		mid, keys := e.merchant()
		ctx := context.Background()

		t.Run("OK", func(t *testing.T) {
			e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest}).want(t, 200, "")
		})
		t.Run("OKXAPIKey", func(t *testing.T) {
			e.do(call{method: "GET", path: "/v1/plans", header: map[string]string{"X-API-Key": keys.SecretTest}}).want(t, 200, "")
		})
		t.Run("ErrMissingCredentials", func(t *testing.T) {
			r := e.do(call{method: "GET", path: "/v1/plans"}).want(t, 401, xaalis.ECredentialsMissing)
			if got := r.header.Get("WWW-Authenticate"); got != `Bearer realm="xaalis"` {
				t.Fatalf("WWW-Authenticate %q", got)
			}
		})
		t.Run("ErrUnauthorized", func(t *testing.T) {
			e.do(call{method: "GET", path: "/v1/plans", header: map[string]string{"Authorization": "Basic " + keys.SecretTest}}).
				want(t, 401, xaalis.EUnauthorized)
		})
		t.Run("ErrInvalidAPIKey", func(t *testing.T) {
			for _, k := range []string{"sk_test_unknownunknownunknownunknown00", "nonsense", keys.SecretTest + "x", strings.ToUpper(keys.SecretTest)} {
				e.do(call{method: "GET", path: "/v1/plans", key: k}).want(t, 401, xaalis.EInvalidAPIKey)
			}
		})
		t.Run("ErrInvalidAPIKeyRevoked", func(t *testing.T) {
			k, secret, err := e.app.CreateKey(ctx, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret})
			if err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 200, "")
			if _, err := e.app.RevokeKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 401, xaalis.EInvalidAPIKey)
		})
		t.Run("ErrInvalidAPIKeyExpired", func(t *testing.T) {
			exp := e.clock.Now().Add(time.Hour)
			_, secret, err := e.app.CreateKey(ctx, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret, ExpiresAt: &exp})
			if err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 200, "")
			e.clock.Advance(time.Hour)
			defer e.clock.Advance(-time.Hour)
			e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 401, xaalis.EInvalidAPIKey)
		})
		t.Run("ErrIPNotAllowedKey", func(t *testing.T) {
			for _, c := range []struct {
				cidr string
				want int
			}{{"10.0.0.0/8", 401}, {"127.0.0.0/8", 200}, {"::1/128,127.0.0.1", 200}} {
				ips, err := xaalis.ParsePrefixes(strings.Split(c.cidr, ","))
				if err != nil {
					t.Fatal(err)
				}
				_, secret, err := e.app.CreateKey(ctx, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret, AllowIPs: ips})
				if err != nil {
					t.Fatal(err)
				}
				r := e.do(call{method: "GET", path: "/v1/plans", key: secret})
				if c.want == 401 {
					r.want(t, 401, xaalis.EIPNotAllowed)
				} else {
					r.want(t, 200, "")
				}
			}
		})
		t.Run("ErrIPNotAllowedMerchant", func(t *testing.T) {
			id, k := e.merchant()
			ips := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
			if _, err := e.app.UpdateMerchant(ctx, id, xaalis.MerchantUpdate{AllowIPs: &ips}); err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/plans", key: k.SecretTest}).want(t, 401, xaalis.EIPNotAllowed)
			ips = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			if _, err := e.app.UpdateMerchant(ctx, id, xaalis.MerchantUpdate{AllowIPs: &ips}); err != nil {
				t.Fatal(err)
			}
			e.do(call{method: "GET", path: "/v1/plans", key: k.SecretTest}).want(t, 200, "")
		})
		t.Run("ErrScopeInsufficient", func(t *testing.T) {
			_, secret, err := e.app.CreateKey(ctx, xaalis.KeyCreate{MerchantID: mid, Mode: xaalis.ModeTest, Type: xaalis.KeySecret,
				Scopes: []xaalis.Scope{xaalis.ScopePayout}})
			if err != nil {
				t.Fatal(err)
			}
			r := e.do(call{method: "GET", path: "/v1/plans", key: secret}).want(t, 403, xaalis.EScopeInsufficient)
			if r.err.Context["required_scope"] != "can_read_transactions" {
				t.Errorf("context = %v", r.err.Context)
			}
			e.do(call{method: "POST", path: "/v1/plans", key: secret, idem: "scope-1", body: planBody}).want(t, 403, xaalis.EScopeInsufficient)
		})
		t.Run("ErrForbiddenPublishable", func(t *testing.T) {
			e.do(call{method: "GET", path: "/v1/plans", key: keys.PublishableTest}).want(t, 403, xaalis.EForbidden)
			e.do(call{method: "POST", path: "/v1/plans", key: keys.PublishableTest, idem: "pk-1", body: planBody}).want(t, 403, xaalis.EForbidden)
		})
		t.Run("ErrLivemodeMismatch", func(t *testing.T) {
			var live, test struct{ ID string }
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretLive, idem: "live-1", body: planBody}).want(t, 201, "").data(t, &live)
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "test-1", body: planBody}).want(t, 201, "").data(t, &test)
			e.do(call{method: "GET", path: "/v1/plans/" + live.ID, key: keys.SecretTest}).want(t, 403, xaalis.ELivemodeMismatch)
			e.do(call{method: "GET", path: "/v1/plans/" + test.ID, key: keys.SecretLive}).want(t, 403, xaalis.ELivemodeMismatch)
			e.do(call{method: "POST", path: "/v1/plans/" + live.ID + "/deactivate", key: keys.SecretTest, idem: "mm-1"}).want(t, 403, xaalis.ELivemodeMismatch)
			e.do(call{method: "GET", path: "/v1/plans/" + live.ID, key: keys.SecretLive}).want(t, 200, "")
			// Lists hold one mode only.
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/plans?per_page=100", key: keys.SecretLive}).want(t, 200, "").data(t, &list)
			for _, p := range list {
				if p.ID == test.ID {
					t.Fatal("a test plan is listed for a live key")
				}
			}
		})
		t.Run("ErrNotFoundOtherMerchant", func(t *testing.T) {
			var p struct{ ID string }
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "tenant-1", body: planBody}).want(t, 201, "").data(t, &p)
			_, other := e.merchant()
			e.do(call{method: "GET", path: "/v1/plans/" + p.ID, key: other.SecretTest}).want(t, 404, xaalis.ENotFound)
			e.do(call{method: "POST", path: "/v1/plans/" + p.ID + "/deactivate", key: other.SecretTest, idem: "tenant-2"}).want(t, 404, xaalis.ENotFound)
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/plans", key: other.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != 0 {
				t.Fatalf("another merchant sees %d plans", len(list))
			}
		})
		t.Run("ErrMerchantInactive", func(t *testing.T) {
			id, k := e.merchant()
			for _, st := range []xaalis.MerchantStatus{xaalis.MerchantSuspended, xaalis.MerchantPending, xaalis.MerchantClosed} {
				if _, err := e.app.UpdateMerchant(ctx, id, xaalis.MerchantUpdate{Status: &st}); err != nil {
					t.Fatal(err)
				}
				r := e.do(call{method: "POST", path: "/v1/plans", key: k.SecretTest, idem: "inactive-" + string(st), body: planBody}).
					want(t, 422, xaalis.EMerchantInactive)
				if r.err.Context["status"] != string(st) {
					t.Errorf("context = %v", r.err.Context)
				}
			}
			// Reading stays open to an inactive merchant.
			e.do(call{method: "GET", path: "/v1/plans", key: k.SecretTest}).want(t, 200, "")
		})
	})
}

func TestTestKeyInProduction(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) { a.LiveOnly = true })
		_, keys := e.merchant()
		for _, k := range []string{keys.SecretTest, keys.PublishableTest, "sk_test_unknownunknownunknownunknown00"} {
			e.do(call{method: "GET", path: "/v1/plans", key: k}).want(t, 401, xaalis.ETestKeyInProduction)
		}
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretLive}).want(t, 200, "")
	})
}

func TestErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) { c.MaxBodyBytes = 4096 })
		_, keys := e.merchant()
		post := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: idem, body: body, invalid: true})
		}
		t.Run("ErrNotFoundRoute", func(t *testing.T) {
			e.do(call{method: "GET", path: "/v1/nothing-here", key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
			e.do(call{method: "GET", path: "/v1/plans/not-a-plan", key: keys.SecretTest}).want(t, 404, xaalis.ENotFound)
		})
		t.Run("ErrMethodNotAllowed", func(t *testing.T) {
			r := e.do(call{method: "DELETE", path: "/v1/plans", key: keys.SecretTest, idem: "x"}).want(t, 405, xaalis.EMethodNotAllowed)
			if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
				t.Errorf("Allow = %q", allow)
			}
		})
		t.Run("ErrInvalidJSON", func(t *testing.T) {
			for i, body := range []string{`{"name":`, `not json`, `[1,2]`, `{"name":"a"} {"name":"b"}`, `null`, ` null `, `"plan"`, `42`} {
				post(fmt.Sprint("bad-json-", i), body).want(t, 400, xaalis.EInvalidRequest)
			}
		})
		t.Run("ErrRequestTooLarge", func(t *testing.T) {
			post("big-1", `{"name":"`+strings.Repeat("a", 5000)+`"}`).want(t, 413, xaalis.ERequestTooLarge)
		})
		t.Run("ErrValidation", func(t *testing.T) {
			r := post("val-1", `{"amount":5000,"interval":"fortnight","currency":"GBP","interval_count":0,"term_count":0}`).want(t, 422, xaalis.EValidation)
			for _, f := range []string{"name", "interval", "currency", "interval_count", "term_count"} {
				if len(r.err.Errors[f]) == 0 {
					t.Errorf("no message for %s: %v", f, r.err.Errors)
				}
			}
			r = post("val-2", `{"name":"x","amount":"5000","interval":"month"}`).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["amount"]) == 0 {
				t.Errorf("a quoted amount was taken: %s", r.body)
			}
			r = post("val-3", `{"name":"x","amount":50.5,"interval":"month"}`).want(t, 422, xaalis.EValidation)
			r = post("val-4", `{"name":["x"],"amount":5,"interval":"month"}`).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["name"]) == 0 {
				t.Errorf("errors = %v", r.err.Errors)
			}
			md := map[string]string{}
			var sb strings.Builder
			sb.WriteString(`{"name":"x","amount":5,"interval":"month","metadata":{`)
			for i := range 21 {
				md[fmt.Sprint(i)] = "v"
				if i > 0 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, `"k%d":"v"`, i)
			}
			sb.WriteString("}}")
			r = post("val-5", sb.String()).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["metadata"]) == 0 {
				t.Errorf("21 metadata keys taken: %v", r.err.Errors)
			}
		})
		t.Run("ErrAmountMustBePositive", func(t *testing.T) {
			for i, a := range []string{"0", "-5", "-0"} {
				r := post(fmt.Sprint("neg-", i), `{"name":"x","amount":`+a+`,"interval":"month"}`).want(t, 422, xaalis.EAmountMustBePositive)
				if r.err.Context != nil {
					t.Errorf("amount_must_be_positive carries context %v", r.err.Context)
				}
			}
		})
		t.Run("OKPagination", func(t *testing.T) {
			_, k := e.merchant()
			for i := range 5 {
				e.do(call{method: "POST", path: "/v1/plans", key: k.SecretTest, idem: fmt.Sprint("page-", i), body: planBody}).want(t, 201, "")
			}
			r := e.do(call{method: "GET", path: "/v1/plans?per_page=2&page=3", key: k.SecretTest}).want(t, 200, "")
			if !strings.Contains(string(r.body), `"pagination":{"total":5,"per_page":2,"current_page":3,"last_page":3}`) {
				t.Errorf("pagination: %s", r.body)
			}
			e.do(call{method: "GET", path: "/v1/plans?per_page=500", key: k.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
			e.do(call{method: "GET", path: "/v1/plans?page=0", key: k.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
		})
	})
}

func TestIdempotency(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.open(t)
		e := newEnv(t, store)
		_, keys := e.merchant()
		post := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: idem, body: body})
		}
		t.Run("ErrIdempotencyKeyRequired", func(t *testing.T) {
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, body: planBody, invalid: true}).
				want(t, 400, xaalis.EIdempotencyKeyRequired)
		})
		t.Run("ErrIdempotencyKeyTooLong", func(t *testing.T) {
			post(strings.Repeat("k", 256), planBody).want(t, 400, xaalis.EIdempotencyKeyTooLong)
			post(strings.Repeat("k", 255), planBody).want(t, 201, "")
		})
		t.Run("OKReplay", func(t *testing.T) {
			first := post("replay-1", planBody).want(t, 201, "")
			if first.header.Get("Idempotent-Replay") != "" {
				t.Error("first response marked as replay")
			}
			second := post("replay-1", planBody).want(t, 201, "")
			if second.header.Get("Idempotent-Replay") != "true" {
				t.Error("replay not marked")
			}
			if string(first.body) != string(second.body) {
				t.Fatalf("replay differs:\n%s\n%s", first.body, second.body)
			}
			if first.header.Get("X-Request-Id") == second.header.Get("X-Request-Id") {
				t.Error("replay reused the request id")
			}
		})
		t.Run("ErrIdempotencyConflict", func(t *testing.T) {
			post("conflict-1", planBody).want(t, 201, "")
			// One character of difference is another request.
			post("conflict-1", strings.Replace(planBody, "Gold", "Gole", 1)).want(t, 409, xaalis.EIdempotencyConflict)
			e.do(call{method: "POST", path: "/v1/plans?x=1", key: keys.SecretTest, idem: "conflict-1", body: planBody, invalid: true}).
				want(t, 409, xaalis.EIdempotencyConflict)
			var p struct{ ID string }
			post("conflict-2", planBody).data(t, &p)
			e.do(call{method: "POST", path: "/v1/plans/" + p.ID + "/deactivate", key: keys.SecretTest, idem: "conflict-2"}).
				want(t, 409, xaalis.EIdempotencyConflict)
		})
		t.Run("OKErrorsStored", func(t *testing.T) {
			bad := `{"name":"x","amount":0,"interval":"month"}`
			first := post("4xx-1", bad).want(t, 422, xaalis.EAmountMustBePositive)
			post("4xx-1", bad).want(t, 422, xaalis.EAmountMustBePositive).replayOf(t, first)
		})
		t.Run("OKScopedToMerchantAndMode", func(t *testing.T) {
			_, other := e.merchant()
			var a, b2, c struct{ ID string }
			post("scoped-1", planBody).want(t, 201, "").data(t, &a)
			e.do(call{method: "POST", path: "/v1/plans", key: other.SecretTest, idem: "scoped-1", body: planBody}).want(t, 201, "").data(t, &b2)
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretLive, idem: "scoped-1", body: planBody}).want(t, 201, "").data(t, &c)
			if a.ID == b2.ID || a.ID == c.ID {
				t.Fatal("one key space across merchants or modes")
			}
		})
		t.Run("OKExpiresAfter24Hours", func(t *testing.T) {
			_, k := e.merchant()
			var a, b2 struct{ ID string }
			e.do(call{method: "POST", path: "/v1/plans", key: k.SecretTest, idem: "ttl-1", body: planBody}).want(t, 201, "").data(t, &a)
			e.clock.Advance(24*time.Hour - time.Second)
			r := e.do(call{method: "POST", path: "/v1/plans", key: k.SecretTest, idem: "ttl-1", body: planBody}).want(t, 201, "")
			if r.header.Get("Idempotent-Replay") != "true" {
				t.Fatal("key forgotten before 24 hours")
			}
			e.clock.Advance(time.Second)
			r = e.do(call{method: "POST", path: "/v1/plans", key: k.SecretTest, idem: "ttl-1", body: planBody}).want(t, 201, "")
			r.data(t, &b2)
			if r.header.Get("Idempotent-Replay") != "" || a.ID == b2.ID {
				t.Fatal("key still held after 24 hours")
			}
		})
		t.Run("OKConcurrent", func(t *testing.T) {
			_, k := e.merchant()
			created := concurrentPosts(t, []*env{e}, k.SecretTest, "race-1", 24)
			if created != 1 {
				t.Fatalf("%d requests created a plan, want 1", created)
			}
			var list []struct{ ID string }
			e.do(call{method: "GET", path: "/v1/plans", key: k.SecretTest}).data(t, &list)
			if len(list) != 1 {
				t.Fatalf("%d plans exist, want 1", len(list))
			}
		})
	})
}

// keyReads is a store that counts its reads of an Idempotency-Key made
// on their own (Store.IdempotencyKey).
type keyReads struct {
	xaalis.Store
	n atomic.Int32
}

func (s *keyReads) IdempotencyKey(ctx context.Context, sc xaalis.IdempotencyScope) (*xaalis.IdempotencyRecord, error) {
	s.n.Add(1)
	return s.Store.IdempotencyKey(ctx, sc)
}

// TestIdempotencyKeyReadWithAPIKey: a request's Idempotency-Key is read
// with its API key, in one statement: a new key, a replay and a conflict
// make no read of their own, and answer as before.
func TestIdempotencyKeyReadWithAPIKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := &keyReads{Store: b.open(t)}
		e := newEnv(t, store)
		_, keys := e.merchant()
		post := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: idem, body: body})
		}
		first := post("one-read", planBody).want(t, 201, "")
		post("one-read", planBody).want(t, 201, "").replayOf(t, first)
		post("one-read", strings.Replace(planBody, "Gold", "Gole", 1)).want(t, 409, xaalis.EIdempotencyConflict)
		// Another mode's key of the same name is another key.
		live := e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretLive, idem: "one-read", body: planBody}).want(t, 201, "")
		if live.header.Get("Idempotent-Replay") != "" {
			t.Fatal("a live key's request replayed the test key's answer")
		}
		if n := store.n.Load(); n != 0 {
			t.Fatalf("%d reads of an Idempotency-Key on its own; want none: the API key's read carries it", n)
		}
	})
}

// blindKeys is a store whose read of the API key never finds the
// request's Idempotency-Key: as when another request claims the key just
// after that first look.
type blindKeys struct{ xaalis.Store }

func (s blindKeys) KeyByHash(ctx context.Context, hash []byte, idemKey string) (*xaalis.Key, *xaalis.Merchant, *xaalis.IdempotencyRecord, error) {
	k, m, _, err := s.Store.KeyByHash(ctx, hash, idemKey)
	return k, m, nil, err
}

// TestIdempotencyKeyClaimedAfterFirstLook: a key that another request
// claimed between a request's first look and its command's write answers
// from its row, as a claim that found it would have: a replay, a
// conflict, or in flight. The action runs once. (SQLite writes a key
// found absent at the end of the command, and its command rolls back on
// finding it there; PostgreSQL claims at the start.)
func TestIdempotencyKeyClaimedAfterFirstLook(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := b.open(t)
		e := newEnv(t, blindKeys{store})
		merchantID, keys := e.merchant()
		post := func(idem, body string) *response {
			return e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: idem, body: body})
		}
		first := post("raced", planBody).want(t, 201, "")
		post("raced", planBody).want(t, 201, "").replayOf(t, first)
		other := post("raced", strings.Replace(planBody, "Gold", "Gole", 1)).want(t, 409, xaalis.EIdempotencyConflict)
		if !strings.Contains(other.err.Message, "different request") || other.header.Get("Retry-After") != "" {
			t.Fatalf("conflict: %s, Retry-After %q", other.body, other.header.Get("Retry-After"))
		}
		// A key another request holds, without an instance, for its lease.
		held := xaalis.IdempotencyScope{MerchantID: merchantID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "held"}
		res, err := store.ClaimIdempotency(context.Background(), xaalis.Claim{Scope: held,
			Fingerprint: xaalis.Fingerprint("POST", "/v1/plans", "", []byte(planBody)), Token: "another-request",
			Now: e.clock.Now(), Lease: time.Hour})
		if err != nil || res.Outcome != xaalis.ClaimAcquired {
			t.Fatalf("hold the key: %v %v", res, err)
		}
		inFlight := post("held", planBody).want(t, 409, xaalis.EIdempotencyConflict)
		// Retry-After: 1 tells it from another request's key (above).
		if !strings.Contains(inFlight.err.Message, "in flight") || inFlight.header.Get("Retry-After") != "1" {
			t.Fatalf("in flight: %s, Retry-After %q", inFlight.body, inFlight.header.Get("Retry-After"))
		}
		var list []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/plans?per_page=100", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
		if len(list) != 1 {
			t.Fatalf("%d plans, want 1", len(list))
		}
		// A command that fails because the other request's did its work (its
		// merchant_ref is taken now) answers as the key does too: a replay,
		// not a validation_error.
		pay := func() *response {
			return e.do(call{method: "POST", path: "/v1/payments", key: keys.SecretTest, idem: "raced-payment",
				body: `{"merchant_ref":"raced-1","amount":1000,"provider":"channel_a","payer":{"phone":"+221770120001"},` +
					`"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`})
		}
		paid := pay().want(t, 201, "")
		pay().want(t, 201, "").replayOf(t, paid)
		// The held key is still the other request's.
		rec, err := store.IdempotencyKey(context.Background(), held)
		if err != nil || rec.Done || rec.Token != "another-request" {
			t.Fatalf("held key: %+v %v", rec, err)
		}
	})
}

// heldStore, once armed, holds its next write transaction until
// released, so that a request stays in flight for as long as a test needs.
type heldStore struct {
	xaalis.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) Update(ctx context.Context, fn func(xaalis.Tx) error) error {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return s.Store.Update(ctx, fn)
}

// TestIdempotencyKeyInFlight: a request with the Idempotency-Key of one
// still running answers 409 idempotency_conflict at once (spec: "Key in
// flight (concurrent request)"), even when the running one's command is a
// single transaction whose claim nothing can see before its COMMIT; once
// the first has answered, the key replays.
func TestIdempotencyKeyInFlight(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		held := &heldStore{Store: b.open(t), entered: make(chan struct{}), release: make(chan struct{})}
		e := newEnv(t, held)
		_, keys := e.merchant()
		post := func() *response {
			return e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "in-flight-1", body: planBody})
		}
		held.armed.Store(true)
		// Released however the test ends, so that the server can stop.
		release := sync.OnceFunc(func() { close(held.release) })
		defer release()
		firstDone := make(chan *response, 1)
		go func() { firstDone <- post() }()
		<-held.entered // the first request's command is waiting to run
		secondDone := make(chan *response, 1)
		go func() { secondDone <- post() }()
		var second *response
		select {
		case second = <-secondDone:
		case <-time.After(30 * time.Second): // a hang guard, not a speed measure
			t.Fatal("the second request waited for the first instead of answering 409")
		}
		second.want(t, 409, xaalis.EIdempotencyConflict)
		if !strings.Contains(second.err.Message, "in flight") || second.header.Get("Retry-After") != "1" {
			t.Fatalf("second request: %s, Retry-After %q", second.body, second.header.Get("Retry-After"))
		}
		// Another request under the running one's key is a conflict, not
		// the same request in flight: no Retry-After (no retry mends it).
		other := e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "in-flight-1",
			body: strings.Replace(planBody, "Gold", "Gole", 1)}).want(t, 409, xaalis.EIdempotencyConflict)
		if !strings.Contains(other.err.Message, "different request") || other.header.Get("Retry-After") != "" {
			t.Fatalf("another request: %s, Retry-After %q", other.body, other.header.Get("Retry-After"))
		}
		release()
		first := (<-firstDone).want(t, 201, "")
		if first.header.Get("Idempotent-Replay") != "" {
			t.Fatal("the first request answered as a replay")
		}
		post().want(t, 201, "").replayOf(t, first)
		var list []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/plans?per_page=100", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
		if len(list) != 1 {
			t.Fatalf("%d plans, want 1", len(list))
		}
	})
}

// concurrentPosts fires n identical POSTs with one key, spread over the
// servers, and returns how many ran the action (201 without replay). Every
// other answer must be a replay or an in-flight conflict.
func concurrentPosts(t *testing.T, envs []*env, key, idem string, n int) int {
	var created atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := envs[i%len(envs)].do(call{method: "POST", path: "/v1/plans", key: key, idem: idem, body: planBody})
			switch {
			case r.status == 201 && r.header.Get("Idempotent-Replay") == "":
				created.Add(1)
			case r.status == 201, r.status == 409 && r.err.Code == xaalis.EIdempotencyConflict:
			default:
				t.Errorf("unexpected answer %d: %s", r.status, r.body)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(created.Load())
}

// TestIdempotencyAcrossProcesses runs two servers, each with its own
// connection pool, on one PostgreSQL database: one key runs once.
func TestIdempotencyAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	e1 := newEnv(t, openPostgresURL(t, url))
	e2 := newEnv(t, openPostgresURL(t, url))
	_, keys := e1.merchant()
	for round := range 5 {
		if created := concurrentPosts(t, []*env{e1, e2}, keys.SecretTest, fmt.Sprint("race-", round), 20); created != 1 {
			t.Fatalf("round %d: %d requests created a plan, want 1", round, created)
		}
	}
	var list []struct{ ID string }
	e2.do(call{method: "GET", path: "/v1/plans?per_page=100", key: keys.SecretTest}).want(t, 200, "").data(t, &list)
	if len(list) != 5 {
		t.Fatalf("%d plans, want 5", len(list))
	}
}

// failingStore fails the next n write transactions, as a full disk or a
// lost database connection would.
type failingStore struct {
	xaalis.Store
	n atomic.Int32
}

func (f *failingStore) Update(ctx context.Context, fn func(xaalis.Tx) error) error {
	if f.n.Add(-1) >= 0 {
		return f.Store.Update(ctx, func(tx xaalis.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errors.New("database connection lost before commit")
		})
	}
	return f.Store.Update(ctx, fn)
}

func TestIdempotency5xxNotStored(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		fs := &failingStore{Store: b.open(t)}
		e := newEnv(t, fs)
		_, keys := e.merchant()
		fs.n.Store(1)
		r := e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "5xx-1", body: planBody}).want(t, 500, xaalis.EInternal)
		if r.err.Context["request_id"] != r.header.Get("X-Request-Id") || strings.Contains(string(r.body), "connection lost") {
			t.Errorf("500 body: %s", r.body)
		}
		if !strings.Contains(e.logs.String(), "database connection lost before commit") {
			t.Error("the internal error is not logged")
		}
		// Nothing was committed and the key is free: the retry runs.
		var list []struct{ ID string }
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest}).data(t, &list)
		if len(list) != 0 {
			t.Fatalf("%d plans after a failed commit", len(list))
		}
		r = e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "5xx-1", body: planBody}).want(t, 201, "")
		if r.header.Get("Idempotent-Replay") != "" {
			t.Fatal("a 5xx was replayed")
		}
	})
}

func TestIdempotencyQuota(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t), func(c *xhttp.Config, _ *xaalis.App) { c.IdempotencyQuota = 3 })
		_, keys := e.merchant()
		for i := range 3 {
			e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: fmt.Sprint("q-", i), body: planBody}).want(t, 201, "")
		}
		r := e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "q-3", body: planBody}).want(t, 429, xaalis.ETooManyRequests)
		if r.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		// Replays are not new keys.
		r = e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "q-0", body: planBody}).want(t, 201, "")
		if r.header.Get("Idempotent-Replay") != "true" {
			t.Fatal("replay refused by the quota")
		}
		// The live mode has its own quota.
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretLive, idem: "q-3", body: planBody}).want(t, 201, "")
		e.clock.Advance(time.Hour)
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "q-3", body: planBody}).want(t, 201, "")
	})
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, openSQLite(t), func(c *xhttp.Config, _ *xaalis.App) { c.RateLimit, c.RateBurst = 0.5, 3 })
	_, keys := e.merchant()
	for range 3 {
		e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest}).want(t, 200, "")
	}
	r := e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretTest}).want(t, 429, xaalis.ETooManyRequests)
	if ra := r.header.Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After = %q, want 2", ra)
	}
	// Each key has its own bucket.
	e.do(call{method: "GET", path: "/v1/plans", key: keys.SecretLive}).want(t, 200, "")
}

func TestAccessLogRedaction(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	_, keys := e.merchant()
	e.do(call{method: "GET", path: "/v1/plans?payer_phone=%2B221770001122&phone=770001122&api_key=" + keys.SecretLive + "&page=1",
		key: keys.SecretTest, invalid: true})
	e.do(call{method: "GET", path: "/v1/plans", header: map[string]string{"X-API-Key": keys.PublishableTest}})
	logs := e.logs.String()
	for _, secret := range []string{keys.SecretTest, keys.SecretLive, keys.PublishableTest, "770001122", "221770001122"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log holds %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{`payer_phone=[REDACTED]`, `phone=[REDACTED]`, `api_key=[REDACTED]`, `page=1`,
		`"route":"GET /v1/plans"`, `"status":200`, `"merchant_id":"`, `"request_id":"req_`, `"latency_ms":`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}

func TestHealth(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		e := newEnv(t, s)
		e.do(call{method: "GET", path: "/healthz"}).want(t, 200, "")
		e.do(call{method: "GET", path: "/readyz"}).want(t, 200, "")
		r := e.do(call{method: "GET", path: "/v1/openapi.yaml"}).want(t, 200, "")
		if !strings.HasPrefix(string(r.body), "openapi: 3.1") {
			t.Errorf("served contract starts %q", r.body[:20])
		}
		s.Close()
		r = e.do(call{method: "GET", path: "/readyz"}).want(t, 503, xaalis.EServiceUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		e.do(call{method: "GET", path: "/healthz"}).want(t, 200, "")
	})
}

func TestPlans(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		var p struct {
			ID, Object, Name, Amount, Currency, Interval string
			IntervalCount                                int `json:"interval_count"`
			Active, Livemode                             bool
			Metadata                                     map[string]string
		}
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "p-1",
			body: `{"name":" Premium ","amount":2500,"currency":"XOF","interval":"week","interval_count":2,"metadata":{"order_id":"A-1"}}`}).
			want(t, 201, "").data(t, &p)
		if p.Object != "plan" || p.Name != "Premium" || p.Amount != "2500.00" || p.Currency != "XOF" || p.Interval != "week" ||
			p.IntervalCount != 2 || !p.Active || p.Livemode || p.Metadata["order_id"] != "A-1" {
			t.Fatalf("plan = %+v", p)
		}
		e.do(call{method: "GET", path: "/v1/plans/" + p.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &p)
		e.do(call{method: "POST", path: "/v1/plans/" + p.ID + "/deactivate", key: keys.SecretTest, idem: "p-2"}).want(t, 200, "").data(t, &p)
		if p.Active {
			t.Fatal("plan still active")
		}
		e.do(call{method: "GET", path: "/v1/plans/" + p.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &p)
		if p.Active {
			t.Fatal("deactivation not stored")
		}
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "p-3", body: planBody}).want(t, 201, "")
		for q, want := range map[string]int{"": 2, "?active=true": 1, "?active=false": 1} {
			var list []struct{ Active bool }
			e.do(call{method: "GET", path: "/v1/plans" + q, key: keys.SecretTest}).want(t, 200, "").data(t, &list)
			if len(list) != want {
				t.Errorf("GET /v1/plans%s: %d plans, want %d", q, len(list), want)
			}
		}
		e.do(call{method: "GET", path: "/v1/plans?active=maybe", key: keys.SecretTest, invalid: true}).want(t, 422, xaalis.EValidation)
	})
}

func TestMethodNotAllowedEverywhere(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	for _, c := range []struct{ method, path string }{{"PUT", "/v1/plans"}, {"PATCH", "/v1/plans/x"}, {"POST", "/healthz"}, {"DELETE", "/v1/openapi.yaml"}} {
		r := e.do(call{method: c.method, path: c.path})
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") == "" {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.header.Get("Allow"))
		}
	}
}

// TestExpiryAcrossProcesses: two servers expire the same payments at the
// same time on one PostgreSQL database; each payment expires once, with
// one event.
func TestExpiryAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	e1 := newEnv(t, openPostgresURL(t, url))
	e2 := newEnv(t, openPostgresURL(t, url))
	_, keys := e1.merchant()
	var ids []string
	for i := range 20 {
		_, p := e1.pay(t, keys.SecretTest, fmt.Sprint("exp-", i), `"expires_in":60`)
		ids = append(ids, p.ID)
	}
	e1.clock.Advance(2 * time.Minute)
	e2.clock.Advance(2 * time.Minute)
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := []*env{e1, e2}[i%2].app.ExpireDue(context.Background(), 100)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	if total := counts[0] + counts[1] + counts[2] + counts[3]; total != 20 {
		t.Fatalf("expired %v = %d payments, want 20", counts, total)
	}
	for _, id := range ids {
		if evs := e1.events(t, id); len(evs) != 1 || evs[0] != xaalis.EventPaymentExpired {
			t.Fatalf("%s: events %v", id, evs)
		}
	}
}

// TestPendingPayoutAcrossProcesses: a test payout left pending by one
// process's simulator, asked about by the other's dispatcher (whose
// simulator never saw it), showed failure_reason "not_found" though
// nothing failed. It stays pending with none.
func TestPendingPayoutAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	e1 := newEnv(t, openPostgresURL(t, url))
	e2 := newEnv(t, openPostgresURL(t, url))
	_, keys := e1.merchant()
	e1.fund(t, keys.SecretTest, 1, 50000)
	var po txRecord
	e1.do(call{method: "POST", path: "/v1/payouts", key: keys.SecretTest, idem: "pap-1",
		body: payoutBody("pap-1", 1000, "channel_a", "+221770000004")}).want(t, 201, "").data(t, &po)
	if po.Status != "pending" {
		t.Fatalf("payout %+v", po)
	}
	e2.clock.Advance(10 * time.Minute)
	if _, err := e2.app.DispatchDue(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	var after txRecord
	e1.do(call{method: "GET", path: "/v1/payouts/" + po.ID, key: keys.SecretTest}).want(t, 200, "").data(t, &after)
	if after.Status != "pending" || after.FailureReason != nil {
		t.Fatalf("after the other process asked: %+v", after)
	}
	e1.ledgerOK(t)
}
