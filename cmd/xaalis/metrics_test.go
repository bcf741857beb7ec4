package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
)

// scrape is one reading of /metrics: series by name, then by their label
// set written name="value" pairs sorted by name.
type scrape map[string]map[string]float64

var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func readMetrics(t *testing.T, c *http.Client, admin string) scrape {
	t.Helper()
	res, err := c.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	out := scrape{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unreadable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		var pairs []string
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			pairs = append(pairs, p[1]+`="`+p[2]+`"`)
		}
		sort.Strings(pairs)
		if out[m[1]] == nil {
			out[m[1]] = map[string]float64{}
		}
		out[m[1]][strings.Join(pairs, ",")] = v
	}
	return out
}

// get returns the value of the series with exactly these labels
// ("name=value" pairs), and whether it is there.
func (s scrape) get(name string, labels ...string) (float64, bool) {
	var pairs []string
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		pairs = append(pairs, k+`="`+v+`"`)
	}
	sort.Strings(pairs)
	v, ok := s[name][strings.Join(pairs, ",")]
	return v, ok
}

// want checks a series' value.
func (s scrape) want(t *testing.T, value float64, name string, labels ...string) {
	t.Helper()
	v, ok := s.get(name, labels...)
	if !ok {
		t.Errorf("%s%v: missing; the series are %v", name, labels, s[name])
		return
	}
	if v != value {
		t.Errorf("%s%v = %v, want %v", name, labels, v, value)
	}
}

