// Package console is the operator console of Xaalis: server-rendered
// pages on the admin listener (html/template + embed), in French and
// English, usable on a laptop and a phone, with no script at all.
//
// An operator signs in with an operator token (`xaalis operator token
// create`); the console keeps a session in the database (the cookie's
// SHA-256 only) that ends after 12 hours without a request, or at once
// when its token is revoked or expires. The session cookie is HttpOnly,
// SameSite=Strict, scoped to /console/, and Secure when the request came
// over TLS or Options.SecureCookies says a TLS proxy fronts the listener.
// Failed sign-ins are counted per client address in the database and
// refused past xaalis.SignInFailures a window.
//
// Every change is a form posted to this origin: the Origin header (or,
// without one, Sec-Fetch-Site) must say so, and the form must carry the
// session's CSRF token, an HMAC of the session secret; the sign-in form
// carries a token of its own, checked against a cookie. Every action calls
// the same App command as the admin API and the CLI, with the signed-in
// token as the actor, so that the audit log names it. Moves of money
// (payout requests, disputes, revoking a key, marking a payment refunded)
// ask for confirmation on a page of their own first.
//
// Routes, registered by Register on the admin listener's mux:
//
//	GET  /                                   redirect to /console/
//	GET  /console/                           overview
//	GET  /console/login, POST /console/login sign in; POST /console/logout
//	GET  /console/lang?to=fr|en&back=PATH    switch the language
//	POST /console/ledger-check               run the ledger check now
//	GET  /console/merchants[?q=]             merchants, with search
//	GET  /console/merchants/{id}             one merchant
//	POST /console/merchants/{id}/{field}     kyc, status, providers, allow-ips
//	GET|POST /console/keys/{id}/revoke       revoke a key
//	GET  /console/payout-requests[/{id}]     the queue; one request
//	GET|POST /console/payout-requests/{id}/{action}  approve, reject, complete, fail
//	GET  /console/disputes, POST /console/disputes   open disputes; open one
//	GET|POST /console/disputes/{id}/decide   won or lost
//	GET  /console/transactions[?q=]          search; GET /console/transactions/{id}
//	GET|POST /console/transactions/{id}/mark-refunded
//	GET|POST /console/transactions/{id}/settle (?outcome=success|failed)
//	POST /console/events/{id}/redeliver
//	GET  /console/audit                      the audit log
//	GET  /console/assets/{name}              the stylesheet
package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Options tune the console.
type Options struct {
	// SecureCookies marks the cookies Secure even on plain HTTP: set it
	// when a TLS-terminating proxy fronts the admin listener.
	SecureCookies bool
	// ClientIP reads a request's client address as the rest of the
	// listener does (behind trusted proxies, the one they forwarded), for
	// the sign-in throttle, the logs and the audit log; nil: the peer.
	ClientIP func(*http.Request) string
	// SignedIn, when set, is told the operator token of each request with
	// a session: the listener's access log names it, as it does for the
	// operator API's requests.
	SignedIn func(r *http.Request, tokenID string)
}

// Console serves the operator console over an App.
type Console struct {
	App    *xaalis.App
	Logger *slog.Logger
	Opts   Options
}

// New returns a console.
func New(app *xaalis.App, logger *slog.Logger, opts Options) *Console {
	return &Console{App: app, Logger: logger, Opts: opts}
}

