package checkout

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// esc is how html/template writes s in text and in attributes that are
// not URLs: it also escapes '+'.
var esc = strings.NewReplacer("&", "&amp;", "'", "&#39;", `"`, "&#34;", "+", "&#43;", "<", "&lt;", ">", "&gt;").Replace

// escURL is how html/template writes a URL in an attribute.
func escURL(s string) string { return html.EscapeString(s) }

const amount5000 = "5\u202f000\u00a0XOF"

func checkPageHeaders(t *testing.T, what string, res *response) {
	t.Helper()
	h := res.header
	cspv := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(cspv, want) {
			t.Errorf("%s: CSP %q lacks %q", what, cspv, want)
		}
	}
	if strings.Contains(cspv, "unsafe-inline") || strings.Contains(cspv, "unsafe-eval") {
		t.Errorf("%s: CSP allows inline code: %q", what, cspv)
	}
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
		"X-Content-Type-Options": "nosniff", "Content-Type": "text/html; charset=utf-8",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", what, k, got, want)
		}
	}
	// No inline script: every <script> has a src.
	if n, m := strings.Count(res.body, "<script"), strings.Count(res.body, "<script src="); n != m {
		t.Errorf("%s: %d <script> tags, %d with src", what, n, m)
	}
	if strings.Contains(res.body, " style=") || strings.Contains(res.body, "<style") {
		t.Errorf("%s: inline style", what)
	}
	lacks(t, what, res.body, "!missing(")
}

