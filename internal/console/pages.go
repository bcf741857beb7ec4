package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// The console's pages and actions. Every action calls the App command the
// admin API and the CLI call, with s.ctx carrying the operator.

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	o, err := c.App.Overview(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", s, "nav_overview", "overview", o)
}

func (c *Console) ledgerCheck(w http.ResponseWriter, r *http.Request, s *session) {
	run, _, err := c.App.RunLedgerCheck(s.ctx, false)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ok := "ledger_clean"
	if run.Problems > 0 {
		ok = "ledger_problems"
	}
	done(w, r, "/console/#ledger", ok)
}

// merchantsData is the merchants page.
type merchantsData struct {
	Query     string
	Merchants []*xaalis.Merchant
	Page      xaalis.Pagination
	PrevURL   string
	NextURL   string
}

// pager fills the links of a list's pages.
func pager(r *http.Request, pg xaalis.Pagination) (prev, next string) {
	q := r.URL.Query()
	link := func(p int) string {
		q.Set("page", strconv.Itoa(p))
		q.Del("ok")
		q.Del("e")
		q.Del("f")
		return r.URL.Path + "?" + q.Encode()
	}
	if pg.CurrentPage > 1 {
		prev = link(pg.CurrentPage - 1)
	}
	if pg.CurrentPage < pg.LastPage {
		next = link(pg.CurrentPage + 1)
	}
	return prev, next
}

func (c *Console) merchants(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 200 {
		q = q[:200]
	}
	list, pg, err := c.App.Merchants(r.Context(), xaalis.MerchantFilter{Query: q}, pageOf(r))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := merchantsData{Query: q, Merchants: list, Page: pg}
	d.PrevURL, d.NextURL = pager(r, pg)
	c.render(w, r, http.StatusOK, "merchants", s, "nav_merchants", "merchants", d)
}

// merchantData is one merchant's page.
type merchantData struct {
	*xaalis.MerchantView
	Providers []providerChoice
	Statuses  []xaalis.MerchantStatus
	AllowIPs  string
	Modes     []xaalis.Mode
}

type providerChoice struct {
	ID      string
	Checked bool
}

