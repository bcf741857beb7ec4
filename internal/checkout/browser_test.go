package checkout

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestBrowserCheckout walks the hosted page end to end in a real browser:
// choose a provider, the OTP step, success, the return to the merchant.
func TestBrowserCheckout(t *testing.T) {
	testutil.NeedChromium(t)
	start := time.Now()
	e := newEnv(t, "Boutique Thiès")

	// The merchant's site, which records the payer's return.
	hits := make(chan *url.URL, 8)
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hits <- r.URL:
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Merci</title><h1 id="thanks">Merci !</h1>`)
	}))
	t.Cleanup(merchant.Close)

	p := e.payment(map[string]any{
		"payer":       map[string]any{"phone": "+221771234567"},
		"success_url": merchant.URL + "/paid",
		"failed_url":  merchant.URL + "/failed",
	})
	if p.Status != xaalis.StatusInitiated || p.Provider != "" {
		t.Fatalf("created: %s %q", p.Status, p.Provider)
	}
	dir := testutil.ArtifactsDir(t)

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
		// A payer of the region: French first (the page follows
		// Accept-Language).
		chromedp.Flag("lang", "fr-SN"),
		chromedp.Flag("accept-lang", "fr-SN,fr,en"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(390, 844),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	// Start the browser, then collect the console: a CSP violation or a
	// script error shows there.
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

	screenshot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(dir, name)
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

	// The provider choice, the phone pre-filled.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(p.PaymentURL),
		chromedp.WaitVisible(chromedp.ID("provider-form")),
	); err != nil {
		t.Fatalf("open payment_url: %v", err)
	}
	if got := text("#amount"); got != amount5000 {
		t.Errorf("amount %q", got)
	}
	phone, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("phone")))
	if err != nil || phone != "+221771234567" {
		t.Fatalf("phone field %q, %v", phone, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`label[data-provider="channel_b"]`)),
		chromedp.Click(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.ID("otp")),
	); err != nil {
		t.Fatalf("choose channel_b: %v", err)
	}
	if got := text("#step-otp h1"); got != langFR.T("otp_title") {
		t.Errorf("OTP step title %q", got)
	}
	screenshot("checkout-otp.png")

	// The test one-time code.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("otp"), provider.TestOTP),
		chromedp.Click(chromedp.ID("otp-submit")),
		chromedp.WaitVisible(chromedp.ID("outcome")),
		// page.js runs under the CSP: it shows the countdown.
		chromedp.WaitVisible(chromedp.ID("countdown")),
	); err != nil {
		t.Fatalf("submit the code: %v", err)
	}
	if got := text("#outcome h1"); got != langFR.T("outcome_success") {
		t.Errorf("outcome %q", got)
	}
	if got := e.reload(p.ID); got.Status != xaalis.StatusSuccess || got.Provider != "channel_b" {
		t.Errorf("payment: %s %s", got.Status, got.Provider)
	}
	screenshot("checkout-success.png")

	// Back to the merchant.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("return")),
		chromedp.WaitVisible(chromedp.ID("thanks")),
	); err != nil {
		t.Fatalf("return to the merchant: %v", err)
	}
	select {
	case u := <-hits:
		want := "reference=" + p.Reference + "&status=success"
		if u.Path != "/paid" || u.RawQuery != want {
			t.Errorf("merchant saw %s?%s, want /paid?%s", u.Path, u.RawQuery, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the merchant never saw the payer come back")
	}

	mu.Lock()
	for _, m := range console {
		if m.Type == chromedp.ConsoleError || m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			t.Errorf("browser console: %s %s (%s)", m.Type, m.Text, m.URL)
		}
	}
	mu.Unlock()
	t.Logf("browser walk took %s", time.Since(start).Round(time.Millisecond))
}
