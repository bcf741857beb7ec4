package http_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// heldDurable is a store whose next Durable, once armed, signals entered
// and returns what release sends (nil: the store's own answer): a write
// the database has committed but not yet made durable.
type heldDurable struct {
	xaalis.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan error
}

func (s *heldDurable) Durable(ctx context.Context) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.Durable(ctx)
	}
	s.entered <- struct{}{}
	if err := <-s.release; err != nil {
		return err
	}
	return s.Store.Durable(ctx)
}

// TestAnswerWaitsForDurable: no byte of an answer leaves before the
// writes the database committed are durable (Store.Durable), for a read
// and for a write; when the database could not make them durable, the
// answer is a 503 service_unavailable instead; the liveness probe does not
// wait.
func TestAnswerWaitsForDurable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		store := &heldDurable{Store: b.open(t), entered: make(chan struct{}, 4), release: make(chan error)}
		e := newEnv(t, store)
		_, keys := e.merchant()
		created := e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "plan-1", body: planBody}).want(t, 201, "")
		var plan struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(created.body, &plan); err != nil {
			t.Fatal(err)
		}
		get := call{method: "GET", path: "/v1/plans/" + plan.Data.ID, key: keys.SecretTest}

		held := func(c call) (<-chan *response, func(error)) {
			t.Helper()
			store.armed.Store(true)
			done := make(chan *response, 1)
			go func() { done <- e.do(c) }()
			select {
			case <-store.entered:
			case r := <-done:
				t.Fatalf("%s %s answered %d without waiting for the database's writes to be durable", c.method, c.path, r.status)
			}
			select {
			case r := <-done:
				t.Fatalf("%s %s answered %d while the database's writes were not durable", c.method, c.path, r.status)
			default:
			}
			return done, func(err error) { store.release <- err }
		}

		done, release := held(get)
		release(nil)
		(<-done).want(t, 200, "")

		done, release = held(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "plan-2", body: planBody})
		release(nil)
		second := (<-done).want(t, 201, "")

		done, release = held(get)
		release(xaalis.Errorf(xaalis.EServiceUnavailable, "injected: the WAL's fdatasync failed"))
		refused := (<-done).want(t, 503, xaalis.EServiceUnavailable)
		if refused.header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		if refused.header.Get("Cache-Control") != "no-store" {
			t.Errorf("503 with Cache-Control %q, want no-store", refused.header.Get("Cache-Control"))
		}

		// The liveness probe shows nothing of the database: it does not wait.
		live := make(chan *response, 1)
		store.armed.Store(true)
		go func() { live <- e.do(call{method: "GET", path: "/healthz"}) }()
		select {
		case r := <-live:
			r.want(t, 200, "")
		case <-store.entered:
			store.release <- nil
			t.Fatal("the liveness probe waited for the database's writes")
		}

		store.armed.Store(false)
		e.do(call{method: "POST", path: "/v1/plans", key: keys.SecretTest, idem: "plan-2", body: planBody}).want(t, 201, "").replayOf(t, second)
	})
}
