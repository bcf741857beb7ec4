package main

// End-to-end tests of the xaalis command: they call run in-process, as the
// binary would, with their own arguments, environment and output, against
// a real database (SQLite always, PostgreSQL when XAALIS_TEST_POSTGRES_URL
// is set), and talk to the servers it starts over real sockets.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/testutil"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/secrets"
)

const planBody = `{"name":"Gold","amount":5000,"interval":"month"}`

// backend names a fresh database for one test.
type backend struct {
	name string
	url  func(t *testing.T) string
}

var backends = []backend{
	{"SQLite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "x.db") }},
	{"PostgreSQL", func(t *testing.T) string { return pgtest.URL(t) }},
}

// eachBackend runs f as a parallel subtest per backend, each on a database
// of its own.
func eachBackend(t *testing.T, f func(t *testing.T, db string)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.url(t))
		})
	}
}

// envOf is a getenv over name/value pairs; nothing comes from the real
// environment. XAALIS_SECRET_KEY_FILE, unless given (even empty: the data
// directory's key file), is one key file for the whole test binary, so
// that commands on one PostgreSQL database share it and none writes a key
// file into the source tree.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string {
		if v, ok := m[k]; ok || k != "XAALIS_SECRET_KEY_FILE" {
			return v
		}
		return testKeyFile()
	}
}

var testKey struct {
	once sync.Once
	path string
}

// testKeyFile is the test binary's key file, made on first use.
func testKeyFile() string {
	testKey.once.Do(func() {
		dir, err := os.MkdirTemp("", "xaalis-cmd-test-")
		if err != nil {
			panic(err)
		}
		testKey.path = filepath.Join(dir, "secret.key")
		if _, err := secrets.AddKey(testKey.path); err != nil {
			panic(err)
		}
	})
	return testKey.path
}

// noEnv is an empty environment.
var noEnv = envOf()

// cli runs a command to its end. The deadline only guards against a hang:
// a bench run measures a dozen phases, and under the race detector with
// every package's tests sharing two CPUs it has taken more than 30 s
// (TestBenchShortRun, 9 s alone), so bench gets more time.
func cli(t *testing.T, getenv func(string) string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	timeout := 30 * time.Second
	if len(args) > 0 && args[0] == "bench" {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var o, e testutil.SyncBuffer
	err = run(ctx, args, getenv, &o, &e)
	return o.String(), e.String(), err
}

// mustCLI runs a command that must succeed and returns its stdout.
func mustCLI(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	out, errOut, err := cli(t, getenv, args...)
	if err != nil {
		t.Fatalf("xaalis %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// wantErr checks that a command failed, with a usageError when usage is
// set, and printed nothing on stdout.
func wantErr(t *testing.T, usage bool, stdout string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; stdout:\n%s", stdout)
	}
	var u usageError
	if isUsage := errors.As(err, &u); isUsage != usage {
		t.Fatalf("error %q (%T): usageError is %v, want %v", err, err, isUsage, usage)
	}
	if stdout != "" {
		t.Errorf("a failed command printed on stdout:\n%s", stdout)
	}
}

// merchantKeys is the JSON of `merchant create --json`.
type merchantKeys struct {
	MerchantID string `json:"merchant_id"`
	Keys       struct {
		SecretTest      string `json:"secret_test"`
		PublishableTest string `json:"publishable_test"`
		SecretLive      string `json:"secret_live"`
		PublishableLive string `json:"publishable_live"`
	} `json:"keys"`
}

func createMerchant(t *testing.T, db string, extra ...string) merchantKeys {
	t.Helper()
	out := mustCLI(t, noEnv, append([]string{"merchant", "create", "--database-url", db, "--name", "Boutique Thiès", "--json"}, extra...)...)
	var m merchantKeys
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("merchant create --json: %v\n%s", err, out)
	}
	if m.MerchantID == "" || m.Keys.SecretTest == "" || m.Keys.SecretLive == "" {
		t.Fatalf("merchant create --json: incomplete: %s", out)
	}
	return m
}

// keyOut is the JSON of `key create --json`.
type keyOut struct {
	ID        string   `json:"id"`
	Key       string   `json:"key"`
	Mode      string   `json:"mode"`
	Type      string   `json:"type"`
	Scopes    []string `json:"scopes"`
	AllowIPs  []string `json:"allow_ips"`
	ExpiresAt *string  `json:"expires_at"`
}

func createKey(t *testing.T, db, merchant string, extra ...string) keyOut {
	t.Helper()
	out := mustCLI(t, noEnv, append([]string{"key", "create", "--database-url", db, "--merchant", merchant, "--json"}, extra...)...)
	var k keyOut
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatalf("key create --json: %v\n%s", err, out)
	}
	if k.ID == "" || k.Key == "" {
		t.Fatalf("key create --json: no id or key: %s", out)
	}
	return k
}

// merchantOut is the JSON of `merchant update --json`.
type merchantOut struct {
	ID                 string   `json:"id"`
	Country            string   `json:"country"`
	SettlementCurrency string   `json:"settlement_currency"`
	Status             string   `json:"status"`
	KYC                string   `json:"kyc"`
	AllowedProviders   []string `json:"allowed_providers"`
	AllowIPs           []string `json:"allow_ips"`
	ReturnHosts        []string `json:"return_hosts"`
}

func updateMerchant(t *testing.T, db string, args ...string) merchantOut {
	t.Helper()
	out := mustCLI(t, noEnv, append([]string{"merchant", "update", "--database-url", db, "--json"}, args...)...)
	var m merchantOut
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("merchant update --json: %v\n%s", err, out)
	}
	return m
}

// server is a running `xaalis serve`.
type server struct {
	scheme      string
	apiAddr     string
	api, admin  string // base URLs
	client      *http.Client
	stdout      *testutil.SyncBuffer
	stderr      *testutil.SyncBuffer
	cancel      context.CancelFunc
	done        chan error
	once        sync.Once
	err         error
	stopTimeout time.Duration
}

var listening = regexp.MustCompile(`Xaalis API listening on (https?)://(\S+) \(admin on http://(\S+)\)\n`)

// serve starts `xaalis serve args...` and waits for its listening line.
// The server stops when the test ends; it must then return nil.
func serve(t *testing.T, getenv func(string) string, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}},
	}
	go func() { s.done <- run(ctx, append([]string{"serve"}, args...), getenv, s.stdout, s.stderr) }()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("serve: %v\nstderr:\n%s", err, s.stderr)
		}
	})
	deadline := time.After(20 * time.Second)
	for {
		if m := listening.FindStringSubmatch(s.stdout.String()); m != nil {
			s.scheme, s.apiAddr = m[1], m[2]
			s.api, s.admin = m[1]+"://"+m[2], "http://"+m[3]
			return s
		}
		select {
		case err := <-s.done:
			s.once.Do(func() { s.err = err })
			t.Fatalf("serve returned before listening: %v\nstdout:\n%s\nstderr:\n%s", err, s.stdout, s.stderr)
		case <-deadline:
			t.Fatalf("serve printed no listening line in 20s\nstdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stop cancels the server's context and returns what run returned.
func (s *server) stop() error {
	s.once.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(20 * time.Second):
			s.err = errors.New("run did not return 20s after its context was cancelled")
		}
		if tr, ok := s.client.Transport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	})
	return s.err
}

