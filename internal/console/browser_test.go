package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// viewports are the screens the console is walked on: a laptop and a
// phone.
var viewports = []struct {
	w, h   int64
	mobile bool
}{{1280, 800, false}, {390, 844, true}}

// TestBrowserConsole walks the console in a real Chromium, on both
// backends and both screens: sign in (a wrong token refused), approve a
// payout request and see its event, reject one with a reason, open and
// decide a dispute, find a payment by merchant_ref and redeliver its
// event, revoke a key and see the running API refuse it, and a form
// posted from another site refused. Screenshots go to the artifacts
// folder.
func TestBrowserConsole(t *testing.T) {
	testutil.NeedChromium(t)
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		for _, vp := range viewports {
			t.Run(fmt.Sprintf("%dx%d", vp.w, vp.h), func(t *testing.T) {
				walkConsole(t, bk, vp.w, vp.h, vp.mobile)
			})
		}
	})
}

func walkConsole(t *testing.T, bk testutil.Backend, width, height int64, mobile bool) {
	start := time.Now()
	e := newEnv(t, bk.Open(t), withDispatcher)
	ctx0 := context.Background()
	dir := testutil.ArtifactsDir(t)
	size := fmt.Sprintf("%dx%d", width, height)
	prefix := "console-" + strings.ToLower(bk.Name) + "-" + size + "-"

	// The merchant's webhook receiver counts deliveries.
	var hooks atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Add(1)
	}))
	t.Cleanup(receiver.Close)
	if st, out := e.apiCall("POST", "/v1/webhook-endpoints", e.keys.SecretTest, `{"url":"`+receiver.URL+`/hooks"}`); st != http.StatusCreated {
		t.Fatalf("webhook endpoint: %d %v", st, out)
	}
	pay := e.pay("order-77", 40000)
	payID, payRef := pay["id"].(string), pay["reference"].(string)
	toApprove, toReject, target := e.payoutRequest(5000), e.payoutRequest(6000), e.payoutRequest(7000)
	waitFor(t, "the payment's webhook", func() bool { return hooks.Load() >= 1 })

	// Another site, with a form aimed at the console.
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Prize</title><h1>You won!</h1>
<form method="post" action="%s/console/payout-requests/%s/approve"><input type="hidden" name="csrf" value="guessed">
<button id="claim" type="submit">Claim</button></form>`, e.admin.URL, target["id"])
	}))
	evil.Start()
	t.Cleanup(evil.Close)
	// localhost is another site than 127.0.0.1 for the browser.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testutil.ChromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		// An operator of the region: French first.
		chromedp.Flag("lang", "fr-SN"),
		chromedp.Flag("accept-lang", "fr-SN,fr,en"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(width), int(height)),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 120*time.Second)
	defer cancelTimeout()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var console []chromedp.ConsoleMessage
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m)
			mu.Unlock()
		}
	}()
	viewport := chromedp.EmulateViewport(width, height)
	if mobile {
		viewport = chromedp.EmulateViewport(width, height, chromedp.EmulateMobile)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%.3000s", what, err, body)
		}
	}
	screenshot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(dir, prefix+name+".png")
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(buf))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	open := func(path, waitFor string) {
		t.Helper()
		run("open "+path, chromedp.Navigate(e.admin.URL+path), chromedp.WaitVisible(chromedp.CSS(waitFor)))
	}
	run("viewport", viewport)

	// 1. Sign in: a wrong token is refused, the right one opens the
	// overview.
	open("/console/", "#login-form")
	run("wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "xop_not-a-real-token"),
		chromedp.Click(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text("#error"); !strings.Contains(got, "Jeton refusé") {
		t.Errorf("refused sign-in says %q", got)
	}
	screenshot("signin-refused")
	run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), e.token),
		chromedp.Click(chromedp.CSS("#sign-in")), chromedp.WaitVisible(chromedp.CSS("#payments-today")))
	if got := text("#operator"); got != "awa.ops" {
		t.Errorf("signed in as %q", got)
	}
	if got := text("#payments-today"); !strings.Contains(got, "channel_a") || !strings.Contains(got, "100,0\u00a0%") {
		t.Errorf("today's payments: %q", got)
	}
	screenshot("overview")

	// 2. Approve a payout request, confirmed, and see its event.
	open("/console/payout-requests", "#queue")
	run("approve", chromedp.Click(chromedp.CSS(`a[href="/console/payout-requests/`+toApprove["id"].(string)+`/approve"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-form")))
	screenshot("approve-confirm")
	run("confirm approval", chromedp.Click(chromedp.CSS("#confirm-button")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-event="payout_request.approved"]`)))
	if got := text("#pr-status"); got != "approuvée" {
		t.Errorf("approved request's status %q", got)
	}
	screenshot("approved-event")

	// 3. Reject one with a reason.
	open("/console/payout-requests", "#queue")
	run("reject", chromedp.Click(chromedp.CSS(`a[href="/console/payout-requests/`+toReject["id"].(string)+`/reject"]`)),
		chromedp.WaitVisible(chromedp.CSS("#field-reason")))
	run("reason", chromedp.SendKeys(chromedp.CSS("#field-reason"), "The IBAN does not match the account holder"))
	screenshot("reject-confirm")
	run("confirm rejection", chromedp.Click(chromedp.CSS("#confirm-button")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-event="payout_request.rejected"]`)))
	if got := text("#pr-rejection"); got != "The IBAN does not match the account holder" {
		t.Errorf("rejection reason %q", got)
	}
	screenshot("rejected")

	// 4. Open a dispute on the payment and decide it.
	open("/console/disputes", "#dispute-form")
	run("open dispute", chromedp.SendKeys(chromedp.CSS("#payment"), payRef), chromedp.SendKeys(chromedp.CSS("#amount"), "15000"),
		chromedp.SendKeys(chromedp.CSS("#reason"), "Goods not received"), chromedp.Click(chromedp.CSS("#open-dispute-button")),
		chromedp.WaitVisible(chromedp.CSS("#disputes")))
	ds, _, err := e.app.OpenDisputes(ctx0, xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || len(ds) != 1 || ds[0].TransactionID != payID || ds[0].Amount.Minor != 1_500_000 {
		t.Fatalf("opened dispute: %+v %v", ds, err)
	}
	screenshot("dispute-opened")
	run("decide", chromedp.Click(chromedp.CSS(`a[href="/console/disputes/`+ds[0].ID+`/decide?outcome=lost"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-form")))
	screenshot("dispute-confirm")
	run("confirm decision", chromedp.Click(chromedp.CSS("#confirm-button")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if d, _ := e.app.OperatorDispute(ctx0, ds[0].ID); d.Status != xaalis.DisputeLost {
		t.Errorf("decided dispute: %s", d.Status)
	}
	screenshot("dispute-decided")

	// 5. Find the payment by its merchant_ref and redeliver its event.
	open("/console/transactions", "#tx-search")
	run("search", chromedp.SendKeys(chromedp.CSS("#q"), "order-77"), chromedp.Click(chromedp.CSS("#tx-search-button")),
		chromedp.WaitVisible(chromedp.CSS("#results")))
	screenshot("search")
	run("open payment", chromedp.Click(chromedp.CSS(`#results a[href="/console/transactions/`+payID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if got := text("#tx-merchant-ref"); got != "order-77" {
		t.Errorf("payment page merchant_ref %q", got)
	}
	evs, err := e.app.Store.Events(ctx0, payID)
	if err != nil || len(evs) == 0 || evs[0].Type != xaalis.EventPaymentSuccess {
		t.Fatalf("events: %+v %v", evs, err)
	}
	before := hooks.Load()
	run("redeliver", chromedp.Click(chromedp.CSS("#redeliver-"+evs[0].ID)), chromedp.WaitVisible(chromedp.CSS("#flash")))
	waitFor(t, "the redelivery", func() bool {
		// Delivered and recorded: the dispatcher records the attempt once
		// the receiver has answered.
		ds, err := e.app.Store.Deliveries(ctx0, evs[0].ID)
		ok := 0
		for _, d := range ds {
			if d.Status == xaalis.DeliverySucceeded {
				ok++
			}
		}
		return err == nil && ok == 2 && hooks.Load() > before
	})
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#event-"+evs[0].ID)))
	delivered, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#event-`+evs[0].ID+` tr[data-status="succeeded"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	if delivered != 2 {
		t.Errorf("payment.success delivered %d times on the page, want 2", delivered)
	}
	screenshot("transaction-redelivered")

	// 6. Revoke a key and see the running API refuse it.
	keys, err := e.app.Store.Keys(ctx0, e.merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	var live *xaalis.Key
	for _, k := range keys {
		if k.Mode == xaalis.ModeLive && k.Type == xaalis.KeySecret {
			live = k
		}
	}
	if st, _ := e.apiCall("GET", "/v1/balance", e.keys.SecretLive, ""); st != http.StatusOK {
		t.Fatalf("the live key before: %d", st)
	}
	open("/console/merchants/"+e.merchant.ID, "#keys")
	screenshot("merchant")
	run("revoke", chromedp.Click(chromedp.CSS("#revoke-"+live.ID)), chromedp.WaitVisible(chromedp.CSS("#confirm-form")),
		chromedp.Click(chromedp.CSS("#confirm-button")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if st, out := e.apiCall("GET", "/v1/balance", e.keys.SecretLive, ""); st != http.StatusUnauthorized {
		t.Errorf("the revoked key: %d %v", st, out)
	}
	screenshot("key-revoked")

	// 7. A form posted from another site is refused.
	run("evil page", chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.CSS("#claim")),
		chromedp.Click(chromedp.CSS("#claim")), chromedp.WaitVisible(chromedp.CSS("#message")))
	if got := text("#message"); !strings.Contains(got, "ne vient pas de la console") {
		t.Errorf("cross-site post answered %q", got)
	}
	screenshot("cross-site-refused")
	if v, _ := e.app.OperatorPayoutRequest(ctx0, target["id"].(string)); v.Request.Status != xaalis.PRSubmitted {
		t.Errorf("the cross-site post moved the request to %s", v.Request.Status)
	}

	// The audit log names the token for every action; English too.
	open("/console/audit", "#audit")
	run("english", chromedp.Click(chromedp.CSS("#switch-lang")), chromedp.WaitVisible(chromedp.CSS("#audit")))
	got := text("#audit")
	for _, a := range []string{"payout_request.approve", "payout_request.reject", "dispute.open", "dispute.decide", "event.redeliver", "key.revoke", "console.sign_in"} {
		if !strings.Contains(got, a) {
			t.Errorf("audit log lacks %s", a)
		}
	}
	if text("#nav-audit") != "Audit log" {
		t.Errorf("English navigation: %q", text("#nav-audit"))
	}
	screenshot("audit-en")

	mu.Lock()
	for _, m := range console {
		// The refused sign-in (401) and the refused cross-site post (403)
		// are meant.
		expected := strings.Contains(m.Text, "Failed to load resource") &&
			(strings.Contains(m.Text, "status of 401") && strings.HasSuffix(m.URL, "/console/login") ||
				strings.Contains(m.Text, "status of 403") && strings.Contains(m.URL, target["id"].(string)))
		if !expected && (m.Type == chromedp.ConsoleError || m.IsException() || strings.Contains(m.Text, "Content Security Policy")) {
			t.Errorf("browser console: %s %s (%s)", m.Type, m.Text, m.URL)
		}
	}
	mu.Unlock()
	t.Logf("browser walk (%s, %s) took %s", bk.Name, size, time.Since(start).Round(time.Millisecond))
}

// waitFor polls cond for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
	}
}
