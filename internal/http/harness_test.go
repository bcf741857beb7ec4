package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/testutil"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// backend opens a fresh store; every HTTP test runs on each backend.
type backend struct {
	name string
	open func(t *testing.T) xaalis.Store
}

func openSQLite(t *testing.T) xaalis.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SetSecretBox(testutil.Keyring(t))
	return s
}

// openPostgres opens a store in a schema of its own; url, when given,
// reuses another store's schema (two processes on one database).
func openPostgresURL(t *testing.T, url string) xaalis.Store {
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Stores on one database (two server processes) share the key file.
	s.SetSecretBox(testutil.SharedKeyring(t))
	return s
}

func openPostgres(t *testing.T) xaalis.Store { return openPostgresURL(t, pgtest.URL(t)) }

var backends = []backend{{"SQLite", openSQLite}, {"PostgreSQL", openPostgres}}

// eachBackend runs f as a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// clock is the time the app sees; tests move it.
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

// env is a real API server on a real database.
type env struct {
	t      *testing.T
	app    *xaalis.App
	srv    *httptest.Server
	clock  *clock
	logs   *testutil.SyncBuffer
	router routers.Router
}

var contract = func() *openapi3.T {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		panic("load api/openapi.yaml: " + err.Error())
	}
	if err := doc.Validate(context.Background()); err != nil {
		panic("api/openapi.yaml is invalid: " + err.Error())
	}
	return doc
}()

// newEnv starts a server over store; configure may change its limits.
func newEnv(t *testing.T, store xaalis.Store, configure ...func(*xhttp.Config, *xaalis.App)) *env {
	t.Helper()
	router, err := gorillamux.NewRouter(contract)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clock: &clock{t: time.Now().UTC()}, logs: &testutil.SyncBuffer{}, router: router}
	e.app = xaalis.NewApp(store)
	e.app.Now = e.clock.Now
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	e.app.Gateway = provider.New(e.app.Config, provider.Options{Now: e.clock.Now, Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			_, _ = e.app.ApplyNotification(ctx, xaalis.ModeTest, n)
		}})
	cfg := xhttp.DefaultConfig()
	for _, c := range configure {
		c(&cfg, e.app)
	}
	e.srv = httptest.NewServer(xhttp.NewServer(e.app, log, cfg, api.OpenAPI, nil))
	t.Cleanup(e.srv.Close)
	e.app.BaseURL = e.srv.URL
	return e
}

// merchant creates an active merchant whose return host is shop.example
// (publishable keys may create payments returning there) and returns its
// id and keys.
func (e *env) merchant() (string, xaalis.MerchantKeys) {
	e.t.Helper()
	m, keys, err := e.app.CreateMerchant(context.Background(), xaalis.MerchantCreate{Name: "Boutique Thiès"})
	if err != nil {
		e.t.Fatal(err)
	}
	hosts := []string{"shop.example"}
	if _, err := e.app.UpdateMerchant(context.Background(), m.ID, xaalis.MerchantUpdate{ReturnHosts: &hosts}); err != nil {
		e.t.Fatal(err)
	}
	return m.ID, keys
}

