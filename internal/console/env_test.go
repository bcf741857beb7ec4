package console_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// eachBackend runs f as a parallel subtest per backend: every console
// test runs on each.
var eachBackend = testutil.EachBackend

// clock is the time the App sees; tests move it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is the real stack: a store, the App with the test-mode simulators,
// the API and the admin listener (operator API and console) on real
// sockets, and the webhook dispatcher.
type env struct {
	t        *testing.T
	app      *xaalis.App
	clock    *clock
	api      *httptest.Server
	admin    *httptest.Server
	logs     *testutil.SyncBuffer
	token    string // an operator token's secret
	tokenID  string
	merchant *xaalis.Merchant
	keys     xaalis.MerchantKeys
}

type envOpt func(*envConfig)

type envConfig struct {
	tls        bool
	dispatcher bool
	realClock  bool
}

func withTLS(c *envConfig)        { c.tls = true }
func withDispatcher(c *envConfig) { c.dispatcher = true }
func withRealClock(c *envConfig)  { c.realClock = true }

func newEnv(t *testing.T, store xaalis.Store, opts ...envOpt) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, clock: &clock{t: time.Now().UTC()}, logs: &testutil.SyncBuffer{}}
	e.app = xaalis.NewApp(store)
	if !cfg.realClock {
		e.app.Now = e.clock.Now
	}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	policy := &webhook.Policy{AllowInsecure: true, AllowUnresolved: true}
	e.app.CheckWebhookURL = policy.Check
	e.app.Gateway = provider.New(e.app.Config, provider.Options{Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			_, _ = e.app.ApplyNotification(ctx, xaalis.ModeTest, n)
		}})
	apiSrv := xhttp.NewServer(e.app, log, xhttp.DefaultConfig(), api.OpenAPI, nil)
	e.api = httptest.NewServer(apiSrv)
	t.Cleanup(e.api.Close)
	e.app.BaseURL = e.api.URL
	admin := xhttp.NewAdmin(e.app, log, apiSrv, nil)
	if cfg.tls {
		e.admin = httptest.NewTLSServer(admin)
	} else {
		e.admin = httptest.NewServer(admin)
	}
	t.Cleanup(e.admin.Close)
	if cfg.dispatcher {
		d := &webhook.Dispatcher{Store: store, Policy: policy, Now: e.app.Now, Logger: log, Timeout: 5 * time.Second,
			Sender: &webhook.Sender{Client: policy.Client(5 * time.Second)}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx, 100*time.Millisecond) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	ctx := context.Background()
	tok, secret, err := e.app.CreateOperatorToken(ctx, "awa.ops", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.token, e.tokenID = secret, tok.ID
	e.merchant, e.keys, err = e.app.CreateMerchant(ctx, xaalis.MerchantCreate{Name: "Boutique Thiès"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// apiCall sends a request to the API with a key and an Idempotency-Key,
// and decodes the answer.
func (e *env) apiCall(method, path, key, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.api.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("idem-%d", idemSeq.Add(1)))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &out)
	return res.StatusCode, out
}

var idemSeq atomic.Int64

func dataOf(out map[string]any) map[string]any {
	d, _ := out["data"].(map[string]any)
	return d
}

// pay makes a successful test payment of amount XOF and returns it.
func (e *env) pay(ref string, amount int) map[string]any {
	e.t.Helper()
	st, out := e.apiCall("POST", "/v1/payments", e.keys.SecretTest, fmt.Sprintf(`{"merchant_ref":%q,"amount":%d,
		"provider":"channel_a","payer":{"phone":%q},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`,
		ref, amount, provider.TestPhoneSuccess))
	d := dataOf(out)
	if st != http.StatusCreated || d["status"] != "success" {
		e.t.Fatalf("payment %s: %d %v", ref, st, out)
	}
	return d
}

// payoutRequest submits a withdrawal and returns it.
func (e *env) payoutRequest(amount int) map[string]any {
	e.t.Helper()
	st, out := e.apiCall("POST", "/v1/payout-requests", e.keys.SecretTest,
		fmt.Sprintf(`{"amount":%d,"destination_phone":"+221770000040","merchant_note":"weekly"}`, amount))
	if st != http.StatusCreated {
		e.t.Fatalf("payout request: %d %v", st, out)
	}
	return dataOf(out)
}

// browser is a console client: a cookie jar, no redirect followed, and
// the forms' Origin.
type browser struct {
	e      *env
	client *http.Client
	origin string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if tr, ok := e.admin.Client().Transport.(*http.Transport); ok && tr.TLSClientConfig != nil {
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs}}
	}
	return &browser{e: e, client: c, origin: e.admin.URL}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) *page {
	b.e.t.Helper()
	res, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return &page{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *browser) get(path string) *page {
	b.e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.e.admin.URL+path, nil)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return b.do(req)
}

// post submits a form as the console's own form would.
func (b *browser) post(path string, form url.Values) *page {
	b.e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.e.admin.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	return b.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token of a page's forms.
func (p *page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", p.body)
	}
	return m[1]
}

// signIn signs in with a token; it returns the answer to the form.
func (b *browser) signIn(token string) *page {
	b.e.t.Helper()
	lp := b.get("/console/login")
	if lp.status != http.StatusOK {
		b.e.t.Fatalf("login page: %d", lp.status)
	}
	return b.post("/console/login", url.Values{"csrf": {lp.csrf(b.e.t)}, "token": {token}})
}

// mustSignIn signs in with the env's token.
func (b *browser) mustSignIn() {
	b.e.t.Helper()
	if p := b.signIn(b.e.token); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/" {
		b.e.t.Fatalf("sign in: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
}

// action posts a console form with the CSRF token of the page at from.
func (b *browser) action(from, path string, form url.Values) *page {
	b.e.t.Helper()
	p := b.get(from)
	if p.status != http.StatusOK {
		b.e.t.Fatalf("GET %s: %d\n%s", from, p.status, p.body)
	}
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", p.csrf(b.e.t))
	return b.post(path, form)
}

func contains(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q in:\n%s", what, w, body)
		}
	}
}

func lacks(t *testing.T, what, body string, bad ...string) {
	t.Helper()
	for _, w := range bad {
		if strings.Contains(body, w) {
			t.Errorf("%s: unexpected %q in:\n%s", what, w, body)
		}
	}
}

// audit returns the audit log, newest first.
func (e *env) audit() []*xaalis.AuditEntry {
	e.t.Helper()
	list, _, err := e.app.AuditLog(context.Background(), xaalis.PageRequest{Page: 1, PerPage: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}
