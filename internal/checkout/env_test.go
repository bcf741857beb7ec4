package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xaalis/xaalis/internal/testutil"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// register mounts the pages on a mux with the patterns the API uses.
func register(mux *http.ServeMux, p *Pages) {
	mux.HandleFunc("GET /checkout/{id}", p.Show)
	mux.HandleFunc("POST /checkout/{id}/provider", p.Choose)
	mux.HandleFunc("POST /checkout/{id}/otp", p.OTP)
	mux.HandleFunc("POST /checkout/{id}/simulate", p.Simulate)
	mux.HandleFunc("POST /checkout/{id}/cancel", p.Cancel)
	mux.HandleFunc("GET /checkout/{id}/status", p.StatusJSON)
	mux.HandleFunc("GET /checkout-assets/{name}", p.Asset)
	mux.HandleFunc("GET /v1/checkout.js", p.Script)
}

// env is the real stack: SQLite, the App, the provider gateway (test-mode
// simulators) and the pages behind an httptest server.
type env struct {
	t         *testing.T
	app       *xaalis.App
	srv       *httptest.Server
	client    *http.Client
	merchant  *xaalis.Merchant
	principal *xaalis.Principal
	logs      *testutil.SyncBuffer
}

var refSeq atomic.Int64

func newEnv(t *testing.T, merchantName string) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	app := xaalis.NewApp(store)
	app.Gateway = provider.New(app.Config, provider.Options{})
	logs := &testutil.SyncBuffer{}
	pages := &Pages{App: app, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	mux := http.NewServeMux()
	register(mux, pages)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	app.BaseURL = srv.URL

	m, keys, err := app.CreateMerchant(ctx, xaalis.MerchantCreate{Name: merchantName})
	if err != nil {
		t.Fatal(err)
	}
	p, err := app.Authenticate(ctx, keys.SecretTest, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, app: app, srv: srv, merchant: m, principal: p, logs: logs,
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// payment creates a test payment of 5000 XOF; extra is merged into the
// creation request (JSON fields such as "provider" or "payer").
func (e *env) payment(extra map[string]any) *xaalis.Transaction {
	e.t.Helper()
	body := map[string]any{
		"merchant_ref": fmt.Sprintf("order-%d", refSeq.Add(1)),
		"amount":       5000,
		"success_url":  "https://shop.example/paid?order=42",
		"failed_url":   "https://shop.example/failed",
	}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	var in xaalis.PaymentInput
	if err := json.Unmarshal(b, &in); err != nil {
		e.t.Fatal(err)
	}
	tx, err := e.app.CreatePayment(context.Background(), e.principal, "", in)
	if err != nil {
		e.t.Fatalf("create payment: %v", err)
	}
	return tx
}

// reload reads a payment as the page sees it.
func (e *env) reload(id string) *xaalis.Transaction {
	e.t.Helper()
	v, err := e.app.Checkout(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Payment
}

type response struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(req *http.Request) *response {
	e.t.Helper()
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: string(b)}
}

// get fetches a path; header gives extra request headers as pairs.
func (e *env) get(path string, header ...string) *response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return e.do(req)
}

// post submits a form as the page's own form would (same Origin).
func (e *env) post(path string, form url.Values) *response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	return e.do(req)
}

// postFollow posts a form, expects 303 to the page and returns the page.
func (e *env) postFollow(path string, form url.Values) (*response, string) {
	e.t.Helper()
	res := e.post(path, form)
	if res.status != http.StatusSeeOther {
		e.t.Fatalf("POST %s: status %d, want 303; body: %s", path, res.status, res.body)
	}
	loc := res.header.Get("Location")
	if !strings.HasPrefix(loc, "/checkout/") {
		e.t.Fatalf("POST %s: Location %q", path, loc)
	}
	return e.get(loc), loc
}

// statusJSON reads GET /checkout/{id}/status.
func (e *env) statusJSON(id string) (status, reference string, redirect *string) {
	e.t.Helper()
	res := e.get("/checkout/" + id + "/status")
	if res.status != http.StatusOK {
		e.t.Fatalf("status: %d %s", res.status, res.body)
	}
	var body struct {
		Status      string  `json:"status"`
		Reference   string  `json:"reference"`
		RedirectURL *string `json:"redirect_url"`
	}
	if err := json.Unmarshal([]byte(res.body), &body); err != nil {
		e.t.Fatalf("status body %q: %v", res.body, err)
	}
	return body.Status, body.Reference, body.RedirectURL
}

// contains fails the test unless body has every one of want.
func contains(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q in:\n%s", what, w, body)
		}
	}
}

// lacks fails the test if body has any of bad.
func lacks(t *testing.T, what, body string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(body, b) {
			t.Errorf("%s: unexpected %q in:\n%s", what, b, body)
		}
	}
}