func TestCheckoutOTPFlow(t *testing.T) {
	e := newEnv(t, "Boutique Thiès")
	p := e.payment(map[string]any{"payer": map[string]any{"phone": "+221771234567"}})
	if p.Status != xaalis.StatusInitiated {
		t.Fatalf("status %s", p.Status)
	}
	if want := e.srv.URL + "/checkout/" + p.ID; p.PaymentURL != want {
		t.Fatalf("payment_url %q, want %q", p.PaymentURL, want)
	}
	page := "/checkout/" + p.ID

	// The provider choice.
	res := e.get(page)
	if res.status != http.StatusOK {
		t.Fatalf("GET page: %d", res.status)
	}
	checkPageHeaders(t, "choose", res)
	contains(t, "choose", res.body,
		`<html lang="fr">`, "Boutique Thiès", amount5000, p.Reference, "Choisissez votre moyen de paiement",
		`value="channel_a"`, `value="channel_b"`, `value="channel_c"`, `data-provider="channel_b"`,
		"Wallet A", "Wallet B", "Wallet C",
		`type="tel"`, `autocomplete="tel"`, `name="phone" value="`+esc("+221771234567")+`"`,
		`action="/checkout/`+p.ID+`/provider"`, "Payer "+amount5000,
		"Mode test", `id="simulate-cancelled"`, `action="/checkout/`+p.ID+`/cancel"`,
		`<script src="/checkout-assets/page.js?v=`, `href="/checkout-assets/checkout.css?v=`,
		`href="/checkout/`+p.ID+`?lang=en"`)
	// Success and failure are simulated once a provider holds the payment.
	lacks(t, "choose", res.body, `id="simulate-success"`, `id="simulate-failed"`)
	if st, ref, redirect := e.statusJSON(p.ID); st != "initiated" || ref != p.Reference || redirect != nil {
		t.Errorf("status JSON: %s %s %v", st, ref, redirect)
	}

	// Choosing channel_b (OTP), with the number in national form.
	res, loc := e.postFollow(page+"/provider", url.Values{"provider": {"channel_b"}, "phone": {"77 123 45 67"}, "lang": {"fr"}})
	if loc != page+"?lang=fr" {
		t.Errorf("Location %q", loc)
	}
	got := e.reload(p.ID)
	if got.Status != xaalis.StatusPending || got.Provider != "channel_b" || got.NextAction == nil || got.NextAction.Type != xaalis.NextOTP {
		t.Fatalf("after choice: status %s provider %q next %+v", got.Status, got.Provider, got.NextAction)
	}
	checkPageHeaders(t, "otp", res)
	contains(t, "otp", res.body, "Confirmez avec un code", "Via Wallet B", esc(xaalis.MaskPhone("+221771234567")),
		got.NextAction.USSDCode, `href="tel:`+strings.ReplaceAll(got.NextAction.USSDCode, "#", "%23")+`"`,
		`name="otp"`, `autocomplete="one-time-code"`, `inputmode="numeric"`, `action="/checkout/`+p.ID+`/otp"`,
		"le code est "+provider.TestOTP, `id="simulate-success"`, `id="simulate-failed"`, `id="cancel"`)
	lacks(t, "otp", res.body, `id="provider-form"`, "+221771234567")
	if st, _, redirect := e.statusJSON(p.ID); st != "pending" || redirect != nil {
		t.Errorf("status JSON: %s %v", st, redirect)
	}

	// A wrong code: an error, and the payment still waits.
	res, loc = e.postFollow(page+"/otp", url.Values{"otp": {"000000"}, "lang": {"fr"}})
	if !strings.Contains(loc, "e=otp_wrong") {
		t.Errorf("Location %q", loc)
	}
	contains(t, "wrong otp", res.body, `role="alert"`, esc(messages[langFR]["e_otp_wrong"]), `id="otp-form"`)
	if got := e.reload(p.ID); got.Status != xaalis.StatusPending {
		t.Fatalf("after wrong code: %s", got.Status)
	}
	if _, loc = e.postFollow(page+"/otp", url.Values{"otp": {" "}, "lang": {"fr"}}); !strings.Contains(loc, "e=otp_required") {
		t.Errorf("empty code: Location %q", loc)
	}

	// The right code: success, and the way back to the merchant.
	res, _ = e.postFollow(page+"/otp", url.Values{"otp": {provider.TestOTP}, "lang": {"fr"}})
	if got := e.reload(p.ID); got.Status != xaalis.StatusSuccess {
		t.Fatalf("after the test code: %s", got.Status)
	}
	back := "https://shop.example/paid?order=42&reference=" + p.Reference + "&status=success"
	checkPageHeaders(t, "success", res)
	contains(t, "success", res.body, "Paiement réussi", `data-outcome="success"`,
		esc("Votre paiement de "+amount5000+" à Boutique Thiès a bien été effectué."),
		`id="return" href="`+escURL(back)+`"`, "Retour chez le marchand", `data-return-url="`+escURL(back)+`"`)
	lacks(t, "success", res.body, `id="cancel"`, `id="simulate"`, `role="alert"`)
	st, ref, redirect := e.statusJSON(p.ID)
	if st != "success" || ref != p.Reference || redirect == nil || *redirect != back {
		t.Errorf("status JSON: %s %s %v", st, ref, redirect)
	}

	// A late form on a final payment changes nothing and shows no error.
	res, loc = e.postFollow(page+"/provider", url.Values{"provider": {"channel_a"}, "lang": {"fr"}})
	if !strings.Contains(loc, "e=not_waiting") {
		t.Errorf("late choice: Location %q", loc)
	}
	lacks(t, "late choice", res.body, `role="alert"`)
}

func TestLanguage(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(nil)
	page := "/checkout/" + p.ID
	for _, c := range []struct {
		name, query, accept string
		want                lang
	}{
		{"default", "", "", langFR},
		{"query en", "?lang=en", "", langEN},
		{"query wins", "?lang=fr", "en-US,en;q=0.9", langFR},
		{"accept en", "", "en-US,en;q=0.9", langEN},
		{"accept fr preferred", "", "en;q=0.8, fr;q=0.9", langFR},
		{"accept en preferred", "", "fr;q=0.5, en", langEN},
		{"tie goes to fr", "", "wo, en;q=0.4, fr;q=0.4", langFR},
		{"neither", "", "de-DE,de;q=0.9", langFR},
		{"bad query ignored", "?lang=%3Cscript%3E", "en", langEN},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := e.get(page+c.query, "Accept-Language", c.accept)
			checkPageHeaders(t, c.name, res)
			contains(t, c.name, res.body, `<html lang="`+string(c.want)+`">`, esc(c.want.T("choose_title")),
				esc(c.want.F("pay_button", amount5000)), esc(c.want.T("test_mode_detail")),
				`href="/checkout/`+p.ID+`?lang=`+string(c.want.other())+`"`, c.want.other().Name(),
				`<input type="hidden" name="lang" value="`+string(c.want)+`">`)
			lacks(t, c.name, res.body, "&lt;script")
		})
	}
	// The form's language carries through the redirect.
	_, loc := e.postFollow(page+"/provider", url.Values{"provider": {""}, "lang": {"en"}})
	if loc != page+"?lang=en&e=provider_required" {
		t.Errorf("Location %q", loc)
	}
	res := e.get(loc)
	contains(t, "en error", res.body, "Choose a payment method.")
}

