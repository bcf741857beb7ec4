package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func defaults(t testing.TB) *xaalis.Config {
	t.Helper()
	cfg, err := provider.EmulatorConfig(provider.DefaultEmulatorBase)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// pointAt makes every route of cfg reach base (an emulator) with the
// given timeout.
func pointAt(cfg *xaalis.Config, base string, timeout time.Duration) {
	for name, p := range cfg.Providers {
		routes := slices.Clone(p.Routes)
		for i := range routes {
			routes[i].BaseURL = base + "/" + name + "/" + routes[i].Name
			routes[i].TimeoutMS = int(timeout / time.Millisecond)
		}
		p.Routes = routes
		cfg.Providers[name] = p
	}
}

// liveEnv is an emulator, a Gateway in live mode pointing at it, and a
// receiver of the emulator's notifications that verifies them through
// the Gateway, as Xaalis's notification route does.
type liveEnv struct {
	t        *testing.T
	clock    *clock
	cfg      *xaalis.Config
	emu      *provider.Emulator
	emuSrv   *httptest.Server
	gw       *provider.Gateway
	received chan xaalis.Notification
	rejected chan error
	notify   string // notify_url base
}

type liveOpt func(*xaalis.Config, *provider.Options)

func newLive(t *testing.T, timeout time.Duration, opts ...liveOpt) *liveEnv {
	t.Helper()
	e := &liveEnv{t: t, clock: newClock(), cfg: defaults(t), received: make(chan xaalis.Notification, 16), rejected: make(chan error, 16)}
	e.emu = provider.NewEmulator(provider.EmulatorOptions{Now: e.clock.Now})
	e.emuSrv = httptest.NewServer(e.emu)
	t.Cleanup(func() {
		e.emu.Close()
		e.emuSrv.Close()
	})
	pointAt(e.cfg, e.emuSrv.URL, timeout)
	o := provider.Options{Now: e.clock.Now}
	for _, f := range opts {
		f(e.cfg, &o)
	}
	e.gw = provider.New(e.cfg, o)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/providers/{provider}/notifications", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := e.gw.VerifyNotification(r.Context(), r.PathValue("provider"), r, body)
		if err != nil {
			e.rejected <- err
			var xe *xaalis.Error
			errors.As(err, &xe)
			w.WriteHeader(xe.Status())
			return
		}
		e.received <- n
		w.WriteHeader(http.StatusOK)
	})
	recv := httptest.NewServer(mux)
	t.Cleanup(recv.Close)
	e.notify = recv.URL
	return e
}

func (e *liveEnv) request(prov string, country xaalis.Country, phone, reference string) xaalis.InitiateRequest {
	return xaalis.InitiateRequest{
		Mode:          xaalis.ModeLive,
		TransactionID: "tx-" + reference,
		Reference:     reference,
		Provider:      prov,
		Country:       country,
		Amount:        xaalis.Units(5000, xaalis.XOF),
		PayerPhone:    phone,
		PayerName:     "Awa Diop",
		SubMerchant:   "sub-42",
		NotifyURL:     e.notify + "/v1/providers/" + prov + "/notifications",
		ExpiresAt:     e.clock.Now().Add(30 * time.Minute),
	}
}

// control POSTs to the emulator's control API and decodes the answer.
func (e *liveEnv) control(path string, body any, out any) int {
	e.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(e.emuSrv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatalf("control %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

func (e *liveEnv) route(prov, route string, sw map[string]any) {
	e.t.Helper()
	if code := e.control("/_control/routes/"+prov+"/"+route, sw, nil); code != http.StatusOK {
		e.t.Fatalf("control route: %d", code)
	}
}

func (e *liveEnv) requests(prov, route string) int {
	return e.emu.State().Providers[prov].Routes[route].Requests
}

func (e *liveEnv) waitNotification() xaalis.Notification {
	e.t.Helper()
	select {
	case n := <-e.received:
		return n
	case err := <-e.rejected:
		e.t.Fatalf("notification rejected: %v", err)
	case <-time.After(5 * time.Second):
		e.t.Fatal("no notification")
	}
	return xaalis.Notification{}
}

// wantCode fails unless err is a *xaalis.Error of code.
func wantCode(t *testing.T, err error, code xaalis.Code) *xaalis.Error {
	t.Helper()
	var xe *xaalis.Error
	if !errors.As(err, &xe) || xe.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	return xe
}

var bg = context.Background()
