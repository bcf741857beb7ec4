package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/locale"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"amount": formatAmount,
	// xof formats a worth in XOF minor units.
	"xof": func(minor int64, l lang) string {
		return formatAmount(xaalis.Amount{Minor: minor, Currency: xaalis.XOF}, l)
	},
	"time": formatTime,
	"timeptr": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return formatTime(*t)
	},
	"dur":    formatDuration,
	"since":  func(now, t time.Time) string { return formatDuration(now.Sub(t)) },
	"until":  func(now, t time.Time) time.Duration { return t.Sub(now) },
	"short":  func(id string) string { return short(id) },
	"key":    keyLabel,
	"dest":   destination,
	"pct":    func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + " %" },
	"json":   prettyJSON,
	"sub":    func(a, b int) int { return a - b },
	"negdur": func(d time.Duration) time.Duration { return -d },
	"usable": func(k *xaalis.Key, now time.Time) bool { return k.Usable(now) },
	"count": func(m map[xaalis.Status]xaalis.PaymentCount, s xaalis.Status) xaalis.PaymentCount {
		return m[s]
	},
	"statuses": func() []xaalis.Status { return xaalis.AllStatuses },
	"scopes":   joinScopes,
	"join":     strings.Join,
	"lower":    strings.ToLower,
	"ipjoin":   joinPrefixes,
	"attempt": func(at *xaalis.Attempt) bool {
		return at.HTTPStatus >= 200 && at.HTTPStatus < 300 && at.ErrorMessage == ""
	},
	"canMove": func(pr *xaalis.PayoutRequest, act string) bool {
		switch xaalis.PayoutRequestAction(act) {
		case xaalis.ActionApprove, xaalis.ActionReject:
			return pr.Status == xaalis.PRSubmitted
		case xaalis.ActionComplete, xaalis.ActionFail:
			return pr.Status == xaalis.PRApproved
		}
		return false
	},
	"tr":    func(l lang, prefix string, v any) string { return l.T(prefix + fmt.Sprint(v)) },
	"deref": func(a *xaalis.Amount) xaalis.Amount { return *a },
	"posting": func(p ledger.Posting, l lang) string {
		s := formatAmount(xaalis.Amount{Minor: p.Amount, Currency: xaalis.Currency(p.Currency)}, l)
		if p.Amount > 0 {
			s = "+" + s
		}
		return s
	},
	"txrows": func(l lang, list []*xaalis.Transaction, ms map[string]*xaalis.Merchant) txRows {
		return txRows{L: l, List: list, Merchants: ms}
	},
	// rate is a provider's success rate of the day, "—" without outcomes.
	"rate": func(d xaalis.ProviderDay, l lang) string {
		r, ok := d.SuccessRate()
		if !ok {
			return "—"
		}
		s := strconv.FormatFloat(r*100, 'f', 1, 64)
		if l == langFR {
			s = strings.Replace(s, ".", ",", 1)
		}
		return s + "\u00a0%"
	},
}

// txRows is a table of transactions.
type txRows struct {
	L         lang
	List      []*xaalis.Transaction
	Merchants map[string]*xaalis.Merchant
}

// formatAmount writes an amount for people (locale.Amount).
func formatAmount(a xaalis.Amount, l lang) string { return locale.Amount(a, locale.Lang(l)) }

// formatTime writes a time in UTC, to the second.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// formatDuration writes a duration briefly: "45 s", "12 min", "3 h 05",
// "6 d 23 h".
func formatDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h %02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%d d %d h", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

func short(id string) string {
	if len(id) > 13 {
		return id[:8] + "…" + id[len(id)-4:]
	}
	return id
}

// keyLabel shows a key by its prefix and last four characters, never its
// secret (which is not kept).
func keyLabel(k *xaalis.Key) string { return k.Prefix + "…" + k.Last4 }

func destination(pr *xaalis.PayoutRequest) string {
	var parts []string
	if pr.DestPhone != "" {
		parts = append(parts, pr.DestPhone)
	}
	if pr.DestIBAN != "" {
		parts = append(parts, pr.DestIBAN)
	}
	if pr.DestBank != "" {
		parts = append(parts, pr.DestBank)
	}
	return strings.Join(parts, " · ")
}

func joinScopes(ss []xaalis.Scope) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func joinPrefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}

// prettyJSON indents a raw JSON value for the audit log.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// okKeys are the messages an action may come back with (?ok=).
var okKeys = map[string]bool{
	"signed_out": true, "ledger_clean": true, "ledger_problems": true, "kyc_approved": true, "kyc_rejected": true,
	"kyc_pending": true, "merchant_updated": true, "key_revoked": true, "pr_approve": true, "pr_reject": true,
	"pr_complete": true, "pr_fail": true, "dispute_opened": true, "dispute_won": true, "dispute_lost": true,
	"marked_refunded": true, "redelivered": true, "settled": true,
}

// errorText says why an action was refused, from the error's code and
// the field it names; never the operator's input.
func errorText(l lang, code xaalis.Code, field string) string {
	if len(field) > 64 {
		field = ""
	}
	switch code {
	case xaalis.EValidation:
		if field == "status" {
			return l.T("e_move_impossible")
		}
		if field != "" {
			return l.F("e_field", field)
		}
		return l.T("e_validation")
	case xaalis.ENotFound:
		return l.T("e_not_found")
	case xaalis.ETransactionNotRefundable, xaalis.ENonPaymentTransactionRefund:
		return l.T("e_not_refundable")
	case xaalis.EInsufficientBalance:
		return l.T("e_insufficient_balance")
	}
	if _, ok := xaalis.Lookup(code); !ok {
		return l.T("e_generic")
	}
	return l.F("e_code", string(code))
}

// Languages.

// lang is a language of the console: "fr" or "en".
type lang string

const (
	langFR lang = "fr"
	langEN lang = "en"
)

func parseLang(s string) (lang, bool) {
	l, ok := locale.Parse(s)
	return lang(l), ok
}

// pickLang chooses the language: the switch's cookie, else the
// browser's Accept-Language (French unless English is strictly
// preferred), else French.
func pickLang(r *http.Request) lang {
	if ck, err := r.Cookie(langCookie); err == nil {
		if l, ok := parseLang(ck.Value); ok {
			return l
		}
	}
	return acceptOnly(r.Header.Get("Accept-Language"))
}

// acceptOnly reads an Accept-Language header (locale.Accept).
func acceptOnly(h string) lang { return lang(locale.Accept(h)) }

func (l lang) other() lang { return lang(locale.Lang(l).Other()) }

// Name is the language's name in itself.
func (l lang) Name() string { return locale.Lang(l).Name() }

// T translates a message key; a missing key shows as "!missing(key)",
// which the tests look for.
func (l lang) T(key string) string {
	if s, ok := messages[l][key]; ok {
		return s
	}
	return "!missing(" + key + ")"
}

// F translates and formats.
func (l lang) F(key string, args ...any) string { return fmt.Sprintf(l.T(key), args...) }