// principal authenticates key as a request from loopback does, for tests
// that call the app's commands directly.
func (e *env) principal(key string) *xaalis.Principal {
	e.t.Helper()
	p, err := e.app.Authenticate(context.Background(), key, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// amount is n as a command's input amount, as JSON decodes it.
func amount(n int) *xaalis.Number {
	var x xaalis.Number
	if err := json.Unmarshal([]byte(strconv.Itoa(n)), &x); err != nil {
		panic(err)
	}
	return &x
}

// text is s as a command's optional input field.
func text(s string) *string { return &s }

// call is one request.
type call struct {
	method, path, key string
	body              string
	idem              string            // Idempotency-Key; "" sends none
	header            map[string]string // extra headers
	// invalid marks a request the contract itself forbids (to test the
	// server's answer to it); the response is still checked.
	invalid bool
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    struct {
		Code             xaalis.Code         `json:"code"`
		Message          string              `json:"message"`
		Context          map[string]any      `json:"context"`
		DocumentationURL string              `json:"documentation_url"`
		Errors           map[string][]string `json:"errors"`
	}
}

// client does not follow redirects: the 303 of a form post is checked
// as the answer it is.
var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends c and checks request and response against api/openapi.yaml.
func (e *env) do(c call) *response {
	e.t.Helper()
	req, err := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		e.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.idem != "" {
		req.Header.Set("Idempotency-Key", c.idem)
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	route, params, routeErr := e.router.FindRoute(req)
	var in *openapi3filter.RequestValidationInput
	if routeErr == nil {
		in = &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true},
		}
		if !c.invalid {
			clone := req.Clone(context.Background())
			clone.Body = io.NopCloser(strings.NewReader(c.body))
			vin := *in
			vin.Request = clone
			if err := openapi3filter.ValidateRequest(context.Background(), &vin); err != nil {
				e.t.Fatalf("%s %s: request breaks the contract: %v", c.method, c.path, err)
			}
		}
	}
	res, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	r := &response{status: res.StatusCode, header: res.Header}
	if r.body, err = io.ReadAll(res.Body); err != nil {
		e.t.Fatal(err)
	}
	if res.Header.Get("X-Request-Id") == "" {
		e.t.Errorf("%s %s: no X-Request-Id", c.method, c.path)
	}
	if in == nil && r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
		// The server serves a route the contract does not describe.
		e.t.Fatalf("%s %s answered %d but is missing from api/openapi.yaml: %v", c.method, c.path, r.status, routeErr)
	}
	if in != nil {
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: r.status, Header: r.header,
			Body:    io.NopCloser(bytes.NewReader(r.body)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		})
		if err != nil {
			e.t.Fatalf("%s %s: %d response breaks the contract: %v\n%s", c.method, c.path, r.status, err, r.body)
		}
	}
	if r.status >= 400 && strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		var env struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil {
			e.t.Fatalf("%s %s: %d without an error envelope: %s", c.method, c.path, r.status, r.body)
		}
		if err := json.Unmarshal(env.Error, &r.err); err != nil {
			e.t.Fatal(err)
		}
		if r.err.DocumentationURL != "https://docs.xaalis.dev/errors#"+string(r.err.Code) {
			e.t.Errorf("documentation_url = %q", r.err.DocumentationURL)
		}
	}
	return r
}

// want checks the status and, for errors, the code.
func (r *response) want(t *testing.T, status int, code xaalis.Code) *response {
	t.Helper()
	if r.status != status || r.err.Code != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.status, r.err.Code, status, code, r.body)
	}
	return r
}

// replayOf checks that r is the stored answer of first, replayed: the
// Idempotent-Replay header and the same bytes.
func (r *response) replayOf(t *testing.T, first *response) *response {
	t.Helper()
	if r.header.Get("Idempotent-Replay") != "true" || string(r.body) != string(first.body) {
		t.Fatalf("not a replay of %s: %v %s", first.body, r.header, r.body)
	}
	return r
}

// data decodes the data member of a record or list.
func (r *response) data(t *testing.T, v any) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatal(err)
	}
}

const planBody = `{"name":"Gold","amount":5000,"interval":"month"}`

// TestContractErrorCodes: the contract's list of codes is the catalogue.
func TestContractErrorCodes(t *testing.T) {
	s := contract.Components.Schemas["ErrorCode"]
	if s == nil || s.Value == nil {
		t.Fatal("no ErrorCode schema in api/openapi.yaml")
	}
	var inContract []string
	for _, v := range s.Value.Enum {
		inContract = append(inContract, v.(string))
	}
	var inCode []string
	for _, e := range xaalis.Catalogue {
		inCode = append(inCode, string(e.Code))
	}
	if strings.Join(inContract, ",") != strings.Join(inCode, ",") {
		t.Fatalf("api/openapi.yaml ErrorCode enum differs from the catalogue:\n%v\n%v", inContract, inCode)
	}
}
