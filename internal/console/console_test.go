package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestSignIn: the sign-in form, a refused token, the session cookie's
// attributes, the headers of every page, idle expiry and a revoked token.
func TestSignIn(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		e := newEnv(t, bk.Open(t))
		b := e.browser()

		// Not signed in: to the sign-in page, then back where asked.
		p := b.get("/console/merchants?q=x")
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/login?next="+url.QueryEscape("/console/merchants?q=x") {
			t.Fatalf("unsigned: %d %q", p.status, p.header.Get("Location"))
		}
		if p := b.get("/"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/" {
			t.Fatalf("GET /: %d %q", p.status, p.header.Get("Location"))
		}
		lp := b.get("/console/login")
		h := lp.header
		if lp.status != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") ||
			strings.Contains(h.Get("Content-Security-Policy"), "script-src") || h.Get("X-Frame-Options") != "DENY" ||
			h.Get("Cache-Control") != "no-store" {
			t.Fatalf("login page: %d %v", lp.status, h)
		}
		lacks(t, "login page", lp.body, "<script", "!missing(")

		// A wrong token is refused, with the form again.
		bad := b.signIn("xop_wrong")
		if bad.status != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", bad.status)
		}
		contains(t, "refused", bad.body, `id="error"`, "Jeton refusé")
		if c := cookie(b, e, "xaalis_console"); c != "" {
			t.Fatalf("a refused sign-in got a session: %q", c)
		}
		// A form without the sign-in token is refused.
		if p := b.post("/console/login", url.Values{"token": {e.token}}); p.status != http.StatusForbidden {
			t.Fatalf("sign-in without its CSRF token: %d", p.status)
		}

		// The right token: a session cookie, HttpOnly, SameSite=Strict,
		// scoped to the console, not Secure on plain HTTP.
		ok := b.signIn(e.token)
		if ok.status != http.StatusSeeOther || ok.header.Get("Location") != "/console/" {
			t.Fatalf("sign in: %d %q", ok.status, ok.header.Get("Location"))
		}
		set := setCookie(ok.header, "xaalis_console")
		if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode || set.Path != "/console/" || set.Secure || len(set.Value) < 40 {
			t.Fatalf("session cookie: %+v", set)
		}
		home := b.get("/console/")
		if home.status != 200 {
			t.Fatalf("overview: %d\n%s", home.status, home.body)
		}
		contains(t, "overview", home.body, `>awa.ops</span>`, "Paiements du jour", `id="run-ledger-check"`)
		lacks(t, "overview", home.body, "!missing(", "<script", e.token)
		// The sign-in is audited under the token, with the request's id
		// and address, as the admin API's actions are.
		if a := e.audit(); len(a) == 0 || a[0].Action != "console.sign_in" || a[0].TokenID != e.tokenID || a[0].Actor != "awa.ops" ||
			a[0].RequestID == "" || a[0].ClientIP != "127.0.0.1" {
			t.Fatalf("audit of the sign-in: %+v", a[0])
		}

		// 12 hours without a request end the session.
		e.clock.Advance(xaalis.SessionIdle - time.Minute)
		if p := b.get("/console/"); p.status != 200 {
			t.Fatalf("within 12 h: %d", p.status)
		}
		e.clock.Advance(xaalis.SessionIdle - time.Minute)
		if p := b.get("/console/"); p.status != 200 {
			t.Fatalf("active sessions live on: %d", p.status)
		}
		e.clock.Advance(xaalis.SessionIdle)
		if p := b.get("/console/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/login") {
			t.Fatalf("after 12 h idle: %d %q", p.status, p.header.Get("Location"))
		}

		// A revoked token ends its sessions at once.
		b.mustSignIn()
		if p := b.get("/console/"); p.status != 200 {
			t.Fatalf("signed in again: %d", p.status)
		}
		if _, err := e.app.RevokeOperatorToken(context.Background(), e.tokenID); err != nil {
			t.Fatal(err)
		}
		if p := b.get("/console/"); p.status != http.StatusSeeOther {
			t.Fatalf("revoked token's session: %d", p.status)
		}
	})
}

// TestSignInTLS: over TLS the session cookie is Secure.
func TestSignInTLS(t *testing.T) {
	e := newEnv(t, testutil.Backends[0].Open(t), withTLS)
	b := e.browser()
	ok := b.signIn(e.token)
	if set := setCookie(ok.header, "xaalis_console"); ok.status != http.StatusSeeOther || set == nil || !set.Secure {
		t.Fatalf("over TLS: %d %+v", ok.status, set)
	}
}

