package main

// Tests of deploy/ and docs/deployment.md as shipped: Xaalis behind
// Debian's nginx and Caddy with --trusted-proxies, the systemd units, the
// failed-auth throttle across two server processes, and the restore
// drill of the guide, run as written on both databases.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
)

// TestMain lets the test binary stand in for the xaalis binary: the
// restore drill runs the guide's shell commands, which call `xaalis`.
func TestMain(m *testing.M) {
	if os.Getenv("XAALIS_TEST_BINARY_IS_XAALIS") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// xaalisOnPath returns a PATH whose `xaalis` is this test binary acting
// as the command.
func xaalisOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nXAALIS_TEST_BINARY_IS_XAALIS=1 exec " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "xaalis"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// tool finds a program on PATH or in the sbin directories; when it is
// missing the test skips with "<name> not found", which .ci/run turns into
// a failure (CI installs it).
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	t.Skipf("%s not found: install it (apt-get install %s) to run this test", name, name)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// waitPort waits until something accepts connections on addr.
func waitPort(t *testing.T, addr string, done <-chan error, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-done:
			t.Fatalf("exited before listening on %s: %v\n%s", addr, err, logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on %s after 15 s\n%s", addr, logs())
}

// runProxy starts a reverse proxy and stops it when the test ends.
func runProxy(t *testing.T, listen string, logs func() string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	waitPort(t, listen, done, func() string { return out.String() + logs() })
}

// clientFrom is an HTTP client whose connections leave from a local
// address of its own (127.0.0.2: another client than 127.0.0.1).
func clientFrom(ip string, pool *x509.CertPool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext:     d.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// get sends GET path with a key and headers.
func get(t *testing.T, c *http.Client, url, key string, header map[string]string) *reply {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	r := &reply{status: res.StatusCode}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	r.body = buf.Bytes()
	var env struct{ Error json.RawMessage }
	if json.Unmarshal(r.body, &env) == nil && env.Error != nil {
		_ = json.Unmarshal(env.Error, &r.err)
	}
	return r
}

// accessLog returns the access log lines of serve's stderr for a path.
func accessLog(s *server, path string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "request" && m["path"] == path {
			out = append(out, m)
		}
	}
	return out
}

// wantLogged checks that the access log has a line for path with the
// status and fields given.
func wantLogged(t *testing.T, s *server, path string, status int, fields map[string]any) {
	t.Helper()
	lines := accessLog(s, path)
	for _, l := range lines {
		if l["status"] != float64(status) {
			continue
		}
		ok := true
		for k, v := range fields {
			if l[k] != v {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	t.Fatalf("no access log line for %s %d with %v in:\n%v", path, status, fields, lines)
}

// rewrite applies literal replacements to a shipped file, each of which
// must match: when the file changes shape, the test says so.
func rewrite(t *testing.T, name string, text string, repl ...string) string {
	t.Helper()
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(text, repl[i]) {
			t.Fatalf("%s no longer holds %q: update this test with it", name, repl[i])
		}
		text = strings.ReplaceAll(text, repl[i], repl[i+1])
	}
	return text
}

// TestBehindNginx runs xaalis serve --trusted-proxies 127.0.0.1/32 behind
// Debian's nginx with deploy/nginx/xaalis.conf: a key allowlisted to
// 203.0.113.0/24, called through nginx with X-Forwarded-For: 203.0.113.7,
// is admitted; the same call straight to Xaalis, with the header forged,
// is refused ip_not_allowed; the access log shows the real client.
func TestBehindNginx(t *testing.T) {
	nginx := tool(t, "nginx")
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	m := createMerchant(t, db)
	allowed := createKey(t, db, m.MerchantID, "--mode", "test", "--type", "secret", "--allow-ips", "203.0.113.0/24")
	s := serve(t, noEnv, serveArgs(db, "--trusted-proxies", "127.0.0.1/32")...)

	conf, err := os.ReadFile("../../deploy/nginx/xaalis.conf")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := writeCert(t)
	port := testutil.FreePort(t)
	dir := t.TempDir()
	text := rewrite(t, "deploy/nginx/xaalis.conf", string(conf),
		"server 127.0.0.1:8080;", "server "+s.apiAddr+";",
		"listen 443 ssl http2;", fmt.Sprintf("listen 127.0.0.1:%d ssl http2;", port),
		"listen [::]:443 ssl http2;", "",
		"/etc/letsencrypt/live/api.example.com/fullchain.pem", certFile,
		"/etc/letsencrypt/live/api.example.com/privkey.pem", keyFile,
	)
	// The port 80 redirect is the only other server: it goes.
	redirect := regexp.MustCompile(`(?s)server \{\n    listen 80;.*?\n\}\n`)
	if !redirect.MatchString(text) {
		t.Fatal("deploy/nginx/xaalis.conf has no port 80 redirect any more: update this test")
	}
	text = redirect.ReplaceAllString(text, "")
	if err := os.WriteFile(filepath.Join(dir, "xaalis.conf"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // the workers read the test's files
	}
	main := fmt.Sprintf(`%sworker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log info;
events { worker_connections 64; }
http {
    access_log %[2]s/access.log;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/xaalis.conf;
}
`, user, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", filepath.Join(dir, "nginx.conf")}
	if out, err := exec.Command(nginx, append(args, "-t")...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, text)
	}
	nginxLog := func() string { b, _ := os.ReadFile(filepath.Join(dir, "error.log")); return string(b) }
	runProxy(t, fmt.Sprintf("127.0.0.1:%d", port), nginxLog, nginx, append(args, "-g", "daemon off;")...)

	viaNginx := fmt.Sprintf("https://127.0.0.1:%d/v1/plans", port)
	forged := map[string]string{"X-Forwarded-For": "203.0.113.7"}
	get(t, clientFrom("127.0.0.1", pool), viaNginx, allowed.Key, forged).want(t, 200, "")
	get(t, clientFrom("127.0.0.2", nil), "http://"+s.apiAddr+"/v1/plans", allowed.Key, forged).want(t, 401, "ip_not_allowed")
	// Through nginx without the header, the client is the test itself.
	get(t, clientFrom("127.0.0.1", pool), viaNginx, allowed.Key, nil).want(t, 401, "ip_not_allowed")
	// Bodies and the other headers pass too.
	c := clientFrom("127.0.0.1", pool)
	req, _ := http.NewRequest("POST", fmt.Sprintf("https://127.0.0.1:%d/v1/plans", port), strings.NewReader(planBody))
	req.Header.Set("Authorization", "Bearer "+m.Keys.SecretTest)
	req.Header.Set("Idempotency-Key", "behind-nginx-1")
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 || res.Header.Get("X-Request-Id") == "" {
		t.Fatalf("POST through nginx: %d %v", res.StatusCode, res.Header)
	}

	wantLogged(t, s, "/v1/plans", 200, map[string]any{"remote_ip": "203.0.113.7", "proxy_ip": "127.0.0.1"})
	wantLogged(t, s, "/v1/plans", 401, map[string]any{"remote_ip": "127.0.0.2", "proxy_ip": nil})
	wantLogged(t, s, "/v1/plans", 201, map[string]any{"remote_ip": "127.0.0.1", "proxy_ip": nil})
}

// TestBehindCaddy runs Xaalis behind Caddy with deploy/caddy/Caddyfile:
// Caddy replaces what a client writes in X-Forwarded-For with its real
// address, which Xaalis then believes.
func TestBehindCaddy(t *testing.T) {
	caddy := tool(t, "caddy")
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	m := createMerchant(t, db)
	second := createKey(t, db, m.MerchantID, "--mode", "test", "--type", "secret", "--allow-ips", "127.0.0.2/32")
	forgedOnly := createKey(t, db, m.MerchantID, "--mode", "test", "--type", "secret", "--allow-ips", "203.0.113.0/24")
	s := serve(t, noEnv, serveArgs(db, "--trusted-proxies", "127.0.0.1/32")...)

	conf, err := os.ReadFile("../../deploy/caddy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t)
	dir := t.TempDir()
	text := "{\n\tadmin off\n}\n\n" + rewrite(t, "deploy/caddy/Caddyfile", string(conf),
		"api.example.com {", fmt.Sprintf("http://127.0.0.1:%d {", port),
		"127.0.0.1:8080", s.apiAddr,
	)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(caddy, "validate", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("caddy validate: %v\n%s\n%s", err, out.String(), text)
	}
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("XDG_DATA_HOME", dir)
	runProxy(t, fmt.Sprintf("127.0.0.1:%d", port), func() string { return "" }, caddy, "run", "--config", path, "--adapter", "caddyfile")

	via := fmt.Sprintf("http://127.0.0.1:%d/v1/plans", port)
	forged := map[string]string{"X-Forwarded-For": "203.0.113.7"}
	get(t, clientFrom("127.0.0.2", nil), via, second.Key, forged).want(t, 200, "")
	get(t, clientFrom("127.0.0.2", nil), via, forgedOnly.Key, forged).want(t, 401, "ip_not_allowed")
	wantLogged(t, s, "/v1/plans", 200, map[string]any{"remote_ip": "127.0.0.2", "proxy_ip": "127.0.0.1"})
}

// TestSystemdUnits: the units of deploy/systemd pass systemd-analyze
// verify without a word.
func TestSystemdUnits(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"xaalis.service", "xaalis-backup.service", "xaalis-backup.timer"} {
		b, err := os.ReadFile(filepath.Join("../../deploy/systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		// The binary is not installed here.
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/xaalis"), []byte("/bin/true"))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestAuthFailuresAcrossServers: 50 invalid keys from one address, sent to
// two server processes on one PostgreSQL database, end in 429 with
// Retry-After from both; a valid key from another address, and from that
// one, is served by both.
func TestAuthFailuresAcrossServers(t *testing.T) {
	db := pgtest.URL(t)
	m := createMerchant(t, db)
	a := serve(t, noEnv, serveArgs(db, "--auth-failure-limit", "10")...)
	b := serve(t, noEnv, serveArgs(db, "--auth-failure-limit", "10")...)
	from1, from2 := clientFrom("127.0.0.1", nil), clientFrom("127.0.0.2", nil)
	var codes []int
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		req, _ := http.NewRequest("GET", s.api+"/v1/plans", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer sk_test_%032d", i))
		res, err := from1.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		codes = append(codes, res.StatusCode)
		if i < 10 && res.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i+1, res.StatusCode)
		}
		if i >= 10 {
			ra, err := strconv.Atoi(res.Header.Get("Retry-After"))
			if res.StatusCode != 429 || err != nil || ra < 1 {
				t.Fatalf("failure %d: %d, Retry-After %q (codes %v)", i+1, res.StatusCode, res.Header.Get("Retry-After"), codes)
			}
		}
	}
	for _, s := range []*server{a, b} {
		get(t, from2, s.api+"/v1/plans", m.Keys.SecretTest, nil).want(t, 200, "")
		get(t, from1, s.api+"/v1/plans", m.Keys.SecretTest, nil).want(t, 200, "")
		get(t, from2, s.api+"/v1/plans", "sk_test_"+strings.Repeat("y", 32), nil).want(t, 401, "invalid_api_key")
	}
}

// drillBlocks returns the shell blocks of docs/deployment.md marked
// "<!-- drill <backend> <step> -->", in order.
func drillBlocks(t *testing.T, backend, step string) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- drill " + backend + " " + step + " -->\n```sh\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("docs/deployment.md has no %s %s drill", backend, step)
	}
	return out
}

// runDrill runs the guide's blocks for one step with bash, as an operator
// would paste them.
func runDrill(t *testing.T, env []string, backend, step string) string {
	t.Helper()
	var all strings.Builder
	for _, b := range drillBlocks(t, backend, step) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		all.Write(out)
		if err != nil {
			t.Fatalf("the %s %s drill failed: %v\n%s\n--- block:\n%s", backend, step, err, out, b)
		}
	}
	return all.String()
}

// TestRestoreDrill runs the restore drill of docs/deployment.md on both
// databases: a payment and a webhook endpoint, a backup while the server
// runs, the database lost, the backup restored, the ledger check clean, and
// the server serving the payment and signing with the endpoint's secret.
func TestRestoreDrill(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			keyFile := filepath.Join(t.TempDir(), "secret.key")
			env := []string{"PATH=" + xaalisOnPath(t), "HOME=" + t.TempDir(), "XAALIS_SECRET_KEY_FILE=" + keyFile,
				"BACKUPS=" + filepath.Join(t.TempDir(), "backups")}
			var db string
			if backend == "sqlite" {
				path := filepath.Join(t.TempDir(), "data", "xaalis.db")
				db = "sqlite://" + path
				env = append(env, "DB="+path)
			} else {
				db = drillDatabase(t)
				env = append(env, "XAALIS_DATABASE_URL="+db)
			}
			getenv := envOf("XAALIS_SECRET_KEY_FILE", keyFile)
			mustCLI(t, getenv, "secrets", "add-key")
			m := createMerchant(t, db)
			key := m.Keys.SecretTest
			rc := newReceiver(t)
			s := serve(t, getenv, serveArgs(db, "--insecure-webhooks")...)
			var ep struct{ Data struct{ Secret string } }
			if err := json.Unmarshal(s.do(t, "POST", "/v1/webhook-endpoints", key, `{"url":"`+rc.srv.URL+`/hook"}`).want(t, 201, "").body, &ep); err != nil {
				t.Fatal(err)
			}
			var pay struct{ Data struct{ ID string } }
			if err := json.Unmarshal(s.do(t, "POST", "/v1/payments", key, `{"merchant_ref":"drill-1","amount":5000,"provider":"channel_a",
				"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).
				want(t, 201, "").body, &pay); err != nil {
				t.Fatal(err)
			}
			rc.next(t, "/hook", ep.Data.Secret, "payment.success")
			balance := s.do(t, "GET", "/v1/balance", key, "").want(t, 200, "").body

			runDrill(t, env, backend, "backup")
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			out := runDrill(t, env, backend, "restore")
			if !strings.Contains(out, "ledger consistent") {
				t.Fatalf("no clean ledger check in the drill's output:\n%s", out)
			}

			s = serve(t, getenv, serveArgs(db, "--insecure-webhooks")...)
			if r := s.do(t, "GET", "/v1/payments/"+pay.Data.ID, key, "").want(t, 200, ""); !strings.Contains(string(r.body), `"status":"success"`) {
				t.Fatalf("the restored payment: %s", r.body)
			}
			if got := s.do(t, "GET", "/v1/balance", key, "").want(t, 200, "").body; !bytes.Equal(got, balance) {
				t.Fatalf("balance before %s, after %s", balance, got)
			}
			s.do(t, "POST", "/v1/webhooks/test", key, `{}`).want(t, 201, "")
			rc.next(t, "/hook", ep.Data.Secret, "webhook.test")
		})
	}
}

// drillDatabase creates a PostgreSQL database of its own for the drill
// (pg_dump and psql take a plain URL, not a test schema), dropped when the
// test ends.
func drillDatabase(t *testing.T) string {
	t.Helper()
	base := pgtest.URL(t) // skips without XAALIS_TEST_POSTGRES_URL
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("xaalis_drill_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestDeploymentFlags: the flags of this guide refuse bad values before
// anything starts.
func TestDeploymentFlags(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--trusted-proxies", "localhost"}},
		{nil, []string{"--trusted-proxies", "10.0.0.0/33"}},
		{[]string{"XAALIS_TRUSTED_PROXIES", "nope"}, nil},
		{nil, []string{"--auth-failure-limit", "-1"}},
		{nil, []string{"--auth-failure-window", "48h"}},
		{[]string{"XAALIS_AUTH_FAILURE_WINDOW", "ten minutes"}, nil},
		{[]string{"XAALIS_AUTH_FAILURE_LIMIT", "x"}, nil},
	} {
		out, _, err := cli(t, envOf(c.env...), append([]string{"serve"}, serveArgs(db, c.args...)...)...)
		wantErr(t, true, out, err)
	}
	// Backups of PostgreSQL are pg_dump's.
	out, _, err := cli(t, noEnv, "backup", "--database-url", "postgres://nowhere.invalid/x", "--output", filepath.Join(t.TempDir(), "b"))
	wantErr(t, true, out, err)
	// A backup never overwrites.
	mustCLI(t, noEnv, "migrate", "--database-url", db)
	dst := filepath.Join(t.TempDir(), "b.db")
	mustCLI(t, noEnv, "backup", "--database-url", db, "--output", dst)
	if _, _, err := cli(t, noEnv, "backup", "--database-url", db, "--output", dst); err == nil {
		t.Fatal("a backup overwrote an existing file")
	}
	// A mistyped path is no database: nothing is made there, no empty
	// backup is written, and no ledger check or key status passes on it.
	typo := filepath.Join(t.TempDir(), "typo", "x.db")
	typoDst := filepath.Join(t.TempDir(), "typo-b.db")
	for _, args := range [][]string{
		{"backup", "--database-url", "sqlite://" + typo, "--output", typoDst},
		{"ledger", "check", "--database-url", "sqlite://" + typo},
		{"secrets", "status", "--database-url", "sqlite://" + typo},
	} {
		out, _, err := cli(t, noEnv, args...)
		wantErr(t, false, out, err)
	}
	for _, p := range []string{typo, typoDst} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made", p)
		}
	}
}
