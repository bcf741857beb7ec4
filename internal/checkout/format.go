package checkout

import (
	"html/template"
	"net/url"
	"strconv"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Spaces of amounts: groups of three digits are separated by a narrow
// no-break space (French and SI usage, read the same in English), and the
// currency code is kept on the line of its amount by a no-break space.
const (
	groupSep    = "\u202f"
	currencySep = "\u00a0"
)

// formatAmount writes an amount for people: "5 000 XOF", "1 234 567 XOF",
// "12,50 EUR" in French and "12.50 EUR" in English. Whole amounts show no
// decimals.
func formatAmount(a xaalis.Amount, l lang) string {
	m := a.Minor
	neg := m < 0
	if neg {
		m = -m
	}
	units := strconv.FormatInt(m/100, 10)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range units {
		if i > 0 && (len(units)-i)%3 == 0 {
			b.WriteString(groupSep)
		}
		b.WriteRune(c)
	}
	if frac := m % 100; frac != 0 {
		if l == langEN {
			b.WriteByte('.')
		} else {
			b.WriteByte(',')
		}
		if frac < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.FormatInt(frac, 10))
	}
	b.WriteString(currencySep)
	b.WriteString(string(a.Currency))
	return b.String()
}

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