// demoKeys returns the demo merchant's keys the server printed.
func (s *server) demoKeys(t *testing.T) (secret, publishable string) {
	t.Helper()
	out := s.stdout.String()
	sk := regexp.MustCompile(`\bsk_test_[0-9A-Za-z]+`).FindAllString(out, -1)
	pk := regexp.MustCompile(`\bpk_test_[0-9A-Za-z]+`).FindAllString(out, -1)
	if len(sk) != 1 || len(pk) != 1 {
		t.Fatalf("want the demo merchant's secret and publishable test keys once each, got %q and %q in:\n%s", sk, pk, out)
	}
	if !strings.Contains(out, "Demo merchant") {
		t.Errorf("no demo merchant line in:\n%s", out)
	}
	if i, j := strings.Index(out, sk[0]), strings.Index(out, "Xaalis API listening"); i > j {
		t.Errorf("the keys come after the listening line:\n%s", out)
	}
	return sk[0], pk[0]
}

// noDemo checks the server created no demo merchant.
func (s *server) noDemo(t *testing.T) {
	t.Helper()
	out := s.stdout.String()
	if strings.Contains(out, "sk_") || strings.Contains(out, "pk_") || strings.Contains(strings.ToLower(out), "demo") {
		t.Errorf("serve printed a demo merchant:\n%s", out)
	}
}

// reply is an HTTP answer, with the error envelope decoded.
type reply struct {
	status int
	body   []byte
	err    struct {
		Code    string         `json:"code"`
		Context map[string]any `json:"context"`
	}
}

// do sends one request; POST gets a fresh Idempotency-Key.
func do(t *testing.T, c *http.Client, method, url, key, body string) *reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", rand.Text())
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	r := &reply{status: res.StatusCode}
	if r.body, err = io.ReadAll(res.Body); err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	if r.status >= 400 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		var env struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(r.body, &env) == nil && env.Error != nil {
			_ = json.Unmarshal(env.Error, &r.err)
		}
	}
	return r
}

// want checks the status and, for an error, its code.
func (r *reply) want(t *testing.T, status int, code string) *reply {
	t.Helper()
	if r.status != status || r.err.Code != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.status, r.err.Code, status, code, r.body)
	}
	return r
}

func (s *server) do(t *testing.T, method, path, key, body string) *reply {
	t.Helper()
	return do(t, s.client, method, s.api+path, key, body)
}

// works checks that a secret key with every scope is accepted: it creates
// a plan and lists it.
func (s *server) works(t *testing.T, key string) {
	t.Helper()
	s.do(t, "POST", "/v1/plans", key, planBody).want(t, http.StatusCreated, "")
	if r := s.do(t, "GET", "/v1/plans", key, "").want(t, http.StatusOK, ""); !bytes.Contains(r.body, []byte(`"Gold"`)) {
		t.Fatalf("GET /v1/plans does not list the plan: %s", r.body)
	}
}

func serveArgs(db string, extra ...string) []string {
	return append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--database-url", db}, extra...)
}

