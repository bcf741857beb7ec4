// Package checkout is the hosted payment page of Xaalis: the page a
// payment's payment_url opens, where the payer chooses a provider, takes
// the provider's next step (one-time code, USSD confirmation, wallet
// redirect), sees the outcome and returns to the merchant; and the
// client script merchants include to open it.
//
// The page is server-rendered with html/template and works without
// JavaScript: every action is a form that posts and answers 303 See Other
// back to the page. A small script (served from this package, never
// inline) only polls the payment's status, refreshes the page when it
// changes and returns to the merchant once it is final.
//
// Routes, to register on the API's mux:
//
//	GET  /checkout/{id}            Pages.Show
//	POST /checkout/{id}/provider   Pages.Choose    (form: provider, phone, lang)
//	POST /checkout/{id}/otp        Pages.OTP       (form: otp, lang)
//	POST /checkout/{id}/simulate   Pages.Simulate  (form: outcome, lang; test payments)
//	POST /checkout/{id}/cancel     Pages.Cancel    (form: lang)
//	GET  /checkout/{id}/status     Pages.StatusJSON
//	GET  /checkout-assets/{name}   Pages.Asset
//	GET  /v1/checkout.js           Pages.Script
//
// The assets live outside /checkout/: "GET /checkout/assets/{name}" and
// "GET /checkout/{id}/status" would both match /checkout/assets/status,
// which net/http's mux refuses at registration.
//
// The payment id in the URL is the payer's only credential, as it is for
// payment_url. Errors of a POST come back to the page as ?e=<key>, a key
// of this package's message table and never the payer's input: phone
// numbers stay out of URLs and logs.
package checkout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Pages serves the hosted payment page over the App.
type Pages struct {
	App    *xaalis.App
	Logger *slog.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

var templates = template.Must(template.New("").ParseFS(templateFS, "templates/*.html"))

// csp allows the page's own stylesheet and script only: no inline script
// or style, no framing, forms posting to this origin only.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; " +
	"base-uri 'none'; object-src 'none'"

// testOTP is the one-time code of the test-mode simulators
// (provider.TestOTP), shown on the page of test payments.
const testOTP = "123456"

// maxFormBytes bounds the forms the page posts.
const maxFormBytes = 16 << 10

// secure sets the headers of every page answer.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

func (p *Pages) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// logError logs an unexpected error with what is known of the request.
func (p *Pages) logError(w http.ResponseWriter, r *http.Request, op, id string, err error) {
	p.logger().LogAttrs(r.Context(), slog.LevelError, "checkout error",
		slog.String("op", op),
		slog.String("payment_id", id),
		slog.String("request_id", w.Header().Get("X-Request-Id")),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("error", err.Error()),
	)
}

// pagePath is the page of a payment, in a language when one is given.
func pagePath(id string, l lang) string {
	p := "/checkout/" + url.PathEscape(id)
	if l != "" {
		p += "?lang=" + string(l)
	}
	return p
}

// validID bounds what is looked up: ids are UUIDs.
func validID(id string) bool { return id != "" && len(id) <= 64 }

// Show renders the page of a payment in its current state.
func (p *Pages) Show(w http.ResponseWriter, r *http.Request) {
	l := pickLang(r)
	id := r.PathValue("id")
	if !validID(id) {
		p.notFound(w, r, l)
		return
	}
	v, err := p.App.Checkout(r.Context(), id)
	if err != nil {
		p.fail(w, r, l, "show", id, err)
		return
	}
	d := newPageData(v, l, r.URL.Query().Get("e"))
	p.render(w, r, http.StatusOK, "page", d)
}

// Choose records the payer's provider and phone and initiates the payment.
func (p *Pages) Choose(w http.ResponseWriter, r *http.Request) {
	p.post(w, r, "choose", func(ctx context.Context, id string) string {
		provider := strings.TrimSpace(r.PostFormValue("provider"))
		if provider == "" {
			return "provider_required"
		}
		_, err := p.App.ChooseProvider(ctx, id, provider, r.PostFormValue("phone"))
		return p.errorKey(w, r, "choose", id, err)
	})
}

// OTP submits the one-time code the payer received.
func (p *Pages) OTP(w http.ResponseWriter, r *http.Request) {
	p.post(w, r, "otp", func(ctx context.Context, id string) string {
		otp := strings.TrimSpace(r.PostFormValue("otp"))
		if otp == "" {
			return "otp_required"
		}
		if len(otp) > 12 {
			return "otp_wrong" // no provider code is that long
		}
		t, err := p.App.SubmitOTP(ctx, id, otp)
		if err != nil && t != nil && xaalis.ErrorCode(err) == xaalis.EValidation {
			// The provider refused the code; the payment still waits.
			return "otp_wrong"
		}
		return p.errorKey(w, r, "otp", id, err)
	})
}

// Simulate is the test buttons: success, failed or cancelled.
func (p *Pages) Simulate(w http.ResponseWriter, r *http.Request) {
	p.post(w, r, "simulate", func(ctx context.Context, id string) string {
		outcome := r.PostFormValue("outcome")
		switch outcome {
		case "success", "failed", "cancelled":
		default:
			return "outcome_invalid"
		}
		_, err := p.App.CheckoutSimulate(ctx, id, outcome)
		return p.errorKey(w, r, "simulate", id, err)
	})
}

// Cancel is the payer abandoning the payment.
func (p *Pages) Cancel(w http.ResponseWriter, r *http.Request) {
	p.post(w, r, "cancel", func(ctx context.Context, id string) string {
		_, err := p.App.CheckoutCancel(ctx, id)
		return p.errorKey(w, r, "cancel", id, err)
	})
}

// errKeyNotFound is returned by a post action for an unknown payment.
const errKeyNotFound = "\x00not_found"

// post runs a form action and answers 303 to the page, with ?e=<key> when
// the action failed.
func (p *Pages) post(w http.ResponseWriter, r *http.Request, op string, act func(ctx context.Context, id string) string) {
	id := r.PathValue("id")
	if !sameOrigin(r) {
		p.renderMessage(w, r, http.StatusForbidden, pickLang(r), "forbidden_title", "forbidden_body")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		secure(w.Header())
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	// The page's forms carry its language.
	l, ok := parseLang(r.PostFormValue("lang"))
	if !ok {
		l = pickLang(r)
	}
	if !validID(id) {
		p.notFound(w, r, l)
		return
	}
	key := act(r.Context(), id)
	if key == errKeyNotFound {
		p.notFound(w, r, l)
		return
	}
	loc := pagePath(id, l)
	if key != "" {
		loc += "&e=" + url.QueryEscape(key)
	}
	secure(w.Header())
	http.Redirect(w, r, loc, http.StatusSeeOther)
}

// sameOrigin refuses a form posted from another site: the Origin header,
// when the browser sends one, must name this host; failing that, the
// browser's Sec-Fetch-Site must not say cross-site. "null" names no host
// and is read as no Origin: under the page's own Referrer-Policy
// (no-referrer) browsers send Origin: null on its same-origin posts,
// while a sandboxed frame of another site, which also sends null, says
// cross-site in Sec-Fetch-Site.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		return err == nil && strings.EqualFold(u.Host, r.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") != "cross-site"
}

// errorKey maps the error of an App call to a message key for ?e=; ""
// for no error. Unexpected errors are logged and shown as generic.
func (p *Pages) errorKey(w http.ResponseWriter, r *http.Request, op, id string, err error) string {
	if err == nil {
		return ""
	}
	var e *xaalis.Error
	if !errors.As(err, &e) {
		p.logError(w, r, op, id, err)
		return "generic"
	}
	switch e.Code {
	case xaalis.ENotFound, xaalis.ETransactionNotFound:
		return errKeyNotFound
	case xaalis.EInvalidPhoneNumber:
		reason, _ := e.Context["reason"].(string)
		for _, k := range xaalis.PhoneReasons {
			if k == reason {
				return "phone_" + reason
			}
		}
		return "phone_invalid"
	case xaalis.EValidation:
		switch {
		case len(e.Fields["phone"]) > 0:
			return "phone_required"
		case len(e.Fields["outcome"]) > 0:
			// The outcome was checked: success and failed need a provider.
			return "simulate_needs_provider"
		}
		// provider or otp: the payment no longer waits for that step.
		return "not_waiting"
	case xaalis.EGatewayUnavailable:
		return "gateway_unavailable"
	case xaalis.EGatewayError:
		return "gateway_error"
	case xaalis.EProviderUnavailable, xaalis.EProviderCountryUnsupported, xaalis.EMerchantProviderNotAuthorized,
		xaalis.EFeesUnavailable, xaalis.EDailyLimitExceeded:
		return "provider_unavailable"
	case xaalis.EAmountBelowProviderMinimum:
		return "provider_minimum"
	case xaalis.EBCEAOLimitExceeded:
		return "payer_limit"
	case xaalis.ETooManyRequests:
		return "too_many"
	case xaalis.EMerchantInactive:
		return "merchant_inactive"
	case xaalis.ELivemodeMismatch:
		return "test_only"
	case xaalis.EInternal:
		p.logError(w, r, op, id, err)
		return "generic"
	}
	p.logger().LogAttrs(r.Context(), slog.LevelWarn, "checkout refused",
		slog.String("op", op), slog.String("payment_id", id),
		slog.String("request_id", w.Header().Get("X-Request-Id")), slog.String("code", string(e.Code)))
	return "refused"
}

// fail answers a GET whose App call failed: the 404 page for an unknown
// payment, else a logged 500.
func (p *Pages) fail(w http.ResponseWriter, r *http.Request, l lang, op, id string, err error) {
	if c := xaalis.ErrorCode(err); c == xaalis.ENotFound || c == xaalis.ETransactionNotFound {
		p.notFound(w, r, l)
		return
	}
	p.logError(w, r, op, id, err)
	p.renderMessage(w, r, http.StatusInternalServerError, l, "error_title", "e_generic")
}

func (p *Pages) notFound(w http.ResponseWriter, r *http.Request, l lang) {
	p.renderMessage(w, r, http.StatusNotFound, l, "not_found_title", "not_found_body")
}

// messageData is the data of the message page (404, 403, 500).
type messageData struct {
	L, Other    lang
	Title, Body string
	SwitchURL   string
	CSSURL      string
}

func (p *Pages) renderMessage(w http.ResponseWriter, r *http.Request, status int, l lang, title, body string) {
	d := messageData{L: l, Other: l.other(), Title: l.T(title), Body: l.T(body), CSSURL: assetURL("checkout.css")}
	if r.Method == http.MethodGet {
		d.SwitchURL = "?lang=" + string(l.other())
	}
	p.render(w, r, status, "message", d)
}

// render executes a template into a buffer first, so that a failure is a
// clean 500.
func (p *Pages) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		p.logError(w, r, "render "+name, r.PathValue("id"), err)
		secure(w.Header())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	secure(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Vary", "Accept-Language")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// statusBody is the answer of GET /checkout/{id}/status.
type statusBody struct {
	Status    xaalis.Status `json:"status"`
	Reference string        `json:"reference"`
	// RedirectURL is the merchant's return URL once the payment is final,
	// else null.
	RedirectURL *string `json:"redirect_url"`
}

// StatusJSON answers the payment's status for the page's poller and for
// checkout.js on the merchant's page (hence CORS for any origin: the
// payment id is the credential, and nothing but the status, the
// reference and the merchant's own return URL is said).
func (p *Pages) StatusJSON(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	secure(h)
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Content-Type", "application/json")
	id := r.PathValue("id")
	if !validID(id) {
		writeJSONError(w, http.StatusNotFound, xaalis.ENotFound)
		return
	}
	t, err := p.App.CheckoutPayment(r.Context(), id)
	if err != nil {
		if c := xaalis.ErrorCode(err); c == xaalis.ENotFound || c == xaalis.ETransactionNotFound {
			writeJSONError(w, http.StatusNotFound, xaalis.ENotFound)
			return
		}
		p.logError(w, r, "status", id, err)
		writeJSONError(w, http.StatusInternalServerError, xaalis.EInternal)
		return
	}
	body := statusBody{Status: t.Status, Reference: t.Reference}
	if u := returnURL(t); u != "" {
		body.RedirectURL = &u
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSONError answers the API's error envelope: code, message and
// documentation_url, and for api_error the request id as its context.
func writeJSONError(w http.ResponseWriter, status int, code xaalis.Code) {
	msg := ""
	if c, ok := xaalis.Lookup(code); ok {
		msg = c.Message
	}
	e := map[string]any{"code": string(code), "message": msg, "documentation_url": xaalis.DocumentationURL(code)}
	if code == xaalis.EInternal {
		e["context"] = map[string]string{"request_id": w.Header().Get("X-Request-Id")}
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// assetTypes are the files Asset serves, with their types.
var assetTypes = map[string]string{
	"checkout.css": "text/css; charset=utf-8",
	"page.js":      "text/javascript; charset=utf-8",
}

// assetVersion changes with the assets' content, so that they may be
// cached: their URLs carry it.
var assetVersion = func() string {
	h := sha256.New()
	_ = fs.WalkDir(assetFS, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// assetURL is the versioned URL of an asset.
func assetURL(name string) string { return "/checkout-assets/" + name + "?v=" + assetVersion }

// Asset serves the page's stylesheet and script.
func (p *Pages) Asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ct, ok := assetTypes[name]
	if !ok {
		p.notFound(w, r, pickLang(r))
		return
	}
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		p.notFound(w, r, pickLang(r))
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=86400")
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

//go:embed checkout.js
var clientScript []byte

// Script serves checkout.js, the client script a merchant's page includes
// to open the hosted page and hear of the outcome.
func (p *Pages) Script(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	if r.Method != http.MethodHead {
		_, _ = w.Write(clientScript)
	}
}