// Register mounts the console's routes on mux and returns their patterns
// (docs/security.md lists them): those behind a session, and open, those
// a browser needs before signing in.
func (c *Console) Register(mux *http.ServeMux) (session, open []string) {
	handle := func(pattern string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, h)
		session = append(session, pattern)
	}
	handleOpen := func(pattern string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, h)
		open = append(open, pattern)
	}
	handleOpen("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	handleOpen("GET /console/assets/{name}", c.asset)
	handleOpen("GET /console/login", c.loginPage)
	handleOpen("POST /console/login", c.login)
	handleOpen("GET /console/lang", c.switchLang)
	handle("POST /console/logout", c.action(c.logout))
	handle("GET /console/{$}", c.page(c.overview))
	handle("POST /console/ledger-check", c.action(c.ledgerCheck))
	handle("GET /console/merchants", c.page(c.merchants))
	handle("GET /console/merchants/{id}", c.page(c.merchant))
	handle("POST /console/merchants/{id}/{field}", c.action(c.merchantUpdate))
	handle("GET /console/keys/{id}/revoke", c.page(c.keyRevokeConfirm))
	handle("POST /console/keys/{id}/revoke", c.action(c.keyRevoke))
	handle("GET /console/payout-requests", c.page(c.payoutQueue))
	handle("GET /console/payout-requests/{id}", c.page(c.payoutRequest))
	handle("GET /console/payout-requests/{id}/{action}", c.page(c.payoutConfirm))
	handle("POST /console/payout-requests/{id}/{action}", c.action(c.payoutMove))
	handle("GET /console/disputes", c.page(c.disputes))
	handle("POST /console/disputes", c.action(c.disputeOpen))
	handle("GET /console/disputes/{id}/decide", c.page(c.disputeConfirm))
	handle("POST /console/disputes/{id}/decide", c.action(c.disputeDecide))
	handle("GET /console/transactions", c.page(c.transactions))
	handle("GET /console/transactions/{id}", c.page(c.transaction))
	handle("GET /console/transactions/{id}/mark-refunded", c.page(c.markRefundedConfirm))
	handle("POST /console/transactions/{id}/mark-refunded", c.action(c.markRefunded))
	handle("GET /console/transactions/{id}/settle", c.page(c.settleConfirm))
	handle("POST /console/transactions/{id}/settle", c.action(c.settle))
	handle("POST /console/events/{id}/redeliver", c.action(c.redeliver))
	handle("GET /console/audit", c.page(c.audit))
	return session, open
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// pages are the templates, one set per page: the layout and the page's
// "content".
var pages = func() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
	}
	return out
}()

// Cookies.
const (
	sessionCookie = "xaalis_console"
	loginCookie   = "xaalis_console_login"
	langCookie    = "xaalis_console_lang"
	cookiePath    = "/console/"
)

// csp allows this origin's stylesheet and nothing else: no script at all,
// no framing, forms posting to this origin only.
const csp = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// maxForm bounds the forms the console posts.
const maxForm = 32 << 10

// perPage is the length of the console's lists.
const perPage = 50

func secure(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

func (c *Console) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// session is the signed-in operator of a request.
type session struct {
	s      *xaalis.OperatorSession
	token  *xaalis.OperatorToken
	secret string
	ctx    context.Context // carries the operator as the actor
}

// csrfToken is the session's CSRF token: an HMAC of its secret, which
// only the holder of the cookie can compute.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("xaalis console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookieSecure says whether cookies are marked Secure.
func (c *Console) cookieSecure(r *http.Request) bool { return r.TLS != nil || c.Opts.SecureCookies }

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: cookiePath, MaxAge: maxAge, HttpOnly: true,
		Secure: c.cookieSecure(r), SameSite: http.SameSiteStrictMode})
}

// clientIP is the address the request came from: the listener's own
// reading (Options.ClientIP, which walks the trusted proxies) when it has
// one, else the peer.
func (c *Console) clientIP(r *http.Request) string {
	if c.Opts.ClientIP != nil {
		return c.Opts.ClientIP(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sameOrigin refuses a form posted from elsewhere: the Origin header, when
// the browser sends one, must name this host; failing that, Sec-Fetch-Site
// must not say another site or origin.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return o != "null" && err == nil && strings.EqualFold(u.Host, r.Host)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	return true
}

// authenticate finds the request's session; nil when it has none.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	s, t, err := c.App.OperatorSession(r.Context(), ck.Value)
	if xaalis.ErrorCode(err) == xaalis.EUnauthorized {
		c.setCookie(w, r, sessionCookie, "", -1)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c.Opts.SignedIn != nil {
		c.Opts.SignedIn(r, t.ID)
	}
	ctx := xaalis.WithActor(r.Context(), xaalis.Actor{Name: t.Name, TokenID: t.ID, RequestID: w.Header().Get("X-Request-Id"),
		ClientIP: c.clientIP(r)})
	return &session{s: s, token: t, secret: ck.Value, ctx: ctx}, nil
}

// localPath keeps a redirect target on the console.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/console/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return "/console/"
	}
	return p
}