// TestSignInThrottle: failed sign-ins from one address are counted in the
// database; past the limit even the right token is refused until the
// window ends.
func TestSignInThrottle(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		e := newEnv(t, bk.Open(t))
		// Freeze the window's start so that the test cannot cross it.
		e.clock.t = e.clock.Now().Truncate(xaalis.SignInWindow).Add(time.Minute)
		b := e.browser()
		for i := range xaalis.SignInFailures {
			if p := b.signIn(fmt.Sprintf("xop_guess%d", i)); p.status != http.StatusUnauthorized {
				t.Fatalf("guess %d: %d", i, p.status)
			}
		}
		p := b.signIn(e.token)
		if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
			t.Fatalf("past the limit: %d %v", p.status, p.header)
		}
		contains(t, "throttled", p.body, "Trop d")
		e.clock.Advance(xaalis.SignInWindow)
		b.mustSignIn()
	})
}

// TestCrossSite: a form posted from another origin, or without the
// session's CSRF token, changes nothing.
func TestCrossSite(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		e := newEnv(t, bk.Open(t))
		e.pay("order-1", 20000)
		pr := e.payoutRequest(5000)
		b := e.browser()
		b.mustSignIn()
		path := "/console/payout-requests/" + pr["id"].(string) + "/approve"
		csrf := b.get(path).csrf(t)

		b.origin = "http://evil.example"
		if p := b.post(path, url.Values{"csrf": {csrf}}); p.status != http.StatusForbidden {
			t.Fatalf("cross-origin post: %d", p.status)
		}
		b.origin = ""
		req, _ := http.NewRequest("POST", e.admin.URL+path, strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if p := b.do(req); p.status != http.StatusForbidden {
			t.Fatalf("Sec-Fetch-Site cross-site: %d", p.status)
		}
		b.origin = e.admin.URL
		if p := b.post(path, url.Values{"csrf": {"forged"}}); p.status != http.StatusForbidden {
			t.Fatalf("forged CSRF token: %d", p.status)
		}
		if p := b.post(path, url.Values{}); p.status != http.StatusForbidden {
			t.Fatalf("no CSRF token: %d", p.status)
		}
		// Another operator's session's token is no good either.
		other := e.browser()
		other.mustSignIn()
		if p := other.post(path, url.Values{"csrf": {csrf}}); p.status != http.StatusForbidden {
			t.Fatalf("another session's CSRF token: %d", p.status)
		}
		got, err := e.app.OperatorPayoutRequest(context.Background(), pr["id"].(string))
		if err != nil || got.Request.Status != xaalis.PRSubmitted {
			t.Fatalf("after refused posts: %+v %v", got.Request, err)
		}
		for _, a := range e.audit() {
			if strings.HasPrefix(a.Action, "payout_request.") {
				t.Fatalf("audited: %+v", a)
			}
		}
		// The real form works.
		if p := b.post(path, url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
			t.Fatalf("same-origin post: %d\n%s", p.status, p.body)
		}
	})
}