func TestAcceptLang(t *testing.T) {
	for h, want := range map[string]lang{
		"": langFR, "en": langEN, "EN-gb": langEN, "fr-SN,fr;q=0.9,en;q=0.8": langFR,
		"en;q=0": langFR, "en;q=abc": langFR, "*": langFR, "en;q=0.9,fr;q=0.9": langFR,
		"en, fr;q=0.99": langEN, "wo-SN,en;q=0.7": langEN,
	} {
		if got := acceptLang(h); got != want {
			t.Errorf("acceptLang(%q) = %s, want %s", h, got, want)
		}
	}
}

func TestEscaping(t *testing.T) {
	name := `<script>alert("x")</script> & Co`
	e := newEnv(t, name)
	p := e.payment(map[string]any{"merchant_ref": `<b>ref</b>"'`})
	page := "/checkout/" + p.ID
	res := e.get(page + "?e=%3Cscript%3Ealert(1)%3C/script%3E")
	checkPageHeaders(t, "escaping", res)
	contains(t, "escaping", res.body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; Co", "&lt;b&gt;ref&lt;/b&gt;")
	lacks(t, "escaping", res.body, "<script>alert", "<b>ref", "alert(1)", `role="alert"`)

	// The payer's input is never reflected: a bad phone number comes back
	// as an error key.
	res, loc := e.postFollow(page+"/provider", url.Values{"provider": {"channel_b"}, "phone": {`<script>alert(2)</script>`}})
	if !strings.Contains(loc, "e=phone_not_a_number") {
		t.Errorf("Location %q", loc)
	}
	contains(t, "bad phone", res.body, esc(messages[langFR]["e_phone_not_a_number"]))
	lacks(t, "bad phone", res.body, "alert(2)")
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, "Boutique")
	res := e.get("/checkout/0190a8c2-0000-7000-8000-000000000000", "Accept-Language", "en")
	if res.status != http.StatusNotFound {
		t.Fatalf("status %d", res.status)
	}
	checkPageHeaders(t, "404", res)
	contains(t, "404", res.body, `<html lang="en">`, "Payment not found", `href="?lang=fr"`)
	res = e.get("/checkout/" + strings.Repeat("x", 200))
	if res.status != http.StatusNotFound || !strings.Contains(res.body, "Paiement introuvable") {
		t.Errorf("long id: %d %s", res.status, res.body)
	}
	res = e.get("/checkout/nope/status")
	if res.status != http.StatusNotFound || res.header.Get("Content-Type") != "application/json" ||
		!strings.Contains(res.body, `"code":"not_found"`) {
		t.Errorf("status of unknown: %d %s %s", res.status, res.header.Get("Content-Type"), res.body)
	}
	res = e.post("/checkout/nope/cancel", url.Values{"lang": {"fr"}})
	if res.status != http.StatusNotFound || !strings.Contains(res.body, "Paiement introuvable") {
		t.Errorf("cancel of unknown: %d %s", res.status, res.body)
	}
	if res := e.get("/checkout-assets/nope.js"); res.status != http.StatusNotFound {
		t.Errorf("unknown asset: %d", res.status)
	}
}