// startEmulator runs `xaalis provider-emulator` and writes the
// configuration that reaches it; it returns the emulator's URL and the
// configuration's path.
func startEmulator(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"provider-emulator", "--addr", "127.0.0.1:0"}, envOf(), out, &testutil.SyncBuffer{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("provider-emulator: %v", err)
		}
	})
	var emu string
	for deadline := time.Now().Add(10 * time.Second); emu == ""; time.Sleep(5 * time.Millisecond) {
		if m := emulatorListening.FindStringSubmatch(out.String()); m != nil {
			emu = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listening line: %s", out)
		}
	}
	cfg := &testutil.SyncBuffer{}
	if err := run(ctx, []string{"provider-emulator", "--print-config", "--addr", strings.TrimPrefix(emu, "http://")}, envOf(), cfg, &testutil.SyncBuffer{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return emu, path
}

// execDB runs one statement on a test database behind the servers' back.
func execDB(t *testing.T, db, stmt string) {
	t.Helper()
	ctx := context.Background()
	if strings.HasPrefix(db, "sqlite://") {
		raw, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(db, "sqlite://")+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Fatal(err)
	}
}

// TestMetrics drives live payments through the provider emulator with a
// route down, the payers' outcomes, a receiver that fails every
// delivery, an Idempotency-Key replay and a corrupted ledger, then reads
// /metrics of the server that did it and of a second server on the same
// database: every named series has its value, the database's series are
// the same in both processes, and the providers' are each process's own.
func TestMetrics(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		emu, cfgPath := startEmulator(t)
		m := createMerchant(t, db)
		updateMerchant(t, db, m.MerchantID, "--kyc", "approved")
		var hits atomic.Int32
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
		}))
		t.Cleanup(receiver.Close)

		addr := testutil.FreeAddr(t)
		a := serve(t, noEnv, serveArgs(db, "--addr", addr, "--public-url", "http://"+addr, "--config", cfgPath,
			"--insecure-webhooks", "--jobs-interval", "1h", "--ledger-check-interval", "0")...)
		key := m.Keys.SecretLive
		a.do(t, "POST", "/v1/webhook-endpoints", key, `{"url":"`+receiver.URL+`/hook"}`).want(t, 201, "")
		// Two test payments the simulated provider does not take: each stays
		// initiated (counted there); the refusal and the outage are the
		// outcomes a live route's would be.
		for _, c := range []struct {
			phone  string
			status int
			code   string
		}{{provider.TestPhoneRefused, 502, "gateway_error"}, {provider.TestPhoneUnreachable, 503, "gateway_unavailable"}} {
			a.do(t, "POST", "/v1/payments", m.Keys.SecretTest, `{"merchant_ref":"t-`+c.phone+`","amount":700,"provider":"channel_a","payer":{"phone":"`+c.phone+`"},
				"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`).want(t, c.status, c.code)
		}

		c := &http.Client{Timeout: 10 * time.Second}
		control := func(path, body string) {
			t.Helper()
			res, err := c.Post(emu+path, "application/json", strings.NewReader(body))
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("emulator %s: %v %v", path, res, err)
			}
			res.Body.Close()
		}
		// The direct route of channel_a goes down.
		control("/_control/routes/channel_a/direct", `{"down":true}`)

		// Four live payments: the first three try direct (its breaker
		// opens at the third failure), the fourth skips it; all go
		// through the aggregator.
		var ids []string
		for i := range 4 {
			body := fmt.Sprintf(`{"merchant_ref":"m-%d","amount":5000,"provider":"channel_a","payer":{"phone":"+221771234567"},
				"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`, i)
			req, _ := http.NewRequest("POST", a.api+"/v1/payments", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("pay-%d", i))
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Data struct {
					ID, Status string
					Route      struct{ Name, Reason string }
				}
			}
			err = json.NewDecoder(res.Body).Decode(&p)
			res.Body.Close()
			if err != nil || res.StatusCode != 201 || p.Data.Status != "pending" || p.Data.Route.Name != "aggregator" {
				t.Fatalf("payment %d: %d %+v %v", i, res.StatusCode, p, err)
			}
			ids = append(ids, p.Data.ID)
			if i == 0 {
				// The same request again: answered from the stored response.
				// A clone shares the spent body: give it the body again.
				again := req.Clone(context.Background())
				again.Body, _ = req.GetBody()
				res, err := c.Do(again)
				if err == nil {
					res.Body.Close()
				}
				if err != nil || res.Header.Get("Idempotent-Replay") != "true" {
					t.Fatalf("replay: %v %v", res, err)
				}
			}
		}
		// Two payers pay, one refuses; the fourth payment stays pending.
		for i, outcome := range []string{"success", "success", "failed"} {
			control("/_control/collections/"+lookupProviderRef(t, db, ids[i])+"/payer", `{"outcome":"`+outcome+`"}`)
		}
		// Every event's delivery fails once: three retrying attempts.
		var s scrape
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			s = readMetrics(t, c, a.admin)
			if v, _ := s.get("xaalis_webhook_deliveries_total", "result=retrying"); v >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("deliveries not attempted in 30 s (%d hits): %v", hits.Load(), s["xaalis_webhook_deliveries_total"])
			}
		}
		// A ledger check on a corrupted balance, from the command line.
		execDB(t, db, `UPDATE ledger_balances SET balance = balance + 1 WHERE account LIKE 'live:merchant:%:available'`)
		if out, _, err := cli(t, noEnv, "ledger", "check", "--database-url", db); err == nil || !strings.Contains(out, "cached balance") {
			t.Fatalf("ledger check of a corrupted ledger: %v\n%s", err, out)
		}

		// A second process on the same database, which served nothing.
		b := serve(t, noEnv, serveArgs(db, "--config", cfgPath, "--jobs-interval", "1h", "--ledger-check-interval", "0")...)
		s = readMetrics(t, c, a.admin)
		sb := readMetrics(t, c, b.admin)

		for _, x := range []scrape{s, sb} {
			live := []string{"mode=live", "provider=channel_a", "country=SN"}
			x.want(t, 4, "xaalis_payments_total", append(live, "status=initiated")...)
			x.want(t, 4, "xaalis_payments_total", append(live, "status=pending")...)
			x.want(t, 2, "xaalis_payments_total", append(live, "status=success")...)
			x.want(t, 1, "xaalis_payments_total", append(live, "status=failed")...)
			x.want(t, 10000, "xaalis_payment_amount_xof_total", "mode=live", "provider=channel_a", "status=success")
			x.want(t, 5000, "xaalis_payment_amount_xof_total", "mode=live", "provider=channel_a", "status=failed")
			x.want(t, 3, "xaalis_webhook_deliveries_total", "result=retrying")
			x.want(t, 0, "xaalis_webhook_deliveries_total", "result=succeeded")
			x.want(t, 0, "xaalis_webhook_deliveries_total", "result=failed")
			x.want(t, 3, "xaalis_webhook_pending_deliveries")
			x.want(t, 1, "xaalis_idempotency_replays_total")
			x.want(t, 1, "xaalis_ledger_check_problems")
			if age, ok := x.get("xaalis_webhook_oldest_pending_seconds"); !ok || age <= 0 || age > 120 {
				t.Errorf("oldest pending delivery: %v %v", age, ok)
			}
			for _, job := range []string{"expire", "reconcile", "disputes", "subscriptions", "dispatch", "webhooks"} {
				// Nothing is overdue: the failed deliveries retry in a minute.
				x.want(t, 0, "xaalis_jobs_lag_seconds", "job="+job)
			}
			if _, ok := x.get("xaalis_ledger_check_timestamp_seconds"); !ok {
				t.Error("no xaalis_ledger_check_timestamp_seconds")
			}
		}
		for _, x := range []scrape{s, sb} {
			x.want(t, 2, "xaalis_payments_total", "mode=test", "provider=channel_a", "country=SN", "status=initiated")
			x.want(t, 1400, "xaalis_payment_amount_xof_total", "mode=test", "provider=channel_a", "status=initiated")
		}
		s.want(t, 1, "xaalis_provider_requests_total", "provider=channel_a", "route=simulator", "operation=initiate", "outcome=refused")
		s.want(t, 1, "xaalis_provider_requests_total", "provider=channel_a", "route=simulator", "operation=initiate", "outcome=failure")
		// The providers' series are each process's: a's saw the outage.
		s.want(t, 3, "xaalis_provider_requests_total", "provider=channel_a", "route=direct", "operation=initiate", "outcome=failure")
		s.want(t, 1, "xaalis_provider_requests_total", "provider=channel_a", "route=direct", "operation=initiate", "outcome=circuit_open")
		s.want(t, 4, "xaalis_provider_requests_total", "provider=channel_a", "route=aggregator", "operation=initiate", "outcome=ok")
		s.want(t, 4, "xaalis_provider_request_duration_seconds_count", "provider=channel_a", "route=aggregator", "operation=initiate")
		s.want(t, 3, "xaalis_provider_request_duration_seconds_count", "provider=channel_a", "route=direct", "operation=initiate")
		s.want(t, 0, "xaalis_provider_route_up", "provider=channel_a", "route=direct")
		s.want(t, 1, "xaalis_provider_route_up", "provider=channel_a", "route=aggregator")
		s.want(t, 1, "xaalis_provider_route_up", "provider=channel_b", "route=direct")
		sb.want(t, 1, "xaalis_provider_route_up", "provider=channel_a", "route=direct")
		if _, ok := sb.get("xaalis_provider_requests_total", "provider=channel_a", "route=aggregator", "operation=initiate", "outcome=ok"); ok {
			t.Error("the second process reports the first one's provider requests")
		}
		if hits.Load() < 3 {
			t.Errorf("the receiver was called %d times", hits.Load())
		}

		// The console's overview shows the same state, in a browser.
		consoleOverview(t, a, db, strings.ToLower(filepath.Base(strings.SplitN(t.Name(), "/", 2)[1])), receiver.URL)
	})
}

