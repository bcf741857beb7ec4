package checkout

import (
	"html/template"
	"net/url"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// The states of the page, by payment status and next action.
const (
	stateChoose     = "choose"      // initiated, no provider yet: the provider form
	stateNoProvider = "no_provider" // initiated, and no provider can take it now
	stateOTP        = "otp"         // pending, next_action otp: the code form
	stateUSSD       = "ussd"        // pending, next_action ussd: confirm on the phone
	stateRedirect   = "redirect"    // pending, next_action redirect: open the wallet
	stateWaiting    = "waiting"     // pending with no payer step: wait
	stateFinal      = "final"       // success, failed, cancelled, expired, ...
)

// providerOption is one radio button of the provider form.
type providerOption struct {
	ID, Name, Hint string
	Checked        bool
}

// actions are the form targets of the page.
type actions struct {
	Provider, OTP, Simulate, Cancel string
}

// pageData is what the page template renders.
type pageData struct {
	L, Other lang
	ID       string
	State    string
	Status   xaalis.Status
	Open     bool

	Merchant    string
	Amount      string
	Reference   string
	MerchantRef string

	Providers []providerOption
	Phone     string // the payer's number, pre-filling the form
	// MaskedPhone is the payer's number as pending steps show it.
	MaskedPhone  string
	ProviderName string
	USSDCode     string
	USSDLink     template.URL
	RedirectURL  string

	Error string // a translated error message

	TestMode bool
	TestOTP  string
	// CanSimulateOutcome: success and failed apply once a provider holds
	// the payment; before that only cancelled does.
	CanSimulateOutcome bool

	Outcome, OutcomeDetail, OutcomeReason string
	ReturnURL                             string

	Actions   actions
	SelfURL   string
	SwitchURL string
	StatusURL string
	CSSURL    string
	JSURL     string
	// Refresh makes the page reload itself without JavaScript, for the
	// steps where the payer waits on the phone.
	Refresh bool
}

// phoneErrors are the error keys whose message names the payment's
// country and its calling code.
var phoneErrors = map[string]bool{
	"phone_too_short": true, "phone_too_long": true, "phone_wrong_country": true,
	"phone_old_numbering_plan": true, "phone_invalid": true,
}

// failureReasons are the provider reasons the outcome explains.
var failureReasons = map[string]string{
	"insufficient_funds":   "reason_insufficient_funds",
	"payer_declined":       "reason_payer_declined",
	"payer_cancelled":      "reason_payer_cancelled",
	"too_many_wrong_codes": "reason_too_many_wrong_codes",
}

// errorMessage translates an ?e= key; "" for a key the page does not know.
func errorMessage(key string, l lang, country xaalis.Country) string {
	if _, ok := messages[l]["e_"+key]; !ok || key == "" {
		return ""
	}
	if phoneErrors[key] {
		return l.F("e_"+key, l.countryName(string(country)), callingCodes[string(country)])
	}
	return l.T("e_" + key)
}

// newPageData builds the page of a payment; errKey is the ?e= parameter.
func newPageData(v *xaalis.CheckoutView, l lang, errKey string) *pageData {
	t := v.Payment
	self := pagePath(t.ID, l)
	base := "/checkout/" + url.PathEscape(t.ID)
	d := &pageData{
		L: l, Other: l.other(), ID: t.ID, Status: t.Status, Open: t.Status.Open(),
		Merchant: v.Merchant.Name, Amount: formatAmount(t.Amount, l), Reference: t.Reference,
		MerchantRef: t.MerchantRef, Phone: t.PayerPhone, TestMode: v.TestMode,
		ProviderName: providerName(t.Provider),
		Actions: actions{Provider: base + "/provider", OTP: base + "/otp", Simulate: base + "/simulate",
			Cancel: base + "/cancel"},
		SelfURL: self, SwitchURL: pagePath(t.ID, l.other()), StatusURL: base + "/status",
		CSSURL: assetURL("checkout.css"), JSURL: assetURL("page.js"),
	}
	if t.PayerPhone != "" {
		d.MaskedPhone = xaalis.MaskPhone(t.PayerPhone)
	}
	if d.TestMode {
		d.TestOTP = testOTP
		d.CanSimulateOutcome = t.ProviderRef != ""
	}
	switch {
	case t.Status == xaalis.StatusInitiated && t.ProviderRef == "":
		d.State = stateChoose
		if len(v.Providers) == 0 {
			d.State = stateNoProvider
		}
		for _, p := range v.Providers {
			o := providerOption{ID: p.ID, Name: providerName(p.ID), Hint: l.T("hint_" + string(p.NextAction))}
			o.Checked = p.ID == t.Provider || len(v.Providers) == 1
			d.Providers = append(d.Providers, o)
		}
	case t.Status.Open():
		d.State = stateWaiting
		if na := t.NextAction; na != nil && t.Status == xaalis.StatusPending {
			d.USSDCode, d.USSDLink = na.USSDCode, telURL(na.USSDCode)
			switch na.Type {
			case xaalis.NextOTP:
				d.State = stateOTP
			case xaalis.NextUSSD:
				d.State = stateUSSD
			case xaalis.NextRedirect:
				if na.RedirectURL != "" {
					d.State, d.RedirectURL = stateRedirect, na.RedirectURL
				}
			}
		}
		d.Refresh = d.State == stateUSSD || d.State == stateWaiting
	default:
		d.State = stateFinal
		d.Outcome = l.T("outcome_" + string(t.Status))
		if t.Status == xaalis.StatusSuccess {
			d.OutcomeDetail = l.F("detail_success", d.Amount, d.Merchant)
		} else {
			d.OutcomeDetail = l.T("detail_" + string(t.Status))
		}
		if k, ok := failureReasons[t.FailureReason]; ok && t.Status != xaalis.StatusSuccess {
			d.OutcomeReason = l.T(k)
		}
		d.ReturnURL = returnURL(t)
	}
	if d.Open {
		d.Error = errorMessage(errKey, l, t.Country)
	}
	return d
}