// page wraps a page that needs a signed-in operator; without one it
// redirects to the sign-in page.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.authenticate(w, r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if s == nil {
			secure(w.Header())
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// action wraps a form post: same origin, a signed-in operator and the
// session's CSRF token, in that order.
func (c *Console) action(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			c.logger().Warn("console: cross-site form refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"),
				"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "request_id", w.Header().Get("X-Request-Id"))
			c.message(w, r, http.StatusForbidden, "forbidden_title", "forbidden_cross_site")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			c.message(w, r, http.StatusBadRequest, "error_title", "bad_form")
			return
		}
		s, err := c.authenticate(w, r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if s == nil {
			secure(w.Header())
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(csrfToken(s.secret))) != 1 {
			c.logger().Warn("console: form without a valid CSRF token", "path", r.URL.Path, "request_id", w.Header().Get("X-Request-Id"))
			c.message(w, r, http.StatusForbidden, "forbidden_title", "forbidden_csrf")
			return
		}
		h(w, r, s)
	}
}

// view is what the layout renders around a page.
type view struct {
	L, Other  lang
	Title     string
	Nav       string
	Operator  string
	CSRF      string
	Flash     string
	Error     string
	SwitchURL string
	CSSURL    string
	Now       time.Time
	Data      any
}

// render executes a page into a buffer first, so that a failure is a
// clean 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, title, nav string, data any) {
	l := pickLang(r)
	v := view{L: l, Other: l.other(), Title: l.T(title), Nav: nav, CSSURL: assetURL("console.css"), Now: c.App.Now(),
		SwitchURL: "/console/lang?to=" + string(l.other()) + "&back=" + url.QueryEscape(localPath(r.URL.RequestURI())), Data: data}
	if s != nil {
		v.Operator, v.CSRF = s.token.Name, csrfToken(s.secret)
	}
	q := r.URL.Query()
	if k := q.Get("ok"); k != "" && okKeys[k] {
		v.Flash = l.T("ok_" + k)
	}
	if code := q.Get("e"); code != "" {
		v.Error = errorText(l, xaalis.Code(code), q.Get("f"))
	}
	if d, ok := data.(interface{ pageError() string }); ok && d.pageError() != "" {
		v.Error = d.pageError()
	}
	t := pages[name]
	if t == nil {
		c.logger().Error("console: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.logger().Error("console: render", "page", name, "error", err, "request_id", w.Header().Get("X-Request-Id"))
		secure(w.Header())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	secure(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Vary", "Accept-Language, Cookie")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// messageData is a page that says one thing.
type messageData struct {
	Body string
	Back bool
}

// message renders a page of one message (403, 404, 500 ...).
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, body string) {
	l := pickLang(r)
	c.render(w, r, status, "message", nil, title, "", messageData{Body: l.T(body)})
}

// fail answers an unexpected error: not_found becomes the 404 page, the
// rest a logged 500 that names the request.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch xaalis.ErrorCode(err) {
	case xaalis.ENotFound, xaalis.ETransactionNotFound:
		c.message(w, r, http.StatusNotFound, "not_found_title", "not_found_body")
		return
	}
	c.logger().Error("console error", "path", r.URL.Path, "method", r.Method, "error", err.Error(),
		"request_id", w.Header().Get("X-Request-Id"))
	c.message(w, r, http.StatusInternalServerError, "error_title", "error_body")
}

// done answers a successful action: 303 to where it shows, with a message.
func done(w http.ResponseWriter, r *http.Request, to, ok string) {
	secure(w.Header())
	http.Redirect(w, r, withQuery(to, "ok="+ok), http.StatusSeeOther)
}

// withQuery adds query to the address to, before its fragment: after it
// (/console/#ledger?ok=…) the browser never sends it, and the page showed
// no message.
func withQuery(to, query string) string {
	frag := ""
	if i := strings.IndexByte(to, '#'); i >= 0 {
		to, frag = to[:i], to[i:]
	}
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	return to + sep + query + frag
}

// refused answers an action the App refused: 303 back with the error's
// code (and field), or the error page for an unexpected error.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, to string, err error) {
	var e *xaalis.Error
	if !errors.As(err, &e) || e.Code == xaalis.EInternal || e.Code == xaalis.ENotFound {
		c.fail(w, r, err)
		return
	}
	q := url.Values{"e": {string(e.Code)}}
	for f := range e.Fields {
		q.Set("f", f)
		break
	}
	secure(w.Header())
	http.Redirect(w, r, withQuery(to, q.Encode()), http.StatusSeeOther)
}