// consoleOverview signs in to the console of s with a new operator token
// and checks, at both screen sizes, that its overview shows the live
// route down, the webhook backlog with the failing endpoint and the
// ledger check's problem; the screenshots go to the artifacts folder.
func consoleOverview(t *testing.T, s *server, db, backend, receiverURL string) {
	t.Helper()
	testutil.NeedChromium(t)
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(mustCLI(t, noEnv, "operator", "token", "create", "--database-url", db, "--name", "noc", "--json")), &tok); err != nil || tok.Token == "" {
		t.Fatalf("operator token: %v %+v", err, tok)
	}
	dir := testutil.ArtifactsDir(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(testutil.ChromiumPath), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("lang", "en-GB"), chromedp.Flag("accept-lang", "en-GB,en"), chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(s.admin+"/"),
		chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), tok.Token),
		chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.ID("routes"))); err != nil {
		t.Fatalf("sign in to the console: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	if got := text(`tr[data-route="channel_a/direct"]`); !strings.Contains(got, "open") {
		t.Errorf("route channel_a/direct on the overview: %q", got)
	}
	if got := text(`tr[data-route="channel_a/aggregator"]`); !strings.Contains(got, "closed") {
		t.Errorf("route channel_a/aggregator on the overview: %q", got)
	}
	if got := text("#pending-deliveries"); got != "3" {
		t.Errorf("pending deliveries on the overview: %q", got)
	}
	if got := text("#failing"); !strings.Contains(got, receiverURL+"/hook") {
		t.Errorf("failing endpoints on the overview: %q", got)
	}
	if got := text("#ledger-problems"); got != "1" {
		t.Errorf("ledger problems on the overview: %q", got)
	}
	if got := text(`#payments-today tr[data-provider="channel_a"][data-mode="live"]`); !strings.Contains(got, "66.7\u00a0%") {
		t.Errorf("channel_a today: %q", got)
	}
	for _, vp := range []struct {
		w, h   int64
		mobile bool
	}{{1280, 800, false}, {390, 844, true}} {
		view := chromedp.EmulateViewport(vp.w, vp.h)
		if vp.mobile {
			view = chromedp.EmulateViewport(vp.w, vp.h, chromedp.EmulateMobile)
		}
		if err := chromedp.Do(ctx, view, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("routes"))); err != nil {
			t.Fatal(err)
		}
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("console-overview-live-%s-%dx%d.png", backend, vp.w, vp.h))
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(buf))
	}
}