func TestUSSDAndSimulate(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(map[string]any{"provider": "channel_c", "payer": map[string]any{"phone": provider.TestPhonePending}})
	if p.Status != xaalis.StatusPending || p.NextAction == nil || p.NextAction.Type != xaalis.NextUSSD {
		t.Fatalf("created: %s %+v", p.Status, p.NextAction)
	}
	page := "/checkout/" + p.ID
	res := e.get(page)
	checkPageHeaders(t, "ussd", res)
	contains(t, "ussd", res.body, "Confirmez sur votre téléphone", "Via Wallet C", p.NextAction.USSDCode,
		`<noscript><meta http-equiv="refresh" content="10"></noscript>`, "En attente de confirmation",
		`id="simulate-success"`, `id="simulate-failed"`, `id="simulate-cancelled"`, `name="outcome" value="failed"`)

	// An outcome the page does not offer.
	_, loc := e.postFollow(page+"/simulate", url.Values{"outcome": {"refunded"}, "lang": {"fr"}})
	if !strings.Contains(loc, "e=outcome_invalid") {
		t.Errorf("Location %q", loc)
	}

	res, _ = e.postFollow(page+"/simulate", url.Values{"outcome": {"failed"}, "lang": {"en"}})
	if got := e.reload(p.ID); got.Status != xaalis.StatusFailed {
		t.Fatalf("after simulate failed: %s", got.Status)
	}
	back := "https://shop.example/failed?reference=" + p.Reference + "&status=failed"
	checkPageHeaders(t, "failed", res)
	contains(t, "failed", res.body, "Payment failed", "No money was taken.", "The payment was declined on the phone.",
		`id="return" href="`+escURL(back)+`"`, "Return to the merchant")
	lacks(t, "failed", res.body, `id="simulate"`, `id="cancel"`, "<noscript>")
	if st, _, redirect := e.statusJSON(p.ID); st != "failed" || redirect == nil || *redirect != back {
		t.Errorf("status JSON: %s %v", st, redirect)
	}
}

func TestRedirectAndSimulateSuccess(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(map[string]any{"payer": map[string]any{"phone": provider.TestPhonePending}})
	page := "/checkout/" + p.ID
	// Before a provider is chosen, success cannot be simulated.
	_, loc := e.postFollow(page+"/simulate", url.Values{"outcome": {"success"}, "lang": {"fr"}})
	if !strings.Contains(loc, "e=simulate_needs_provider") {
		t.Errorf("Location %q", loc)
	}

	res, _ := e.postFollow(page+"/provider", url.Values{"provider": {"channel_a"}, "phone": {provider.TestPhonePending}, "lang": {"fr"}})
	got := e.reload(p.ID)
	if got.Status != xaalis.StatusPending || got.NextAction == nil || got.NextAction.Type != xaalis.NextRedirect {
		t.Fatalf("after choice: %s %+v", got.Status, got.NextAction)
	}
	checkPageHeaders(t, "redirect", res)
	contains(t, "redirect", res.body, "Validez dans Wallet A", `id="redirect" href="`+escURL(got.NextAction.RedirectURL)+`"`,
		`rel="noopener noreferrer"`)

	res, _ = e.postFollow(page+"/simulate", url.Values{"outcome": {"success"}, "lang": {"fr"}})
	if got := e.reload(p.ID); got.Status != xaalis.StatusSuccess {
		t.Fatalf("after simulate success: %s", got.Status)
	}
	contains(t, "success", res.body, "Paiement réussi", "status=success")
}

func TestCancel(t *testing.T) {
	e := newEnv(t, "Boutique")
	for _, extra := range []map[string]any{
		nil, // initiated, no provider
		{"provider": "channel_c", "payer": map[string]any{"phone": provider.TestPhonePending}}, // pending
	} {
		p := e.payment(extra)
		page := "/checkout/" + p.ID
		res, loc := e.postFollow(page+"/cancel", url.Values{"lang": {"fr"}})
		if loc != page+"?lang=fr" {
			t.Errorf("Location %q", loc)
		}
		if got := e.reload(p.ID); got.Status != xaalis.StatusCancelled {
			t.Fatalf("after cancel: %s", got.Status)
		}
		back := "https://shop.example/failed?reference=" + p.Reference + "&status=cancelled"
		checkPageHeaders(t, "cancelled", res)
		contains(t, "cancelled", res.body, "Paiement annulé", `id="return" href="`+escURL(back)+`"`)
		if st, _, redirect := e.statusJSON(p.ID); st != "cancelled" || redirect == nil || *redirect != back {
			t.Errorf("status JSON: %s %v", st, redirect)
		}
		// Cancelling again is harmless.
		if _, loc := e.postFollow(page+"/cancel", url.Values{"lang": {"fr"}}); loc != page+"?lang=fr" {
			t.Errorf("second cancel: Location %q", loc)
		}
	}
}