// TestServePprofWarns: --pprof on an admin listener that is not loopback
// is said in the log (the profiles need no token); on loopback it is not.
func TestServePprofWarns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		admin string
		warn  bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
		s := serve(t, noEnv, "--addr", "127.0.0.1:0", "--admin-addr", c.admin, "--database-url", db, "--pprof")
		if got := strings.Contains(s.stderr.String(), "--pprof on an admin listener that is not loopback"); got != c.warn {
			t.Errorf("admin on %s: warned %v\n%s", c.admin, got, s.stderr)
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeBusyPortShowsDemoKeysLater: a start that cannot listen makes
// no demo merchant, so the next start shows its keys (they are shown only
// once).
func TestServeBusyPortShowsDemoKeysLater(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	out, _, err := cli(t, noEnv, "serve", "--addr", busy.Addr().String(), "--admin-addr", "127.0.0.1:0", "--database-url", db)
	if err == nil || !strings.Contains(err.Error(), "listen") || strings.Contains(out, "sk_test_") {
		t.Fatalf("serve on a busy port: %v\n%s", err, out)
	}
	s := serve(t, noEnv, serveArgs(db)...)
	s.demoKeys(t)
}

func TestServe(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db)...)
		sk, pk := s.demoKeys(t)
		if s.scheme != "http" || !strings.HasPrefix(s.apiAddr, "127.0.0.1:") || strings.HasSuffix(s.apiAddr, ":0") {
			t.Errorf("listening on %s://%s", s.scheme, s.apiAddr)
		}

		t.Run("OKHealth", func(t *testing.T) {
			for _, base := range []string{s.api, s.admin} {
				for _, path := range []string{"/healthz", "/readyz"} {
					if r := do(t, s.client, "GET", base+path, "", ""); r.status != http.StatusOK {
						t.Errorf("GET %s%s: %d %s", base, path, r.status, r.body)
					}
				}
			}
		})
		t.Run("OKSecretKey", func(t *testing.T) {
			r := s.do(t, "POST", "/v1/plans", sk, planBody).want(t, http.StatusCreated, "")
			var plan struct {
				Data struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"data"`
				Livemode bool `json:"livemode"`
			}
			if err := json.Unmarshal(r.body, &plan); err != nil || plan.Data.ID == "" || plan.Data.Name != "Gold" || plan.Livemode {
				t.Fatalf("plan: %v %s", err, r.body)
			}
		})
		t.Run("ErrPublishableKeyForbidden", func(t *testing.T) {
			s.do(t, "GET", "/v1/plans", pk, "").want(t, http.StatusForbidden, "forbidden")
		})
		t.Run("OKMetrics", func(t *testing.T) {
			r := do(t, s.client, "GET", s.admin+"/metrics", "", "")
			if r.status != http.StatusOK || !bytes.Contains(r.body, []byte("xaalis_http_requests_total")) {
				t.Fatalf("GET admin /metrics: %d, no xaalis_http_requests_total:\n%.2000s", r.status, r.body)
			}
			// The metrics are the operator's, not the public listener's.
			if r := do(t, s.client, "GET", s.api+"/metrics", "", ""); r.status != http.StatusNotFound {
				t.Errorf("GET /metrics on the API listener: %d, want 404", r.status)
			}
		})

		if err := s.stop(); err != nil {
			t.Fatalf("serve returned %v\nstderr:\n%s", err, s.stderr)
		}
		t.Run("OKRestartKeepsDemoMerchant", func(t *testing.T) {
			s2 := serve(t, noEnv, serveArgs(db)...)
			s2.noDemo(t)
			if r := s2.do(t, "GET", "/v1/plans", sk, "").want(t, http.StatusOK, ""); !bytes.Contains(r.body, []byte(`"Gold"`)) {
				t.Fatalf("the plan made before the restart is gone: %s", r.body)
			}
			s2.do(t, "GET", "/v1/plans", pk, "").want(t, http.StatusForbidden, "forbidden")
		})
	})
}

// TestServeGracefulShutdown cancels serve's context while a request's body
// is still arriving: the request must complete and run return nil.
func TestServeGracefulShutdown(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db)...)
		sk, _ := s.demoKeys(t)

		// Expect: 100-continue makes the server say when the handler starts
		// reading the body; the body then comes through a pipe, half of it
		// before the shutdown and half after.
		pr, pw := io.Pipe()
		defer pw.Close()
		got100 := make(chan struct{})
		var once sync.Once
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got100Continue: func() { once.Do(func() { close(got100) }) },
		})
		req, err := http.NewRequestWithContext(ctx, "POST", s.api+"/v1/plans", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(planBody))
		req.Header.Set("Authorization", "Bearer "+sk)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", rand.Text())
		req.Header.Set("Expect", "100-continue")
		tr := &http.Transport{ExpectContinueTimeout: 30 * time.Second}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		type answer struct {
			status int
			body   []byte
			err    error
		}
		answers := make(chan answer, 1)
		go func() {
			res, err := client.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			answers <- answer{res.StatusCode, b, err}
		}()
		select {
		case <-got100:
		case a := <-answers:
			t.Fatalf("answered before reading the body: %d %s %v", a.status, a.body, a.err)
		case <-time.After(10 * time.Second):
			t.Fatal("no 100 Continue in 10s")
		}
		half := len(planBody) / 2
		if _, err := io.WriteString(pw, planBody[:half]); err != nil {
			t.Fatal(err)
		}

		s.cancel()
		// The listener closes when shutdown starts.
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", s.apiAddr, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatal("the API listener still accepts connections 10s after the context was cancelled")
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-s.done:
			s.once.Do(func() { s.err = err })
			t.Fatalf("run returned (%v) while a request was in flight", err)
		case a := <-answers:
			t.Fatalf("the request ended before its body was sent: %d %s %v", a.status, a.body, a.err)
		case <-time.After(50 * time.Millisecond):
		}

		if _, err := io.WriteString(pw, planBody[half:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		select {
		case a := <-answers:
			if a.err != nil || a.status != http.StatusCreated || !bytes.Contains(a.body, []byte(`"Gold"`)) {
				t.Fatalf("in-flight request: %d %s %v", a.status, a.body, a.err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the in-flight request got no answer")
		}
		if err := s.stop(); err != nil {
			t.Fatalf("serve returned %v\nstderr:\n%s", err, s.stderr)
		}
		if !strings.Contains(s.stderr.String(), "shutting down") {
			t.Errorf("no shutdown log line:\n%s", s.stderr)
		}
	})
}

// TestServeConfig covers --test-mode and the listen addresses, from flags
// and from the environment.
func TestServeConfig(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		t.Run("OKTestModeFlagFalse", func(t *testing.T) {
			liveOnly(t, noEnv, serveArgs(pgOrFresh(t, db), "--test-mode=false")...)
		})
		t.Run("OKTestModeEnvFalse", func(t *testing.T) {
			liveOnly(t, envOf("XAALIS_TEST_MODE", "false"), serveArgs(pgOrFresh(t, db))...)
		})
		t.Run("OKTestModeFlagOverridesEnv", func(t *testing.T) {
			s := serve(t, envOf("XAALIS_TEST_MODE", "false"), serveArgs(pgOrFresh(t, db), "--test-mode=true")...)
			sk, _ := s.demoKeys(t)
			s.works(t, sk)
		})
		t.Run("OKMalformedEnvOverriddenByFlag", func(t *testing.T) {
			// Flags win over the environment: a malformed value they
			// override is not read.
			env := envOf("XAALIS_TEST_MODE", "maybe", "XAALIS_AUTH_FAILURE_LIMIT", "abc", "XAALIS_HEARTBEAT", "soon")
			s := serve(t, env, serveArgs(pgOrFresh(t, db), "--test-mode=true", "--auth-failure-limit", "5", "--heartbeat", "5s")...)
			sk, _ := s.demoKeys(t)
			s.works(t, sk)
			// Not overridden: refused, naming it (exit status 2).
			_, _, err := cli(t, env, append([]string{"serve"}, serveArgs(pgOrFresh(t, db), "--test-mode=true", "--heartbeat", "5s")...)...)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "XAALIS_AUTH_FAILURE_LIMIT") {
				t.Fatalf("a malformed XAALIS_AUTH_FAILURE_LIMIT: %v", err)
			}
		})
		t.Run("OKAddrFromEnv", func(t *testing.T) {
			s := serve(t, envOf("XAALIS_ADDR", "127.0.0.1:0", "XAALIS_ADMIN_ADDR", "127.0.0.1:0", "XAALIS_DATABASE_URL", pgOrFresh(t, db)))
			// The defaults (:8080, 127.0.0.1:8081) would not print port 0's
			// chosen port on 127.0.0.1.
			if !strings.HasPrefix(s.apiAddr, "127.0.0.1:") || strings.HasSuffix(s.api, ":8080") || strings.HasSuffix(s.admin, ":8081") {
				t.Fatalf("listening on %s (admin %s)", s.api, s.admin)
			}
			for _, base := range []string{s.api, s.admin} {
				do(t, s.client, "GET", base+"/healthz", "", "").want(t, http.StatusOK, "")
			}
		})
		t.Run("OKAddrFlagOverridesEnv", func(t *testing.T) {
			s := serve(t, envOf("XAALIS_ADDR", "256.0.0.1:0", "XAALIS_ADMIN_ADDR", "256.0.0.1:0"), serveArgs(pgOrFresh(t, db))...)
			do(t, s.client, "GET", s.api+"/healthz", "", "").want(t, http.StatusOK, "")
			do(t, s.client, "GET", s.admin+"/healthz", "", "").want(t, http.StatusOK, "")
		})
		t.Run("ErrAddrFromEnv", func(t *testing.T) {
			out, _, err := cli(t, envOf("XAALIS_ADDR", "256.0.0.1:0", "XAALIS_ADMIN_ADDR", "127.0.0.1:0", "XAALIS_DATABASE_URL", db), "serve")
			if err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
				t.Fatalf("serve with a bad XAALIS_ADDR: %v\n%s", err, out)
			}
		})
		t.Run("ErrAdminAddrFromEnv", func(t *testing.T) {
			out, _, err := cli(t, envOf("XAALIS_ADDR", "127.0.0.1:0", "XAALIS_ADMIN_ADDR", "256.0.0.1:0", "XAALIS_DATABASE_URL", db), "serve")
			if err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
				t.Fatalf("serve with a bad XAALIS_ADMIN_ADDR: %v\n%s", err, out)
			}
		})
	})
}

// pgOrFresh gives a subtest an empty database: a fresh SQLite file, or a
// fresh PostgreSQL schema when the parent runs on PostgreSQL.
func pgOrFresh(t *testing.T, db string) string {
	if strings.HasPrefix(db, "sqlite:") {
		return backends[0].url(t)
	}
	return backends[1].url(t)
}

// liveOnly checks a live-only server on an empty database: no demo
// merchant, test keys refused with test_key_in_production, live keys work.
func liveOnly(t *testing.T, getenv func(string) string, args ...string) {
	t.Helper()
	s := serve(t, getenv, args...)
	s.noDemo(t)
	db := args[slices.Index(args, "--database-url")+1]
	m := createMerchant(t, db)
	for _, k := range []string{m.Keys.SecretTest, m.Keys.PublishableTest} {
		s.do(t, "GET", "/v1/plans", k, "").want(t, http.StatusUnauthorized, "test_key_in_production")
		s.do(t, "POST", "/v1/plans", k, planBody).want(t, http.StatusUnauthorized, "test_key_in_production")
	}
	s.works(t, m.Keys.SecretLive)
	s.do(t, "GET", "/v1/plans", m.Keys.PublishableLive, "").want(t, http.StatusForbidden, "forbidden")
}

// writeCert writes a self-signed ECDSA certificate for 127.0.0.1.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestServeTLS(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		certFile, keyFile, pool := writeCert(t)
		t.Run("OK", func(t *testing.T) {
			s := serve(t, noEnv, serveArgs(db, "--tls-cert", certFile, "--tls-key", keyFile)...)
			if s.scheme != "https" {
				t.Fatalf("listening line says %s://, want https://:\n%s", s.scheme, s.stdout)
			}
			sk, _ := s.demoKeys(t)

			tls12 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: pool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
			}}}
			defer tls12.CloseIdleConnections()
			res, err := tls12.Get(s.api + "/healthz")
			if err != nil {
				t.Fatalf("TLS 1.2 client: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK || res.TLS == nil || res.TLS.Version != tls.VersionTLS12 {
				t.Fatalf("TLS 1.2 client: %d, TLS %+v", res.StatusCode, res.TLS)
			}
			s.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
			s.works(t, sk)

			old := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11,
			}}}
			defer old.CloseIdleConnections()
			if res, err := old.Get(s.api + "/healthz"); err == nil {
				res.Body.Close()
				t.Fatalf("a TLS 1.1 client got %d; the handshake must fail", res.StatusCode)
			} else if !strings.Contains(err.Error(), "protocol version") {
				t.Fatalf("TLS 1.1 client: %v; want the server's protocol version alert", err)
			}
			if res, err := s.client.Get("http://" + s.apiAddr + "/healthz"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					t.Fatal("plain HTTP answered 200 on the TLS listener")
				}
			}
			do(t, s.client, "GET", s.admin+"/healthz", "", "").want(t, http.StatusOK, "")
		})
		for _, c := range []struct {
			name string
			args []string
		}{
			{"ErrCertWithoutKey", []string{"--tls-cert", certFile}},
			{"ErrKeyWithoutCert", []string{"--tls-key", keyFile}},
		} {
			t.Run(c.name, func(t *testing.T) {
				out, _, err := cli(t, noEnv, append([]string{"serve"}, serveArgs(db, c.args...)...)...)
				wantErr(t, true, out, err)
			})
		}
		t.Run("ErrMissingCertFile", func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "none.pem")
			_, _, err := cli(t, noEnv, append([]string{"serve"}, serveArgs(db, "--tls-cert", missing, "--tls-key", missing)...)...)
			if err == nil {
				t.Fatal("serve with a missing certificate file returned nil")
			}
		})
	})
}

func TestMigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		for i := range 2 {
			out := mustCLI(t, noEnv, "migrate", "--database-url", db)
			if strings.TrimSpace(out) == "" {
				t.Fatalf("migrate #%d printed nothing", i+1)
			}
		}
		// Migrating creates no merchant: serve still makes the demo one.
		s := serve(t, noEnv, serveArgs(db)...)
		sk, _ := s.demoKeys(t)
		s.works(t, sk)
		// And migrate runs while the server does.
		mustCLI(t, noEnv, "migrate", "--database-url", db)
		s.works(t, sk)
	})
}

// TestSQLiteDirectory: like the default ./xaalis-data/xaalis.db, a SQLite
// URL whose directory does not exist yet works; the directory is made.
func TestSQLiteDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "xaalis-data", "sub", "xaalis.db")
	mustCLI(t, envOf("XAALIS_DATABASE_URL", "sqlite://"+path), "migrate")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no database file after migrate: %v", err)
	}
	createMerchant(t, "sqlite://"+path)
}

func TestMerchantCreate(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		t.Run("OKJSON", func(t *testing.T) {
			out := mustCLI(t, noEnv, "merchant", "create", "--database-url", db, "--name", "Boutique Thiès", "--json")
			var top map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &top); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(top) != 2 || top["merchant_id"] == nil || top["keys"] == nil {
				t.Fatalf("top-level fields: want exactly merchant_id and keys:\n%s", out)
			}
			var id string
			if err := json.Unmarshal(top["merchant_id"], &id); err != nil || id == "" {
				t.Fatalf("merchant_id: %v %s", err, top["merchant_id"])
			}
			var keys map[string]string
			if err := json.Unmarshal(top["keys"], &keys); err != nil {
				t.Fatalf("keys: %v\n%s", err, out)
			}
			prefixes := map[string]string{
				"secret_test": "sk_test_", "publishable_test": "pk_test_",
				"secret_live": "sk_live_", "publishable_live": "pk_live_",
			}
			if len(keys) != len(prefixes) {
				t.Errorf("keys: want exactly %d, got %v", len(prefixes), keys)
			}
			for name, p := range prefixes {
				if k := keys[name]; !strings.HasPrefix(k, p) || len(k) < len(p)+20 {
					t.Errorf("keys.%s = %q, want %s and a long secret", name, k, p)
				}
			}
			m := updateMerchant(t, db, id)
			if m.ID != id || m.Country != "SN" || m.SettlementCurrency != "XOF" || m.Status != "active" {
				t.Errorf("the merchant as stored: %+v", m)
			}
		})
		t.Run("OKCountryAndCurrency", func(t *testing.T) {
			mk := createMerchant(t, db, "--country", "CI", "--settlement-currency", "EUR")
			if m := updateMerchant(t, db, mk.MerchantID); m.Country != "CI" || m.SettlementCurrency != "EUR" {
				t.Fatalf("country %q, currency %q; want CI, EUR", m.Country, m.SettlementCurrency)
			}
			// In either case, as a payment's country.
			mk = createMerchant(t, db, "--country", "ml")
			if m := updateMerchant(t, db, mk.MerchantID); m.Country != "ML" {
				t.Fatalf("--country ml: %q", m.Country)
			}
		})
		t.Run("OKText", func(t *testing.T) {
			out := mustCLI(t, noEnv, "merchant", "create", "--database-url", db, "--name", "Boutique")
			if json.Valid([]byte(out)) {
				t.Errorf("without --json, JSON:\n%s", out)
			}
			for _, p := range []string{"sk_test_", "pk_test_", "sk_live_", "pk_live_"} {
				if !strings.Contains(out, p) {
					t.Errorf("no %s key in:\n%s", p, out)
				}
			}
		})
		for _, c := range []struct {
			name  string
			args  []string
			usage bool
		}{
			{"ErrCountry", []string{"--name", "X", "--country", "FR"}, true},
			{"ErrCurrency", []string{"--name", "X", "--settlement-currency", "GBP"}, true},
			{"ErrNameMissing", []string{"--json"}, true},
			{"ErrNameBlank", []string{"--name", "  ", "--json"}, true},
			{"ErrUnknownFlag", []string{"--name", "X", "--bogus"}, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				out, _, err := cli(t, noEnv, append([]string{"merchant", "create", "--database-url", db}, c.args...)...)
				wantErr(t, c.usage, out, err)
			})
		}
	})
}

// TestMerchantUpdate changes a merchant from the command line while a
// server runs on the same database; the server sees each change at once.
func TestMerchantUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db)...)
		mk := createMerchant(t, db)
		id, sk := mk.MerchantID, mk.Keys.SecretTest
		s.works(t, sk)

		t.Run("OKFlagsBeforeID", func(t *testing.T) {
			m := updateMerchant(t, db, "--status", "suspended", id)
			if m.ID != id || m.Status != "suspended" {
				t.Fatalf("%+v", m)
			}
			r := s.do(t, "POST", "/v1/plans", sk, planBody).want(t, http.StatusUnprocessableEntity, "merchant_inactive")
			if r.err.Context["status"] != "suspended" {
				t.Fatalf("context: %v, want status suspended", r.err.Context)
			}
			s.do(t, "POST", "/v1/plans", mk.Keys.SecretLive, planBody).want(t, http.StatusUnprocessableEntity, "merchant_inactive")
		})
		t.Run("OKFlagsAfterID", func(t *testing.T) {
			out := mustCLI(t, noEnv, "merchant", "update", id, "--database-url", db, "--status", "active", "--kyc", "approved",
				"--allowed-providers", "channel_a,channel_b", "--allow-ips", "10.0.0.0/8", "--json")
			var m merchantOut
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if m.ID != id || m.Status != "active" || m.KYC != "approved" ||
				!slices.Equal(m.AllowedProviders, []string{"channel_a", "channel_b"}) || !slices.Equal(m.AllowIPs, []string{"10.0.0.0/8"}) {
				t.Fatalf("%+v", m)
			}
			for _, k := range []string{sk, mk.Keys.SecretLive, mk.Keys.PublishableTest} {
				s.do(t, "GET", "/v1/plans", k, "").want(t, http.StatusUnauthorized, "ip_not_allowed")
			}
			s.do(t, "POST", "/v1/plans", sk, planBody).want(t, http.StatusUnauthorized, "ip_not_allowed")
		})
		t.Run("OKAllowIPsIncludingClient", func(t *testing.T) {
			if m := updateMerchant(t, db, id, "--allow-ips", "10.0.0.0/8,127.0.0.1"); !slices.Equal(m.AllowIPs, []string{"10.0.0.0/8", "127.0.0.1/32"}) {
				t.Fatalf("allow_ips %v", m.AllowIPs)
			}
			s.works(t, sk)
		})
		t.Run("OKClearAllowIPs", func(t *testing.T) {
			updateMerchant(t, db, id, "--allow-ips", "10.0.0.0/8")
			s.do(t, "GET", "/v1/plans", sk, "").want(t, http.StatusUnauthorized, "ip_not_allowed")
			if m := updateMerchant(t, db, id, "--allow-ips", ""); len(m.AllowIPs) != 0 {
				t.Fatalf("allow_ips %v after --allow-ips ''", m.AllowIPs)
			}
			s.works(t, sk)
		})
		t.Run("OKText", func(t *testing.T) {
			out := mustCLI(t, noEnv, "merchant", "update", id, "--database-url", db, "--kyc", "rejected")
			if json.Valid([]byte(out)) || !strings.Contains(out, id) || !strings.Contains(out, "rejected") {
				t.Fatalf("text output:\n%s", out)
			}
		})

		before := updateMerchant(t, db, id)
		for _, c := range []struct {
			name  string
			args  []string
			usage bool
		}{
			{"ErrUnknownID", []string{"00000000-0000-7000-8000-000000000000", "--status", "active"}, false},
			{"ErrStatus", []string{id, "--status", "bogus"}, true},
			{"ErrKYC", []string{id, "--kyc", "bogus"}, true},
			{"ErrAllowedProviders", []string{id, "--allowed-providers", "channel_z"}, true},
			{"ErrAllowIPs", []string{id, "--allow-ips", "10.0.0.0/33"}, true},
			{"ErrNoID", []string{"--status", "active"}, true},
			{"ErrTwoIDs", []string{id, id, "--status", "active"}, true},
			{"ErrUnknownFlag", []string{id, "--bogus"}, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				out, _, err := cli(t, noEnv, append([]string{"merchant", "update", "--database-url", db}, c.args...)...)
				wantErr(t, c.usage, out, err)
			})
		}
		after := updateMerchant(t, db, id)
		if !slices.Equal(before.AllowedProviders, after.AllowedProviders) || before.Status != after.Status || before.KYC != after.KYC {
			t.Errorf("failed updates changed the merchant: %+v, then %+v", before, after)
		}
		s.works(t, sk)
	})
}

// TestKey issues and revokes keys from the command line while a server
// runs on the same database.
func TestKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db)...)
		mk := createMerchant(t, db)
		id := mk.MerchantID

		t.Run("OKAllScopes", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "test", "--type", "secret")
			if !strings.HasPrefix(k.Key, "sk_test_") || k.Mode != "test" || k.Type != "secret" || len(k.Scopes) != 3 || k.ExpiresAt != nil {
				t.Fatalf("%+v", k)
			}
			s.works(t, k.Key)
		})
		t.Run("ErrScopeInsufficient", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "test", "--type", "secret", "--scopes", "can_payout")
			if !strings.HasPrefix(k.Key, "sk_test_") || !slices.Equal(k.Scopes, []string{"can_payout"}) {
				t.Fatalf("%+v", k)
			}
			r := s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusForbidden, "scope_insufficient")
			if r.err.Context["required_scope"] != "can_read_transactions" {
				t.Errorf("context %v", r.err.Context)
			}
		})
		t.Run("OKPublishableLive", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "live", "--type", "publishable")
			if !strings.HasPrefix(k.Key, "pk_live_") || k.Mode != "live" || k.Type != "publishable" {
				t.Fatalf("%+v", k)
			}
			// A known publishable key: forbidden, not invalid_api_key.
			s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusForbidden, "forbidden")
		})
		t.Run("OKSecretLive", func(t *testing.T) {
			k := createKey(t, db, id, "--type", "secret", "--mode", "live")
			if !strings.HasPrefix(k.Key, "sk_live_") {
				t.Fatalf("%+v", k)
			}
			s.works(t, k.Key)
		})
		t.Run("ErrIPNotAllowed", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "test", "--type", "secret", "--allow-ips", "192.0.2.0/24")
			if !slices.Equal(k.AllowIPs, []string{"192.0.2.0/24"}) {
				t.Fatalf("allow_ips %v", k.AllowIPs)
			}
			s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusUnauthorized, "ip_not_allowed")
			ok := createKey(t, db, id, "--mode", "test", "--type", "secret", "--allow-ips", "192.0.2.0/24,127.0.0.0/8")
			s.works(t, ok.Key)
		})
		t.Run("OKAuditNamesWhatWasGranted", func(t *testing.T) {
			// A scope named twice is kept once, and the audit entry has
			// the allowlist with the scopes.
			k := createKey(t, db, id, "--mode", "test", "--scopes", "can_payout,can_payout", "--allow-ips", "203.0.113.0/24")
			if !slices.Equal(k.Scopes, []string{"can_payout"}) {
				t.Fatalf("scopes %v", k.Scopes)
			}
			var log []struct {
				ObjectID string `json:"object_id"`
				After    struct {
					Scopes   []string `json:"scopes"`
					AllowIPs []string `json:"allow_ips"`
				}
			}
			out := mustCLI(t, noEnv, "audit", "list", "--json", "--database-url", db)
			if err := json.Unmarshal([]byte(out), &log); err != nil {
				t.Fatal(err)
			}
			for _, e := range log {
				if e.ObjectID == k.ID {
					if !slices.Equal(e.After.Scopes, []string{"can_payout"}) || !slices.Equal(e.After.AllowIPs, []string{"203.0.113.0/24"}) {
						t.Fatalf("audit entry: %+v", e)
					}
					return
				}
			}
			t.Fatalf("no audit entry for key %s:\n%s", k.ID, out)
		})
		t.Run("OKExpiresAt", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "test", "--type", "secret", "--expires-at", time.Now().Add(time.Hour).Format(time.RFC3339))
			if k.ExpiresAt == nil {
				t.Fatalf("no expires_at: %+v", k)
			}
			s.works(t, k.Key)
		})
		t.Run("OKRevoke", func(t *testing.T) {
			k := createKey(t, db, id, "--mode", "test", "--type", "secret")
			s.works(t, k.Key)
			out := mustCLI(t, noEnv, "key", "revoke", "--database-url", db, k.ID)
			if !strings.Contains(out, k.ID) {
				t.Errorf("key revoke printed:\n%s", out)
			}
			s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusUnauthorized, "invalid_api_key")
			// Revoking again is harmless; flags may follow the ID.
			mustCLI(t, noEnv, "key", "revoke", k.ID, "--database-url", db)
			s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusUnauthorized, "invalid_api_key")
			// The merchant's other keys still work.
			s.works(t, mk.Keys.SecretTest)
		})
		t.Run("OKRevokeMerchantKey", func(t *testing.T) {
			// The four keys of merchant create are keys like any other.
			m2 := createMerchant(t, db)
			s.works(t, m2.Keys.SecretTest)
			k := createKey(t, db, m2.MerchantID, "--mode", "test")
			mustCLI(t, noEnv, "key", "revoke", "--database-url", db, k.ID)
			s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusUnauthorized, "invalid_api_key")
			s.works(t, m2.Keys.SecretTest)
		})
		t.Run("OKText", func(t *testing.T) {
			out := mustCLI(t, noEnv, "key", "create", "--database-url", db, "--merchant", id, "--mode", "test")
			key := regexp.MustCompile(`\bsk_test_[0-9A-Za-z]+`).FindString(out)
			if json.Valid([]byte(out)) || key == "" {
				t.Fatalf("text output:\n%s", out)
			}
			s.works(t, key)
		})

		for _, c := range []struct {
			name  string
			args  []string
			usage bool
		}{
			{"ErrExpiresAtPast", []string{"--merchant", id, "--mode", "test", "--expires-at", time.Now().Add(-time.Hour).Format(time.RFC3339)}, true},
			{"ErrExpiresAtNotRFC3339", []string{"--merchant", id, "--mode", "test", "--expires-at", "2030-01-01 00:00"}, true},
			{"ErrMode", []string{"--merchant", id, "--mode", "prod"}, true},
			{"ErrType", []string{"--merchant", id, "--mode", "test", "--type", "root"}, true},
			{"ErrScope", []string{"--merchant", id, "--mode", "test", "--scopes", "can_everything"}, true},
			{"ErrScopesPublishable", []string{"--merchant", id, "--mode", "test", "--type", "publishable", "--scopes", "can_payout"}, true},
			{"ErrAllowIPs", []string{"--merchant", id, "--mode", "test", "--allow-ips", "not-an-ip"}, true},
			{"ErrUnknownMerchant", []string{"--merchant", "00000000-0000-7000-8000-000000000000", "--mode", "test"}, false},
			{"ErrNoMerchant", []string{"--mode", "test"}, true},
			{"ErrNoMode", []string{"--merchant", id}, true},
		} {
			t.Run("Create"+c.name, func(t *testing.T) {
				out, _, err := cli(t, noEnv, append([]string{"key", "create", "--database-url", db, "--json"}, c.args...)...)
				wantErr(t, c.usage, out, err)
			})
		}
		for _, c := range []struct {
			name  string
			args  []string
			usage bool
		}{
			{"ErrUnknownKey", []string{"00000000-0000-7000-8000-000000000000"}, false},
			{"ErrNoKey", nil, true},
			{"ErrTwoKeys", []string{"a", "b"}, true},
		} {
			t.Run("Revoke"+c.name, func(t *testing.T) {
				out, _, err := cli(t, noEnv, append([]string{"key", "revoke", "--database-url", db}, c.args...)...)
				wantErr(t, c.usage, out, err)
			})
		}
	})
}

// TestDatabaseURL runs every command with the database from the flag and
// from XAALIS_DATABASE_URL; the flag wins over the variable.
func TestDatabaseURL(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		for _, c := range []struct {
			name   string
			getenv func(string) string
			flag   []string
		}{
			{"OKFlag", envOf("XAALIS_DATABASE_URL", "mysql://x"), []string{"--database-url", db}},
			{"OKEnv", envOf("XAALIS_DATABASE_URL", db), nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				cmd := func(args ...string) string {
					t.Helper()
					return mustCLI(t, c.getenv, append(args, c.flag...)...)
				}
				cmd("migrate")
				var mk merchantKeys
				if err := json.Unmarshal([]byte(cmd("merchant", "create", "--name", "Boutique", "--json")), &mk); err != nil {
					t.Fatal(err)
				}
				var m merchantOut
				if err := json.Unmarshal([]byte(cmd("merchant", "update", mk.MerchantID, "--kyc", "approved", "--json")), &m); err != nil || m.KYC != "approved" {
					t.Fatalf("merchant update: %v %+v", err, m)
				}
				var k keyOut
				if err := json.Unmarshal([]byte(cmd("key", "create", "--merchant", mk.MerchantID, "--mode", "test", "--json")), &k); err != nil {
					t.Fatal(err)
				}
				s := serve(t, c.getenv, append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, c.flag...)...)
				s.works(t, mk.Keys.SecretTest)
				s.works(t, k.Key)
				cmd("key", "revoke", k.ID)
				s.do(t, "GET", "/v1/plans", k.Key, "").want(t, http.StatusUnauthorized, "invalid_api_key")
			})
		}
	})
}

func TestDatabaseURLUnknownScheme(t *testing.T) {
	t.Parallel()
	commands := []struct {
		name string
		args []string
	}{
		{"Serve", []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}},
		{"Migrate", []string{"migrate"}},
		{"MerchantCreate", []string{"merchant", "create", "--name", "X"}},
		{"MerchantUpdate", []string{"merchant", "update", "m", "--status", "active"}},
		{"KeyCreate", []string{"key", "create", "--merchant", "m", "--mode", "test"}},
		{"KeyRevoke", []string{"key", "revoke", "k"}},
	}
	for _, c := range commands {
		t.Run("ErrFlag"+c.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := cli(t, noEnv, append(c.args, "--database-url", "mysql://x")...)
			wantErr(t, true, out, err)
		})
		t.Run("ErrEnv"+c.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := cli(t, envOf("XAALIS_DATABASE_URL", "mysql://x"), c.args...)
			wantErr(t, true, out, err)
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	// Should a command wrongly go on, it stays away from the real default
	// database and ports.
	dir := t.TempDir()
	getenv := func(extra ...string) func(string) string {
		return envOf(append([]string{
			"XAALIS_DATABASE_URL", "sqlite://" + filepath.Join(dir, "x.db"),
			"XAALIS_ADDR", "127.0.0.1:0", "XAALIS_ADMIN_ADDR", "127.0.0.1:0",
		}, extra...)...)
	}
	for _, c := range []struct {
		name   string
		args   []string
		getenv func(string) string
	}{
		{"ErrNoArgs", nil, getenv()},
		{"ErrUnknownCommand", []string{"bogus"}, getenv()},
		{"ErrMerchantNoSubcommand", []string{"merchant"}, getenv()},
		{"ErrMerchantUnknownSubcommand", []string{"merchant", "bogus"}, getenv()},
		{"ErrKeyNoSubcommand", []string{"key"}, getenv()},
		{"ErrKeyUnknownSubcommand", []string{"key", "bogus"}, getenv()},
		{"ErrServeUnknownFlag", []string{"serve", "--bogus"}, getenv()},
		{"ErrServeArgument", []string{"serve", "now"}, getenv()},
		{"ErrServeTestModeEnv", []string{"serve"}, getenv("XAALIS_TEST_MODE", "maybe")},
		{"ErrServeTestModeFlag", []string{"serve", "--test-mode=maybe"}, getenv()},
		// A boolean flag's value after a space is an argument.
		{"ErrServeTestModeSpace", []string{"serve", "--test-mode", "false"}, getenv()}, // the hint: TestBoolFlagHint
		{"ErrTriggerTimeoutZero", []string{"trigger", "payment.success", "--timeout", "0s", "--api-key", "sk_test_x"}, getenv()},
		{"ErrServeLogLevel", []string{"serve", "--log-level", "loud"}, getenv()},
		{"ErrMigrateUnknownFlag", []string{"migrate", "--bogus"}, getenv()},
		{"ErrKeyCreateUnknownFlag", []string{"key", "create", "--bogus"}, getenv()},
		// A ticker of 0 panicked once the server listened.
		{"ErrServeJobsIntervalZero", []string{"serve", "--jobs-interval", "0"}, getenv()},
		{"ErrServeJobsIntervalNegative", []string{"serve", "--jobs-interval", "-1s"}, getenv()},
		{"ErrServeWebhookTimeoutZero", []string{"serve", "--webhook-timeout", "0"}, getenv()},
		// Payment URLs are built on it: "notaurl/checkout/…".
		{"ErrServePublicURL", []string{"serve", "--public-url", "notaurl"}, getenv()},
		{"ErrServePublicURLScheme", []string{"serve", "--public-url", "ftp://pay.example.com"}, getenv()},
		{"ErrServePublicURLQuery", []string{"serve", "--public-url", "https://pay.example.com/?a=b"}, getenv()},
		{"ErrServePublicURLEnv", []string{"serve"}, getenv("XAALIS_PUBLIC_URL", "pay.example.com")},
		{"ErrOperatorPublicURLEnv", []string{"payment", "mark-refunded", "p"}, getenv("XAALIS_PUBLIC_URL", "notaurl")},
		// A key without a scope would be refused by every route.
		{"ErrKeyCreateNoScope", []string{"key", "create", "--merchant", "m", "--mode", "test", "--scopes", " , "}, getenv()},
		// 0 is the default (never), not a lifetime.
		{"ErrOperatorTokenExpiresInZero", []string{"operator", "token", "create", "--expires-in", "0"}, getenv()},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := cli(t, c.getenv, c.args...)
			wantErr(t, true, out, err)
		})
	}
	// -h after a command prints its flags and is no failure (exit 0).
	t.Run("OKCommandHelp", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"serve", "-h"}, {"key", "create", "--help"}, {"merchant", "update", "-h"}} {
			_, errOut, err := cli(t, getenv(), args...)
			if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut, "Usage of xaalis "+strings.Join(args[:len(args)-1], " ")) {
				t.Errorf("xaalis %s: %v\n%s", strings.Join(args, " "), err, errOut)
			}
		}
	})
	// The defaults -h shows come from the environment: no password of a
	// database URL, no API key.
	t.Run("OKHelpHidesSecrets", func(t *testing.T) {
		t.Parallel()
		env := getenv("XAALIS_DATABASE_URL", "postgres://app:S3cretPassw0rd@db.example:5432/x?sslmode=disable",
			"XAALIS_API_KEY", "sk_test_AbCdEfGhIjKlMnOpQrStUvWx")
		for _, args := range [][]string{{"serve", "-h"}, {"ledger", "check", "-h"}, {"trigger", "-h"}, {"listen", "-h"}} {
			_, errOut, err := cli(t, env, args...)
			if !errors.Is(err, flag.ErrHelp) || strings.Contains(errOut, "S3cretPassw0rd") || strings.Contains(errOut, "AbCdEfGhIjKlMnOpQrStUvWx") {
				t.Errorf("xaalis %s: %v\n%s", strings.Join(args, " "), err, errOut)
			}
		}
		_, errOut, _ := cli(t, env, "serve", "-h")
		if !strings.Contains(errOut, "postgres://app:xxxxx@db.example:5432/x") {
			t.Errorf("serve -h: the redacted default is missing:\n%s", errOut)
		}
		_, _, err := cli(t, env, "backup", "--output", filepath.Join(dir, "b.db"))
		if err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") {
			t.Errorf("backup of PostgreSQL: %v", err)
		}
		// A libpq key/value string is not a URL: its password is hidden
		// too, in -h and in the error that refuses it.
		dsn := getenv("XAALIS_DATABASE_URL", "host=db user=app password=S3cretPassw0rd sslpassword=S3cretPassw0rd dbname=x")
		_, errOut, _ = cli(t, dsn, "ledger", "check", "-h")
		_, _, err = cli(t, dsn, "ledger", "check")
		if strings.Contains(errOut, "S3cretPassw0rd") || err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") ||
			!strings.Contains(err.Error(), "password=xxxxx") {
			t.Errorf("a key/value string: -h\n%s\nerror %v", errOut, err)
		}
	})
	t.Run("OKHelp", func(t *testing.T) {
		t.Parallel()
		out, _, err := cli(t, getenv(), "help")
		if err != nil || !strings.Contains(out, "Usage: xaalis") {
			t.Fatalf("help: %v\n%s", err, out)
		}
		// After a group's word too: the commands.
		for _, args := range [][]string{{"merchant", "-h"}, {"operator", "token", "--help"}, {"payout-request", "help"}} {
			out, _, err := cli(t, getenv(), args...)
			if err != nil || !strings.Contains(out, "Usage: xaalis") {
				t.Errorf("xaalis %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	// Cleanup runs once the parallel subtests are done.
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
			t.Error("a usage error opened the database")
		}
	})
}

// TestBoolFlagHint: "--test-mode false" is refused (Go's boolean flags
// take their value after "="), and the refusal names the flag's right
// form; a stray "true" after no boolean flag gets no such hint.
func TestBoolFlagHint(t *testing.T) {
	t.Parallel()
	env := envOf("XAALIS_DATABASE_URL", "sqlite://"+filepath.Join(t.TempDir(), "x.db"), "XAALIS_ADDR", "127.0.0.1:0", "XAALIS_ADMIN_ADDR", "127.0.0.1:0")
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"serve", "--test-mode", "false"}, "--test-mode=false"},
		{[]string{"serve", "--pprof", "true", "--log-level", "info"}, "--pprof=true"},
		{[]string{"listen", "--live", "false", "--api-key", "sk_live_x"}, "--live=false"},
		{[]string{"ledger", "check", "true"}, ""},
	} {
		_, _, err := cli(t, env, c.args...)
		var ue usageError
		if !errors.As(err, &ue) || (c.hint != "" && !strings.Contains(err.Error(), c.hint)) || (c.hint == "" && strings.Contains(err.Error(), "boolean")) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// TestNoInstallationMade: on PostgreSQL the commands that read or change
// what a database holds refuse a schema with no installation, as they
// refuse an SQLite path with no database, and make nothing in it: a
// mistyped search_path made a whole installation in the wrong schema.
// XAALIS_PUBLIC_URL is read only by the commands that write events.
func TestNoInstallationMade(t *testing.T) {
	t.Parallel()
	// With a pool parameter, which only the pool reads (docs/write-path.md).
	db := pgtest.URL(t) + "&pool_max_conns=4"
	for _, args := range [][]string{{"ledger", "check"}, {"audit", "list"}, {"secrets", "status"}, {"key", "revoke", "k"}} {
		_, _, err := cli(t, noEnv, append(args, "--database-url", db)...)
		if err == nil || !strings.Contains(err.Error(), "no Xaalis installation in the schema xt_") {
			t.Errorf("%v on an empty schema: %v", args, err)
		}
	}
	if _, ok, err := postgres.Installed(context.Background(), db); err != nil || ok {
		t.Fatalf("a refused command made an installation: %v %v", ok, err)
	}
	mustCLI(t, noEnv, "migrate", "--database-url", db)
	mustCLI(t, envOf("XAALIS_PUBLIC_URL", "notaurl"), "ledger", "check", "--database-url", db)
}

// TestCommandLineStrictness: a stray argument is a bad command line (exit
// status 2), wherever it stands, and no flag after it goes unread; the
// commands that read or change what a database holds refuse an SQLite path
// with no database, and make none.
func TestCommandLineStrictness(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := "sqlite://" + filepath.Join(dir, "missing", "x.db")
	for _, args := range [][]string{
		{"migrate", "extra", "--database-url", missing},
		{"audit", "list", "extra", "--database-url", missing},
		{"ledger", "check", "extra", "--database-url", missing},
		{"secrets", "status", "extra", "--database-url", missing},
		{"provider-emulator", "extra", "--addr", "127.0.0.1:0"},
		{"merchant", "create", "--name", "X", "extra", "--database-url", missing},
		{"key", "create", "extra", "--merchant", "m", "--mode", "test", "--database-url", missing},
		{"dispute", "open", "extra", "--transaction", "t", "--database-url", missing},
		{"operator", "token", "create", "extra", "--database-url", missing},
	} {
		_, _, err := cli(t, noEnv, args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	for _, args := range [][]string{
		{"key", "create", "--merchant", "m", "--mode", "test"},
		{"key", "revoke", "k"},
		{"merchant", "update", "m", "--kyc", "approved"},
		{"audit", "list"},
		{"operator", "token", "list"},
		{"operator", "token", "revoke", "t"},
		{"payout-request", "approve", "p"},
		{"payment", "mark-refunded", "p"},
		{"dispute", "open", "--transaction", "t"},
		{"dispute", "decide", "d", "--outcome", "won"},
		{"secrets", "rotate"},
	} {
		_, _, err := cli(t, noEnv, append(args, "--database-url", missing)...)
		if err == nil || !strings.Contains(err.Error(), "no database at") {
			t.Errorf("%v on a missing database: %v", args, err)
		}
	}
	// secrets add-key without a key file writes the data directory's,
	// beside the database: a mistyped path made a directory and a key
	// file no server reads.
	if _, _, err := cli(t, envOf("XAALIS_SECRET_KEY_FILE", ""), "secrets", "add-key", "--database-url", missing); err == nil ||
		!strings.Contains(err.Error(), "no database at") {
		t.Errorf("secrets add-key on a missing database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a command made the missing database's directory: %v", err)
	}
	// The commands that begin an installation make it.
	made := "sqlite://" + filepath.Join(dir, "new", "x.db")
	mustCLI(t, noEnv, "operator", "token", "create", "--database-url", made)
	createMerchant(t, made)
}
