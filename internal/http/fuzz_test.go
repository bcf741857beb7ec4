package http

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// FuzzDecode: no body, however broken, crashes the decoder or leaves it
// without a catalogued error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"x","amount":5}`, `{"amount":"5"}`, `[`, `{"metadata":{"a":1}}`, `null`, `{} {}`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/plans", strings.NewReader(body))
		var in xaalis.PlanInput
		err := decode(r, &in)
		if err == nil {
			return
		}
		var e *xaalis.Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: uncatalogued error %v", body, err)
		}
		if e.Code != xaalis.EInvalidRequest && e.Code != xaalis.EValidation {
			t.Fatalf("%q: code %s", body, e.Code)
		}
	})
}

func FuzzRedactQuery(f *testing.F) {
	f.Add("payer_phone=%2B221770001122&page=1")
	f.Add("phone=1&phone=2&api_key=sk_live_x")
	f.Add("PHONE=1;x")
	f.Fuzz(func(t *testing.T, q string) {
		out := RedactQuery(q)
		for _, p := range strings.Split(out, "&") {
			name, value, ok := strings.Cut(p, "=")
			if !ok {
				continue
			}
			lower := strings.ToLower(name)
			if (lower == "phone" || lower == "payer_phone" || lower == "api_key") && value != "[REDACTED]" {
				t.Fatalf("%q -> %q leaves %s", q, out, p)
			}
		}
	})
}

func TestRedactQuery(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"page=1":                             "page=1",
		"payer_phone=%2B221770001122&page=2": "payer_phone=[REDACTED]&page=2",
		"phone=770001122&api_key=sk_live_abc&x=y": "phone=[REDACTED]&api_key=[REDACTED]&x=y",
		"Payer_Phone=1&msisdn=2":                  "Payer_Phone=[REDACTED]&msisdn=[REDACTED]",
		"payer%5Fphone=1":                         "payer%5Fphone=[REDACTED]",
	} {
		if got := RedactQuery(in); got != want {
			t.Errorf("RedactQuery(%q) = %q, want %q", in, got, want)
		}
	}
}