func TestChoiceErrors(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(nil)
	page := "/checkout/" + p.ID
	for _, c := range []struct {
		name, provider, phone, key, text string
	}{
		{"no provider", "", "+221771234567", "provider_required", "Choisissez un moyen de paiement."},
		{"unknown provider", "channel_z", "+221771234567", "provider_unavailable", messages[langFR]["e_provider_unavailable"]},
		{"no phone", "channel_b", "", "phone_required", messages[langFR]["e_phone_required"]},
		{"short phone", "channel_b", "12", "phone_too_short", "Le numéro est trop court pour un numéro du Sénégal (+221)."},
		{"other country", "channel_b", "+33612345678", "phone_wrong_country", "saisissez un numéro du Sénégal (+221)"},
		{"unreachable", "channel_b", provider.TestPhoneUnreachable, "gateway_unavailable", "Réessayez dans un instant"},
		{"refused", "channel_b", provider.TestPhoneRefused, "gateway_error", messages[langFR]["e_gateway_error"]},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, loc := e.postFollow(page+"/provider", url.Values{"provider": {c.provider}, "phone": {c.phone}, "lang": {"fr"}})
			if !strings.HasSuffix(loc, "&e="+c.key) {
				t.Errorf("Location %q, want e=%s", loc, c.key)
			}
			contains(t, c.name, res.body, `role="alert"`, esc(c.text), `id="provider-form"`)
			lacks(t, c.name, res.body, "!missing(")
			if got := e.reload(p.ID); got.Status != xaalis.StatusInitiated {
				t.Errorf("status %s", got.Status)
			}
		})
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("domain errors were logged as unexpected:\n%s", e.logs.String())
	}

	// A merchant that is not active takes no payment: no provider is
	// offered (the pre-check answers merchant_inactive).
	st := xaalis.MerchantSuspended
	if _, err := e.app.UpdateMerchant(context.Background(), e.merchant.ID, xaalis.MerchantUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	res := e.get(page)
	contains(t, "suspended merchant", res.body, esc(messages[langFR]["no_provider"]))
	lacks(t, "suspended merchant", res.body, `id="provider-form"`)
	st = xaalis.MerchantActive
	if _, err := e.app.UpdateMerchant(context.Background(), e.merchant.ID, xaalis.MerchantUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	contains(t, "active again", e.get(page).body, `id="provider-form"`)

	// No provider can take the payment: the page says so.
	for name, spec := range e.app.Config.Providers {
		spec.Enabled = false
		e.app.Config.Providers[name] = spec
	}
	res = e.get(page)
	contains(t, "no provider", res.body, esc(messages[langFR]["no_provider"]))
	lacks(t, "no provider", res.body, `id="provider-form"`)
}

func TestLiveModeHasNoTestControls(t *testing.T) {
	e := newEnv(t, "Boutique")
	ctx := context.Background()
	_, keys, err := e.app.CreateMerchant(ctx, xaalis.MerchantCreate{Name: "Live Shop", KYC: xaalis.KYCApproved})
	if err != nil {
		t.Fatal(err)
	}
	if e.principal, err = e.app.Authenticate(ctx, keys.SecretLive, netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	p := e.payment(nil)
	page := "/checkout/" + p.ID
	res := e.get(page)
	checkPageHeaders(t, "live", res)
	contains(t, "live", res.body, "Live Shop", `id="cancel"`)
	lacks(t, "live", res.body, "Mode test", `id="simulate"`, "test-banner")
	_, loc := e.postFollow(page+"/simulate", url.Values{"outcome": {"cancelled"}, "lang": {"fr"}})
	if !strings.Contains(loc, "e=test_only") {
		t.Errorf("Location %q", loc)
	}
	if got := e.reload(p.ID); got.Status != xaalis.StatusInitiated {
		t.Errorf("status %s", got.Status)
	}
}

func TestCrossSitePostRefused(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(nil)
	for _, h := range [][2]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/checkout/"+p.ID+"/cancel", strings.NewReader("lang=fr"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(h[0], h[1])
		res := e.do(req)
		if res.status != http.StatusForbidden {
			t.Errorf("%s: status %d", h[0], res.status)
		}
		checkPageHeaders(t, "403", res)
	}
	if got := e.reload(p.ID); got.Status != xaalis.StatusInitiated {
		t.Errorf("status %s", got.Status)
	}
}

func TestUnexpectedErrorIsLogged(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(nil)
	if c, ok := e.app.Store.(interface{ Close() error }); ok {
		c.Close()
	} else {
		t.Skip("store cannot be closed")
	}
	res := e.get("/checkout/" + p.ID)
	if res.status != http.StatusInternalServerError {
		t.Fatalf("status %d", res.status)
	}
	checkPageHeaders(t, "500", res)
	contains(t, "500", res.body, esc(messages[langFR]["e_generic"]))
	res = e.post("/checkout/"+p.ID+"/cancel", url.Values{"lang": {"fr"}})
	if res.status != http.StatusSeeOther || !strings.HasSuffix(res.header.Get("Location"), "&e=generic") {
		t.Errorf("cancel: %d %q", res.status, res.header.Get("Location"))
	}
	logs := e.logs.String()
	contains(t, "logs", logs, "checkout error", "payment_id="+p.ID, "op=show", "op=cancel", "path=/checkout/"+p.ID)
}

func TestStatusJSONShape(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(nil)
	res := e.get("/checkout/" + p.ID + "/status")
	if res.header.Get("Access-Control-Allow-Origin") != "*" || res.header.Get("Cache-Control") != "no-store" ||
		res.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", res.header)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(res.body), &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"redirect_url", "reference", "status"}) || m["redirect_url"] != nil {
		t.Errorf("body %s", res.body)
	}
}

