package http

import (
	"net/url"
	"strings"
)

// redactedParams never reach a log line in clear. q is the operator
// console's search, and payment the payment its dispute form names, which
// may each be a payer's phone number typed in.
var redactedParams = map[string]bool{"payer_phone": true, "phone": true, "api_key": true, "msisdn": true, "q": true,
	"payment": true}

// RedactQuery returns a raw query string with the values of sensitive
// parameters replaced by [REDACTED]. Parameter order is kept.
func RedactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		key, err := url.QueryUnescape(name)
		if err != nil {
			key = name
		}
		if redactedParams[strings.ToLower(key)] && hasValue {
			parts[i] = name + "=[REDACTED]"
		}
	}
	return strings.Join(parts, "&")
}