// TestConsoleActions walks the operator's actions through the console:
// each one calls the App command and is audited under the signed-in
// token; every page renders in both languages.
func TestConsoleActions(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		e := newEnv(t, bk.Open(t))
		ctx := context.Background()
		pay := e.pay("order-42", 30000)
		payB, err := e.app.Store.Transaction(ctx, "", pay["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		// A payment on channel_b, whose provider has no automatic refunds.
		st, out := e.apiCall("POST", "/v1/payments", e.keys.SecretTest, `{"merchant_ref":"order-b","amount":3000,"provider":"channel_b",
			"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
		pb := dataOf(out)
		if st != http.StatusCreated || pb["status"] != "success" {
			t.Fatalf("channel_b payment: %d %v", st, out)
		}
		// A test payout that never settles (its recipient's number ends
		// 0004), settled by hand below.
		st, out = e.apiCall("POST", "/v1/payouts", e.keys.SecretTest, `{"merchant_ref":"po-stuck","amount":1000,"currency":"XOF","provider":"channel_a",
			"recipient":{"phone":"`+provider.TestPhoneNoPayer+`","name":"Moussa"}}`)
		po := dataOf(out)
		if st != http.StatusCreated || po["status"] != "pending" {
			t.Fatalf("the stuck payout: %d %v", st, out)
		}
		pr := e.payoutRequest(5000)
		prID := pr["id"].(string)
		b := e.browser()
		b.mustSignIn()

		// Payout request: confirmation first, then the move and its event.
		conf := b.get("/console/payout-requests/" + prID + "/reject")
		contains(t, "reject confirmation", conf.body, `name="reason"`, "required", pr["reference"].(string))
		if p := b.post("/console/payout-requests/"+prID+"/reject", url.Values{"csrf": {conf.csrf(t)}, "reason": {" "}}); p.status != http.StatusSeeOther ||
			!strings.Contains(p.header.Get("Location"), "e=validation_error") {
			t.Fatalf("reject without a reason: %d %q", p.status, p.header.Get("Location"))
		}
		p := b.post("/console/payout-requests/"+prID+"/reject", url.Values{"csrf": {conf.csrf(t)}, "reason": {"IBAN mismatch"}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/payout-requests/"+prID+"?ok=pr_reject" {
			t.Fatalf("reject: %d %q", p.status, p.header.Get("Location"))
		}
		detail := b.get(p.header.Get("Location"))
		contains(t, "rejected request", detail.body, "payout_request.rejected", "IBAN mismatch", `id="flash"`)
		if a := e.audit()[0]; a.Action != "payout_request.reject" || a.TokenID != e.tokenID || a.Actor != "awa.ops" || a.RequestID == "" ||
			a.ClientIP != "127.0.0.1" {
			t.Fatalf("audit: %+v", a)
		}

		// KYC and the whitelist, through UpdateMerchant.
		mp := "/console/merchants/" + e.merchant.ID
		if p := b.action(mp, mp+"/kyc", url.Values{"kyc": {"approved"}}); p.status != http.StatusSeeOther {
			t.Fatalf("kyc: %d", p.status)
		}
		if p := b.action(mp, mp+"/providers", url.Values{"provider": {"channel_a", "channel_b"}}); p.status != http.StatusSeeOther {
			t.Fatalf("providers: %d", p.status)
		}
		if p := b.action(mp, mp+"/allow-ips", url.Values{"allow_ips": {"not an ip"}}); !strings.Contains(p.header.Get("Location"), "e=validation_error&f=allow_ips") {
			t.Fatalf("bad allowlist: %d %q", p.status, p.header.Get("Location"))
		}
		if p := b.action(mp, mp+"/allow-ips", url.Values{"allow_ips": {"203.0.113.7\n198.51.100.0/24"}}); p.status != http.StatusSeeOther {
			t.Fatalf("allowlist: %d", p.status)
		}
		m, _ := e.app.Store.Merchant(ctx, e.merchant.ID)
		if m.KYC != xaalis.KYCApproved || len(m.AllowedProviders) != 2 || len(m.AllowIPs) != 2 || m.AllowIPs[0].String() != "203.0.113.7/32" {
			t.Fatalf("merchant: %+v", m)
		}
		page := b.get(mp)
		contains(t, "merchant page", page.body, "approuvé", "channel_a, channel_b", "203.0.113.7/32", "sk_test_", "Comptable")
		lacks(t, "merchant page", page.body, e.keys.SecretTest, e.keys.SecretLive, "!missing(")

		// Disputes: open by merchant_ref, decide after confirmation.
		if p := b.action("/console/disputes", "/console/disputes", url.Values{"payment": {"order-42"}, "amount": {"10000"}, "reason": {"not received"}}); p.status != http.StatusSeeOther ||
			p.header.Get("Location") != "/console/disputes?ok=dispute_opened" {
			t.Fatalf("open dispute: %d %q", p.status, p.header.Get("Location"))
		}
		ds, _, err := e.app.OpenDisputes(ctx, xaalis.PageRequest{Page: 1, PerPage: 10})
		if err != nil || len(ds) != 1 || ds[0].TransactionID != payB.ID || ds[0].Amount.Minor != 1_000_000 {
			t.Fatalf("open disputes: %+v %v", ds, err)
		}
		list := b.get("/console/disputes")
		contains(t, "disputes", list.body, ds[0].Reference, "dans ")
		dp := "/console/disputes/" + ds[0].ID + "/decide"
		if p := b.action(dp+"?outcome=won", dp, url.Values{"outcome": {"won"}}); p.status != http.StatusSeeOther {
			t.Fatalf("decide: %d", p.status)
		}
		if d, _ := e.app.OperatorDispute(ctx, ds[0].ID); d.Status != xaalis.DisputeWon {
			t.Fatalf("dispute: %s", d.Status)
		}

		// Transactions: search by merchant_ref, the timeline, redeliver.
		found := b.get("/console/transactions?q=order-42")
		contains(t, "search", found.body, pay["reference"].(string))
		// By the payer's phone, in any form; the number stays out of the logs.
		byPhone := b.get("/console/transactions?q=" + url.QueryEscape("77 000 00 01"))
		contains(t, "search by phone", byPhone.body, pay["reference"].(string))
		lacks(t, "logs", e.logs.String(), "770000001", "77 000 00 01", "77+000")
		tx := b.get("/console/transactions/" + payB.ID)
		contains(t, "transaction", tx.body, "payment.success", "dispute.opened", "dispute.won", "payment.success", "Chronologie",
			"simulator", "test:merchant:"+e.merchant.ID+":available")
		lacks(t, "transaction", tx.body, "!missing(")
		evs, _ := e.app.Store.Events(ctx, payB.ID)
		if p := b.action("/console/transactions/"+payB.ID, "/console/events/"+evs[0].ID+"/redeliver", url.Values{"transaction": {payB.ID}}); p.status != http.StatusSeeOther ||
			!strings.HasPrefix(p.header.Get("Location"), "/console/transactions/"+payB.ID+"?ok=redelivered") {
			t.Fatalf("redeliver: %d %q", p.status, p.header.Get("Location"))
		}
		if a := e.audit()[0]; a.Action != "event.redeliver" || a.ObjectID != evs[0].ID || a.TokenID != e.tokenID {
			t.Fatalf("audit of the redelivery: %+v", a)
		}

		// Mark refunded by hand: offered only where the provider cannot
		// refund (channel_b), after confirmation.
		lacks(t, "channel_a payment", tx.body, `id="mark-refunded"`)
		tp := "/console/transactions/" + pb["id"].(string)
		contains(t, "channel_b payment", b.get(tp).body, `id="mark-refunded"`)
		if p := b.action(tp+"/mark-refunded", tp+"/mark-refunded", url.Values{"note": {"payout TXN-ABC paid the payer back"}}); p.status != http.StatusSeeOther ||
			p.header.Get("Location") != tp+"?ok=marked_refunded" {
			t.Fatalf("mark refunded: %d %q", p.status, p.header.Get("Location"))
		}
		if got, _ := e.app.Store.Transaction(ctx, "", pb["id"].(string)); got.Status != xaalis.StatusRefunded {
			t.Fatalf("marked payment: %s", got.Status)
		}
		if a := e.audit()[0]; a.Action != "payment.mark_refunded" || a.TokenID != e.tokenID {
			t.Fatalf("audit of mark refunded: %+v", a)
		}
		contains(t, "refunded payment", b.get(tp).body, "payment.refunded")

		// Settle a payout by hand (po, made above): the outcome and a note
		// required.
		tpo := "/console/transactions/" + po["id"].(string)
		contains(t, "open payout", b.get(tpo).body, `id="settle-failed"`, `id="settle-success"`)
		lacks(t, "channel_b payment", b.get(tp).body, `id="settle-failed"`)
		contains(t, "settle confirmation", b.get(tpo+"/settle?outcome=failed").body, `name="outcome" value="failed"`, "required")
		if p := b.action(tpo+"/settle?outcome=failed", tpo+"/settle", url.Values{"outcome": {"failed"}, "note": {""}}); p.status != http.StatusSeeOther ||
			!strings.Contains(p.header.Get("Location"), "e=") {
			t.Fatalf("settle without a note: %d %q", p.status, p.header.Get("Location"))
		}
		if p := b.action(tpo+"/settle?outcome=failed", tpo+"/settle", url.Values{"outcome": {"failed"}, "note": {"channel_a support: never paid"}}); p.status != http.StatusSeeOther ||
			p.header.Get("Location") != tpo+"?ok=settled" {
			t.Fatalf("settle: %d %q", p.status, p.header.Get("Location"))
		}
		if got, _ := e.app.Store.Transaction(ctx, "", po["id"].(string)); got.Status != xaalis.StatusFailed || got.FailureReason != xaalis.SettledByOperator {
			t.Fatalf("settled payout: %s %s", got.Status, got.FailureReason)
		}
		if a := e.audit()[0]; a.Action != "payout.settle_by_hand" || a.TokenID != e.tokenID || a.Note != "channel_a support: never paid" {
			t.Fatalf("audit of the settlement: %+v", a)
		}
		lacks(t, "settled payout", b.get(tpo).body, `id="settle-failed"`)

		// Revoke a key: confirmation, then the API refuses it.
		keys, _ := e.app.Store.Keys(ctx, e.merchant.ID)
		var live *xaalis.Key
		for _, k := range keys {
			if k.Mode == xaalis.ModeLive && k.Type == xaalis.KeySecret {
				live = k
			}
		}
		kp := "/console/keys/" + live.ID + "/revoke"
		contains(t, "revoke confirmation", b.get(kp).body, live.Prefix)
		if p := b.action(kp, kp, nil); p.status != http.StatusSeeOther {
			t.Fatalf("revoke: %d", p.status)
		}
		if st, out := e.apiCall("GET", "/v1/balance", e.keys.SecretLive, ""); st != http.StatusUnauthorized {
			t.Fatalf("revoked key: %d %v", st, out)
		}

		// The ledger check runs and is recorded.
		// The message's query comes before the fragment, where the browser
		// sends it.
		if p := b.action("/console/", "/console/ledger-check", nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/?ok=ledger_clean#ledger" {
			t.Fatalf("ledger check: %d %q", p.status, p.header.Get("Location"))
		}
		contains(t, "overview", b.get("/console/").body, `id="ledger-problems"><span class="state good">0<`, "awa.ops")

		// The audit log shows every action, in both languages.
		for _, lang := range []string{"fr", "en"} {
			b.get("/console/lang?to=" + lang + "&back=/console/audit")
			au := b.get("/console/audit")
			contains(t, "audit "+lang, au.body, "payout_request.reject", "merchant.update", "dispute.open", "dispute.decide",
				"event.redeliver", "key.revoke", "ledger.check", "console.sign_in")
			for _, path := range []string{"/console/", "/console/merchants", "/console/merchants?q=thi", mp, "/console/payout-requests",
				"/console/payout-requests/" + prID, "/console/disputes", "/console/transactions", "/console/transactions?q=nothing",
				"/console/transactions/" + payB.ID, "/console/audit?page=2"} {
				p := b.get(path)
				if p.status != 200 {
					t.Fatalf("%s (%s): %d\n%s", path, lang, p.status, p.body)
				}
				lacks(t, path+" "+lang, p.body, "!missing(", "<script")
			}
		}
		// A refused move comes back with its reason.
		p = b.action("/console/payout-requests/"+prID, "/console/payout-requests/"+prID+"/approve", nil)
		back := b.get(p.header.Get("Location"))
		contains(t, "impossible move", back.body, `id="error"`, "not possible")
	})
}

func setCookie(h http.Header, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func cookie(b *browser, e *env, name string) string {
	u, _ := url.Parse(e.admin.URL + "/console/")
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// TestOverviewAmounts: the overview's table of today's payments gives
// each status's count and amount, not the successful ones' alone.
func TestOverviewAmounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk testutil.Backend) {
		e := newEnv(t, bk.Open(t))
		e.pay("ov-ok", 30000)
		st, out := e.apiCall("POST", "/v1/payments", e.keys.SecretTest, `{"merchant_ref":"ov-failed","amount":2000,"provider":"channel_a",
			"payer":{"phone":"`+provider.TestPhoneFailed+`"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
		if d := dataOf(out); st != http.StatusCreated || d["status"] != "failed" {
			t.Fatalf("failed payment: %d %v", st, out)
		}
		b := e.browser()
		b.mustSignIn()
		home := b.get("/console/").body
		for _, cell := range []string{`data-status="success">1<br><small>`, `data-status="failed">1<br><small>`} {
			contains(t, "overview", home, cell)
		}
		// The failed cell names 2 000 XOF (whatever the locale's grouping).
		_, failed, _ := strings.Cut(home, `data-status="failed">`)
		failed, _, _ = strings.Cut(failed, "</td>")
		if digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, failed); digits != "12000" || !strings.Contains(failed, "XOF") {
			t.Fatalf("failed cell %q", failed)
		}
		lacks(t, "overview", home, `data-status="cancelled">0<br>`)
		// One column a status, headed in the page's language.
		contains(t, "overview", home, `<th class="num">initié</th><th class="num">en attente</th>`)
	})
}