func (c *Console) merchant(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !validID(id) {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	v, err := c.App.MerchantView(r.Context(), id, 10)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := merchantData{MerchantView: v, Statuses: []xaalis.MerchantStatus{xaalis.MerchantActive, xaalis.MerchantPending,
		xaalis.MerchantSuspended, xaalis.MerchantClosed}, Modes: []xaalis.Mode{xaalis.ModeLive, xaalis.ModeTest}}
	for _, p := range xaalis.Providers {
		d.Providers = append(d.Providers, providerChoice{ID: p, Checked: slices.Contains(v.Merchant.AllowedProviders, p)})
	}
	var ips []string
	for _, p := range v.Merchant.AllowIPs {
		ips = append(ips, p.String())
	}
	d.AllowIPs = strings.Join(ips, "\n")
	c.render(w, r, http.StatusOK, "merchant", s, "nav_merchants", "merchants", d)
}

// merchantUpdate changes one thing of a merchant through UpdateMerchant:
// kyc (approve or refuse), status, providers (the whitelist; none ticked
// allows all), allow-ips (one CIDR or address a line; empty allows any).
func (c *Console) merchantUpdate(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := "/console/merchants/" + url.PathEscape(id)
	var u xaalis.MerchantUpdate
	var ok string
	switch r.PathValue("field") {
	case "kyc":
		// An unknown value is refused by UpdateMerchant (validation_error).
		k := xaalis.KYCStatus(r.PostFormValue("kyc"))
		u.KYC, ok = &k, "kyc_"+string(k)
	case "status":
		st := xaalis.MerchantStatus(r.PostFormValue("status"))
		u.Status, ok = &st, "merchant_updated"
	case "providers":
		list := []string{}
		for _, p := range r.PostForm["provider"] {
			if !slices.Contains(list, p) {
				list = append(list, p)
			}
		}
		u.AllowedProviders, ok = &list, "merchant_updated"
	case "allow-ips":
		var lines []string
		for _, f := range strings.FieldsFunc(r.PostFormValue("allow_ips"), func(r rune) bool { return r == '\n' || r == ',' || r == ' ' || r == '\r' }) {
			lines = append(lines, f)
		}
		ps, err := parseIPs(lines)
		if err != nil {
			c.refused(w, r, back, &xaalis.Error{Code: xaalis.EValidation, Fields: xaalis.ValidationErrors{"allow_ips": {err.Error()}}})
			return
		}
		u.AllowIPs, ok = &ps, "merchant_updated"
	default:
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	if _, err := c.App.UpdateMerchant(s.ctx, id, u); err != nil {
		c.refused(w, r, back, err)
		return
	}
	done(w, r, back, ok)
}

// parseIPs reads CIDRs, and single addresses as /32 or /128.
func parseIPs(list []string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		ps, err := xaalis.ParsePrefixes([]string{s})
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// confirmData is a confirmation page: what will happen, and the form that
// does it.
type confirmData struct {
	Heading string
	Lines   [][2]string
	Action  string
	Hidden  map[string]string
	// Field is a text field to fill ("" for none): reason or note.
	Field         string
	FieldLabel    string
	FieldRequired bool
	Button        string
	Danger        bool
	Cancel        string
}

func (c *Console) keyRevokeConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	k, err := c.App.Store.Key(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	l := pickLang(r)
	m, err := c.App.Store.Merchant(r.Context(), k.MerchantID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "confirm", s, "confirm_title", "merchants", confirmData{
		Heading: l.T("revoke_key_q"),
		Lines: [][2]string{{l.T("merchant"), m.Name}, {l.T("key"), keyLabel(k)}, {l.T("mode"), string(k.Mode)},
			{l.T("type"), string(k.Type)}},
		Action: "/console/keys/" + url.PathEscape(k.ID) + "/revoke", Button: l.T("revoke"), Danger: true,
		Cancel: "/console/merchants/" + url.PathEscape(k.MerchantID),
	})
}

func (c *Console) keyRevoke(w http.ResponseWriter, r *http.Request, s *session) {
	k, err := c.App.RevokeKey(s.ctx, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	done(w, r, "/console/merchants/"+url.PathEscape(k.MerchantID), "key_revoked")
}

// payoutQueueData is the queue of payout requests.
type payoutQueueData struct {
	Requests  []*xaalis.PayoutRequest
	Merchants map[string]*xaalis.Merchant
	Page      xaalis.Pagination
	PrevURL   string
	NextURL   string
}

// merchantsOf reads the merchants of a list, once each.
func (c *Console) merchantsOf(r *http.Request, ids []string) (map[string]*xaalis.Merchant, error) {
	out := map[string]*xaalis.Merchant{}
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		m, err := c.App.Store.Merchant(r.Context(), id)
		if err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, nil
}

func (c *Console) payoutQueue(w http.ResponseWriter, r *http.Request, s *session) {
	list, pg, err := c.App.PayoutRequestQueue(r.Context(), pageOf(r))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := payoutQueueData{Requests: list, Page: pg}
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.MerchantID
	}
	if d.Merchants, err = c.merchantsOf(r, ids); err != nil {
		c.fail(w, r, err)
		return
	}
	d.PrevURL, d.NextURL = pager(r, pg)
	c.render(w, r, http.StatusOK, "payouts", s, "nav_payouts", "payouts", d)
}

func (c *Console) payoutRequest(w http.ResponseWriter, r *http.Request, s *session) {
	v, err := c.App.OperatorPayoutRequest(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "payout", s, "payout_request", "payouts", v)
}

// payoutActions are the operator's moves, in the order they are offered.
var payoutActions = map[xaalis.PayoutRequestAction]bool{xaalis.ActionApprove: true, xaalis.ActionReject: true,
	xaalis.ActionComplete: true, xaalis.ActionFail: true}

func (c *Console) payoutConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	act := xaalis.PayoutRequestAction(r.PathValue("action"))
	if !payoutActions[act] {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	v, err := c.App.OperatorPayoutRequest(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	l := pickLang(r)
	pr := v.Request
	d := confirmData{
		Heading: l.T("pr_" + string(act) + "_q"),
		Lines: [][2]string{{l.T("merchant"), v.Merchant.Name}, {l.T("reference"), pr.Reference},
			{l.T("amount"), formatAmount(pr.Amount, l)}, {l.T("fee"), formatAmount(pr.Fee, l)}, {l.T("net"), formatAmount(pr.Net, l)},
			{l.T("destination"), destination(pr)}, {l.T("status"), l.T("prs_" + string(pr.Status))}},
		Action: "/console/payout-requests/" + url.PathEscape(pr.ID) + "/" + string(act),
		Button: l.T("pr_" + string(act)), Danger: act == xaalis.ActionReject || act == xaalis.ActionFail,
		Cancel: "/console/payout-requests/" + url.PathEscape(pr.ID),
	}
	switch act {
	case xaalis.ActionReject:
		d.Field, d.FieldLabel, d.FieldRequired = "reason", l.T("reason_required"), true
	case xaalis.ActionFail:
		d.Field, d.FieldLabel = "reason", l.T("reason")
	}
	c.render(w, r, http.StatusOK, "confirm", s, "confirm_title", "payouts", d)
}

func (c *Console) payoutMove(w http.ResponseWriter, r *http.Request, s *session) {
	act := xaalis.PayoutRequestAction(r.PathValue("action"))
	id := r.PathValue("id")
	if !payoutActions[act] {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	if _, err := c.App.MovePayoutRequest(s.ctx, id, act, r.PostFormValue("reason")); err != nil {
		back := "/console/payout-requests/" + url.PathEscape(id)
		if xaalis.ErrorCode(err) == xaalis.EValidation && act == xaalis.ActionReject {
			back += "/reject"
		}
		c.refused(w, r, back, err)
		return
	}
	done(w, r, "/console/payout-requests/"+url.PathEscape(id), "pr_"+string(act))
}

// disputesData is the open disputes and the form to open one.
type disputesData struct {
	Disputes  []*xaalis.Dispute
	Merchants map[string]*xaalis.Merchant
	Page      xaalis.Pagination
	PrevURL   string
	NextURL   string
	// The open form, filled again after a refusal.
	Payment, Amount, Reason string
}

func (c *Console) disputes(w http.ResponseWriter, r *http.Request, s *session) {
	list, pg, err := c.App.OpenDisputes(r.Context(), pageOf(r))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := disputesData{Disputes: list, Page: pg, Payment: r.URL.Query().Get("payment")}
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.MerchantID
	}
	if d.Merchants, err = c.merchantsOf(r, ids); err != nil {
		c.fail(w, r, err)
		return
	}
	d.PrevURL, d.NextURL = pager(r, pg)
	c.render(w, r, http.StatusOK, "disputes", s, "nav_disputes", "disputes", d)
}

// disputeOpen opens a dispute on a payment given by id, reference or
// merchant_ref (which must name one payment), for an amount in whole
// units (empty: all that was not refunded).
func (c *Console) disputeOpen(w http.ResponseWriter, r *http.Request, s *session) {
	key := strings.TrimSpace(r.PostFormValue("payment"))
	back := "/console/disputes?payment=" + url.QueryEscape(key)
	id, err := c.App.OperatorTransactionID(r.Context(), key)
	var e *xaalis.Error
	switch {
	case errors.Is(err, xaalis.ErrNotFound) || key == "":
		c.refused(w, r, back, &xaalis.Error{Code: xaalis.EValidation, Fields: xaalis.ValidationErrors{"transaction_id": {
			"no payment has this id, reference or merchant_ref"}}})
		return
	case errors.As(err, &e):
		c.refused(w, r, back, e)
		return
	case err != nil:
		c.fail(w, r, err)
		return
	}
	in := xaalis.DisputeOpen{TransactionID: id, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if a := strings.TrimSpace(r.PostFormValue("amount")); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 || n > 1<<40 {
			c.refused(w, r, back, &xaalis.Error{Code: xaalis.EValidation, Fields: xaalis.ValidationErrors{"amount": {"must be a positive whole number"}}})
			return
		}
		in.Amount = n * 100
	}
	if _, err := c.App.OpenDispute(s.ctx, in); err != nil {
		c.refused(w, r, back, err)
		return
	}
	done(w, r, "/console/disputes", "dispute_opened")
}

func (c *Console) disputeConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	outcome := xaalis.DisputeStatus(r.URL.Query().Get("outcome"))
	if outcome != xaalis.DisputeWon && outcome != xaalis.DisputeLost {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	d, err := c.App.OperatorDispute(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := c.App.Store.Merchant(r.Context(), d.MerchantID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	l := pickLang(r)
	c.render(w, r, http.StatusOK, "confirm", s, "confirm_title", "disputes", confirmData{
		Heading: l.T("dispute_" + string(outcome) + "_q"),
		Lines: [][2]string{{l.T("merchant"), m.Name}, {l.T("reference"), d.Reference}, {l.T("amount"), formatAmount(d.Amount, l)},
			{l.T("reason"), d.Reason}, {l.T("status"), l.T("ds_" + string(d.Status))}, {l.T("due_by"), formatTime(d.DueBy)}},
		Action: "/console/disputes/" + url.PathEscape(d.ID) + "/decide", Hidden: map[string]string{"outcome": string(outcome)},
		Button: l.T("dispute_" + string(outcome)), Danger: outcome == xaalis.DisputeLost, Cancel: "/console/disputes",
	})
}

func (c *Console) disputeDecide(w http.ResponseWriter, r *http.Request, s *session) {
	outcome := xaalis.DisputeStatus(r.PostFormValue("outcome"))
	if _, err := c.App.DecideDispute(s.ctx, r.PathValue("id"), outcome, ""); err != nil {
		c.refused(w, r, "/console/disputes", err)
		return
	}
	done(w, r, "/console/disputes", "dispute_"+string(outcome))
}

// transactionsData is the search page.
type transactionsData struct {
	Query        string
	Searched     bool
	Transactions []*xaalis.Transaction
	Merchants    map[string]*xaalis.Merchant
}

func (c *Console) transactions(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := transactionsData{Query: q, Searched: q != ""}
	if q != "" {
		list, err := c.App.FindTransactions(r.Context(), q)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		d.Transactions = list
		ids := make([]string, len(list))
		for i, t := range list {
			ids[i] = t.MerchantID
		}
		if d.Merchants, err = c.merchantsOf(r, ids); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "transactions", s, "nav_transactions", "transactions", d)
}

func (c *Console) transaction(w http.ResponseWriter, r *http.Request, s *session) {
	if !validID(r.PathValue("id")) {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	v, err := c.App.TransactionView(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "transaction", s, "transaction", "transactions", v)
}

func (c *Console) markRefundedConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	v, err := c.App.TransactionView(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	l := pickLang(r)
	t := v.Transaction
	c.render(w, r, http.StatusOK, "confirm", s, "confirm_title", "transactions", confirmData{
		Heading: l.T("mark_refunded_q"),
		Lines: [][2]string{{l.T("merchant"), v.Merchant.Name}, {l.T("reference"), t.Reference}, {l.T("amount"), formatAmount(t.Amount, l)},
			{l.T("provider"), t.Provider}, {l.T("status"), string(t.Status)}, {"", l.T("mark_refunded_hint")}},
		Action: "/console/transactions/" + url.PathEscape(t.ID) + "/mark-refunded", Field: "note", FieldLabel: l.T("note"),
		Button: l.T("mark_refunded"), Danger: true, Cancel: "/console/transactions/" + url.PathEscape(t.ID),
	})
}

func (c *Console) markRefunded(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := "/console/transactions/" + url.PathEscape(id)
	note := strings.TrimSpace(r.PostFormValue("note"))
	if _, err := c.App.MarkRefunded(s.ctx, id, note); err != nil {
		c.refused(w, r, back, err)
		return
	}
	done(w, r, back, "marked_refunded")
}

// settleConfirm asks to settle an open payout or refund by hand with the
// outcome (?outcome=success|failed) its provider gave, the note required.
func (c *Console) settleConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	outcome := r.URL.Query().Get("outcome")
	if outcome != string(xaalis.ProviderSuccess) && outcome != string(xaalis.ProviderFailed) {
		c.fail(w, r, xaalis.ErrNotFound)
		return
	}
	v, err := c.App.TransactionView(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	l := pickLang(r)
	t := v.Transaction
	c.render(w, r, http.StatusOK, "confirm", s, "confirm_title", "transactions", confirmData{
		Heading: l.T("settle_" + outcome + "_q"),
		Lines: [][2]string{{l.T("merchant"), v.Merchant.Name}, {l.T("reference"), t.Reference}, {l.T("amount"), formatAmount(t.Amount, l)},
			{l.T("provider"), t.Provider}, {l.T("status"), string(t.Status)}, {"", l.T("settle_hint")}},
		Action: "/console/transactions/" + url.PathEscape(t.ID) + "/settle", Hidden: map[string]string{"outcome": outcome},
		Field: "note", FieldLabel: l.T("settle_note"), FieldRequired: true,
		Button: l.T("settle_" + outcome), Danger: true, Cancel: "/console/transactions/" + url.PathEscape(t.ID),
	})
}

// settle records the outcome of a payout or refund by hand.
func (c *Console) settle(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := "/console/transactions/" + url.PathEscape(id)
	t, err := c.App.Store.Transaction(s.ctx, "", id)
	if err != nil {
		c.refused(w, r, back, err)
		return
	}
	outcome := xaalis.ProviderState(r.PostFormValue("outcome"))
	if _, err := c.App.SettleByHand(s.ctx, t.Type, id, outcome, r.PostFormValue("note")); err != nil {
		c.refused(w, r, back, err)
		return
	}
	done(w, r, back, "settled")
}

func (c *Console) redeliver(w http.ResponseWriter, r *http.Request, s *session) {
	back := "/console/transactions/" + url.PathEscape(r.PostFormValue("transaction"))
	if !validID(r.PostFormValue("transaction")) {
		back = "/console/transactions"
	}
	v, err := c.App.OperatorRedeliver(s.ctx, r.PathValue("id"))
	if err != nil {
		c.refused(w, r, back, err)
		return
	}
	done(w, r, back, fmt.Sprintf("redelivered#event-%s", url.PathEscape(v.Event.ID)))
}

// auditData is a page of the audit log.
type auditData struct {
	Entries []*xaalis.AuditEntry
	Page    xaalis.Pagination
	PrevURL string
	NextURL string
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, s *session) {
	list, pg, err := c.App.AuditLog(r.Context(), pageOf(r))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := auditData{Entries: list, Page: pg}
	d.PrevURL, d.NextURL = pager(r, pg)
	c.render(w, r, http.StatusOK, "audit", s, "nav_audit", "audit", d)
}
