package checkout

import (
	"html/template"
	"net/url"
	"strings"

	"github.com/xaalis/xaalis/internal/locale"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// formatAmount writes an amount for people (locale.Amount).
func formatAmount(a xaalis.Amount, l lang) string { return locale.Amount(a, locale.Lang(l)) }

// providerNames are the names payers know the providers by.
var providerNames = map[string]string{
	"channel_a": "Wallet A",
	"channel_b": "Wallet B",
	"channel_c": "Wallet C",
}

// providerName is a provider's human name; an unknown one shows its id.
func providerName(id string) string {
	if n, ok := providerNames[id]; ok {
		return n
	}
	return id
}

// callingCodes of the UEMOA countries, for phone number messages.
var callingCodes = map[string]int{
	"SN": 221, "CI": 225, "ML": 223, "BF": 226, "TG": 228, "BJ": 229, "NE": 227, "GW": 245,
}

// returnURL is where the payer goes back to the merchant once the payment
// is final: success_url for a payment that went through, failed_url
// otherwise, with "reference" and "status" appended to the merchant's own
// query. It is "" while the payment is open or when the URL is unusable.
func returnURL(t *xaalis.Transaction) string {
	var raw string
	switch t.Status {
	case xaalis.StatusSuccess, xaalis.StatusRefunded, xaalis.StatusDisputed:
		raw = t.SuccessURL
	case xaalis.StatusFailed, xaalis.StatusCancelled, xaalis.StatusExpired:
		raw = t.FailedURL
	default:
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	add := url.Values{"reference": {t.Reference}, "status": {string(t.Status)}}.Encode()
	if u.RawQuery == "" {
		u.RawQuery = add
	} else {
		u.RawQuery += "&" + add
	}
	u.ForceQuery = false
	return u.String()
}

// telURL is a tel: link that dials a USSD code ("#144*391#"), with '#'
// percent-encoded as dialers want it; "" for anything but a USSD code.
func telURL(code string) template.URL {
	if code == "" || len(code) > 32 {
		return ""
	}
	for _, c := range code {
		if !(c >= '0' && c <= '9' || c == '*' || c == '#' || c == '+') {
			return ""
		}
	}
	// Only digits, '*', '#' and '+' remain: safe in a URL once '#' is
	// encoded.
	return template.URL("tel:" + strings.ReplaceAll(code, "#", "%23"))
}