// Sign-in.

type loginData struct {
	Next  string
	Error string
	// CSRF is the sign-in form's token, matched against a cookie.
	CSRF string
}

func (d loginData) pageError() string { return d.Error }

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	s, err := c.authenticate(w, r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	next := localPath(r.URL.Query().Get("next"))
	if s != nil {
		secure(w.Header())
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.showLogin(w, r, http.StatusOK, next, "")
}

// showLogin renders the sign-in form with a fresh login CSRF token, kept
// in a cookie the post must match.
func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		c.fail(w, r, err)
		return
	}
	tok := hex.EncodeToString(b[:])
	c.setCookie(w, r, loginCookie, tok, 3600)
	c.render(w, r, status, "login", nil, "login_title", "", loginData{Next: next, Error: msg, CSRF: tok})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	l := pickLang(r)
	if !sameOrigin(r) {
		c.message(w, r, http.StatusForbidden, "forbidden_title", "forbidden_cross_site")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.message(w, r, http.StatusBadRequest, "error_title", "bad_form")
		return
	}
	next := localPath(r.PostFormValue("next"))
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		c.showLogin(w, r, http.StatusForbidden, next, l.T("forbidden_csrf"))
		return
	}
	// The sign-in is audited with the request's id and address.
	ctx := xaalis.WithActor(r.Context(), xaalis.Actor{RequestID: w.Header().Get("X-Request-Id"), ClientIP: c.clientIP(r)})
	_, t, secret, err := c.App.SignIn(ctx, r.PostFormValue("token"), c.clientIP(r))
	var e *xaalis.Error
	switch {
	case errors.As(err, &e) && e.Code == xaalis.ETooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
		c.logger().Warn("console: sign-in refused, too many failures", "client_ip", c.clientIP(r))
		c.showLogin(w, r, http.StatusTooManyRequests, next, l.F("login_throttled", int((e.RetryAfter+time.Minute-1)/time.Minute)))
		return
	case errors.As(err, &e) && e.Code == xaalis.EUnauthorized:
		c.logger().Warn("console: sign-in refused", "client_ip", c.clientIP(r))
		c.showLogin(w, r, http.StatusUnauthorized, next, l.T("login_refused"))
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	c.logger().Info("console: signed in", "operator", t.Name, "operator_token_id", t.ID, "client_ip", c.clientIP(r))
	c.setCookie(w, r, loginCookie, "", -1)
	c.setCookie(w, r, sessionCookie, secret, 0)
	secure(w.Header())
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := c.App.SignOut(s.ctx, s.s); err != nil {
		c.fail(w, r, err)
		return
	}
	c.setCookie(w, r, sessionCookie, "", -1)
	done(w, r, "/console/login", "signed_out")
}

// switchLang keeps the language in a cookie and goes back.
func (c *Console) switchLang(w http.ResponseWriter, r *http.Request) {
	l, ok := parseLang(r.URL.Query().Get("to"))
	if ok {
		c.setCookie(w, r, langCookie, string(l), 365*24*3600)
	}
	secure(w.Header())
	http.Redirect(w, r, localPath(r.URL.Query().Get("back")), http.StatusSeeOther)
}

// Assets.

var assetTypes = map[string]string{"console.css": "text/css; charset=utf-8"}

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

func assetURL(name string) string { return "/console/assets/" + name + "?v=" + assetVersion }

func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ct, ok := assetTypes[name]
	b, err := assetFS.ReadFile("assets/" + name)
	if !ok || err != nil {
		c.message(w, r, http.StatusNotFound, "not_found_title", "not_found_body")
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

// pageOf reads ?page=, 1 when absent or wrong.
func pageOf(r *http.Request) xaalis.PageRequest {
	p, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || p < 1 || p > xaalis.MaxPage {
		p = 1
	}
	return xaalis.PageRequest{Page: p, PerPage: perPage}
}

// validID bounds what is looked up.
func validID(id string) bool { return id != "" && len(id) <= 64 }