func TestScriptAndAssets(t *testing.T) {
	e := newEnv(t, "Boutique")
	res := e.get("/v1/checkout.js")
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		res.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("checkout.js: %d %v", res.status, res.header)
	}
	contains(t, "checkout.js", res.body, "Xaalis", "X.open = open", "onSuccess", "onFailure", "onClose",
		"/status", "indicative only", "signed webhook")
	for name, ct := range assetTypes {
		res := e.get(assetURL(name))
		if res.status != http.StatusOK || res.header.Get("Content-Type") != ct || res.body == "" {
			t.Errorf("%s: %d %q", name, res.status, res.header.Get("Content-Type"))
		}
	}
	contains(t, "page.js", e.get("/checkout-assets/page.js").body, "data-status-url", "location.replace")
}

func TestFormatAmount(t *testing.T) {
	for _, c := range []struct {
		a      xaalis.Amount
		fr, en string
	}{
		{xaalis.Units(5000, xaalis.XOF), "5\u202f000\u00a0XOF", "5\u202f000\u00a0XOF"},
		{xaalis.Units(100, xaalis.XOF), "100\u00a0XOF", "100\u00a0XOF"},
		{xaalis.Units(1234567, xaalis.XOF), "1\u202f234\u202f567\u00a0XOF", "1\u202f234\u202f567\u00a0XOF"},
		{xaalis.Units(0, xaalis.XOF), "0\u00a0XOF", "0\u00a0XOF"},
		{xaalis.Amount{Minor: 1205, Currency: xaalis.EUR}, "12,05\u00a0EUR", "12.05\u00a0EUR"},
		{xaalis.Amount{Minor: 123456750, Currency: xaalis.USD}, "1\u202f234\u202f567,50\u00a0USD", "1\u202f234\u202f567.50\u00a0USD"},
	} {
		if got := formatAmount(c.a, langFR); got != c.fr {
			t.Errorf("fr %v: %q, want %q", c.a, got, c.fr)
		}
		if got := formatAmount(c.a, langEN); got != c.en {
			t.Errorf("en %v: %q, want %q", c.a, got, c.en)
		}
	}
}

func TestReturnURL(t *testing.T) {
	tx := &xaalis.Transaction{Reference: "TXN-ABCDEFGHJKMNPQRS", Status: xaalis.StatusSuccess,
		SuccessURL: "https://shop.example/ok?a=1&b=x%20y#top", FailedURL: "https://shop.example/ko"}
	if got, want := returnURL(tx), "https://shop.example/ok?a=1&b=x%20y&reference=TXN-ABCDEFGHJKMNPQRS&status=success#top"; got != want {
		t.Errorf("success: %q, want %q", got, want)
	}
	tx.Status = xaalis.StatusExpired
	if got, want := returnURL(tx), "https://shop.example/ko?reference=TXN-ABCDEFGHJKMNPQRS&status=expired"; got != want {
		t.Errorf("expired: %q, want %q", got, want)
	}
	tx.Status = xaalis.StatusPending
	if got := returnURL(tx); got != "" {
		t.Errorf("pending: %q", got)
	}
	tx.Status, tx.FailedURL = xaalis.StatusFailed, "javascript:alert(1)"
	if got := returnURL(tx); got != "" {
		t.Errorf("javascript: %q", got)
	}
}

func TestMessages(t *testing.T) {
	for _, pair := range [][2]lang{{langFR, langEN}, {langEN, langFR}} {
		for k := range messages[pair[0]] {
			if _, ok := messages[pair[1]][k]; !ok {
				t.Errorf("%q is in %s, not in %s", k, pair[0], pair[1])
			}
		}
	}
	// Every error key errorKey returns is translated.
	keys := []string{"generic", "refused", "gateway_unavailable", "gateway_error", "provider_required",
		"provider_unavailable", "provider_minimum", "payer_limit", "merchant_inactive", "not_waiting",
		"otp_required", "otp_wrong", "outcome_invalid", "simulate_needs_provider", "test_only", "phone_required"}
	for _, r := range xaalis.PhoneReasons {
		keys = append(keys, "phone_"+r)
	}
	for _, l := range []lang{langFR, langEN} {
		for _, k := range keys {
			if m := errorMessage(k, l, "CI"); m == "" || strings.Contains(m, "%!") || strings.Contains(m, "!missing") {
				t.Errorf("%s %s: %q", l, k, m)
			}
		}
		for _, s := range xaalis.AllStatuses {
			if s.Open() {
				continue
			}
			if strings.Contains(l.T("outcome_"+string(s))+l.T("detail_"+string(s)), "!missing") {
				t.Errorf("%s: no outcome text for %s", l, s)
			}
		}
	}
	// The failure reasons and the test code are the provider package's.
	for _, r := range []string{provider.ReasonInsufficientFunds, provider.ReasonPayerDeclined,
		provider.ReasonPayerCancelled, provider.ReasonTooManyWrongOTP} {
		if _, ok := failureReasons[r]; !ok {
			t.Errorf("reason %q has no text", r)
		}
	}
	if testOTP != provider.TestOTP {
		t.Errorf("testOTP %q, provider.TestOTP %q", testOTP, provider.TestOTP)
	}
	if got := errorMessage("phone_too_short", langEN, "CI"); got != "The number is too short for a Côte d'Ivoire number (+225)." {
		t.Errorf("%q", got)
	}
	if errorMessage("<script>", langFR, "SN") != "" || errorMessage("", langFR, "SN") != "" {
		t.Error("unknown keys must show nothing")
	}
}

func TestTooManyWrongCodes(t *testing.T) {
	e := newEnv(t, "Boutique")
	p := e.payment(map[string]any{"provider": "channel_b", "payer": map[string]any{"phone": provider.TestPhonePending}})
	page := "/checkout/" + p.ID
	var res *response
	var loc string
	for i := 0; i < provider.MaxOTPAttempts; i++ {
		res, loc = e.postFollow(page+"/otp", url.Values{"otp": {"999999"}, "lang": {"en"}})
	}
	if got := e.reload(p.ID); got.Status != xaalis.StatusFailed {
		t.Fatalf("after %d wrong codes: %s (Location %q)", provider.MaxOTPAttempts, got.Status, loc)
	}
	contains(t, "failed", res.body, "Payment failed", "Too many wrong codes.", "status=failed")
	lacks(t, "failed", res.body, `role="alert"`, `id="otp-form"`)
}
