package http

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

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
		"phone=770001122&api_key=sk_live_abc&x=y":    "phone=[REDACTED]&api_key=[REDACTED]&x=y",
		"Payer_Phone=1&msisdn=2":                     "Payer_Phone=[REDACTED]&msisdn=[REDACTED]",
		"payer%5Fphone=1":                            "payer%5Fphone=[REDACTED]",
		"q=%2B221771234567&page=2":                   "q=[REDACTED]&page=2",
		"payment=%2B221770000001&e=validation_error": "payment=[REDACTED]&e=validation_error",
	} {
		if got := RedactQuery(in); got != want {
			t.Errorf("RedactQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckBody: each refused string is named by its field's path, and
// free text alone may hold tab and newline.
func TestCheckBody(t *testing.T) {
	for _, c := range []struct {
		body  string
		field string // "" when accepted
	}{
		{`{"merchant_ref":"ord-1","amount":5000}`, ""},
		{`{"merchant_ref":"ord-\u0000-1"}`, "merchant_ref"},
		{`{"merchant_ref":"a\tb"}`, "merchant_ref"},
		{`{"description":"a\tb\nc\r\nd"}`, ""},
		{`{"description":"a\rb"}`, "description"},
		{`{"description":"a\u0000b"}`, "description"},
		{`{"reason":"x\u001b[31m"}`, "reason"},
		{`{"merchant_note":"l1\nl2"}`, ""},
		{`{"merchant_response":"l1\nl2"}`, ""},
		{`{"payer":{"name":"Awa\u0085"}}`, "payer.name"},
		{`{"metadata":{"order":"1\u007f"}}`, "metadata.order"},
		{`{"metadata":{"or\u0001der":"1"}}`, "metadata"},
		{`{"items":[{"description":"ok\n"},{"description":"x\u009b"}]}`, "items[1].description"},
		{`{"evidence":["https://a.example","https://b.example/\u0000"]}`, "evidence[1]"},
		{`{"events":[["a"],["b","\u0007"]]}`, "events[1][1]"},
		{"{\"name\":\"caf\xc3\xa9\"}", ""},
		{"{\"name\":\"caf\xe9\"}", "name"},
		{`{"name":"\ud83d\ude00"}`, ""},
		{`{"name":"\ud800"}`, "name"},
		{`{"name":"\ufffd"}`, ""},
		{"{\"name\":\"\uFFFD\"}", ""},
		{`"\u0007"`, "body"},
		{`{"a":1,"b":[true,null,2.5],"c":"\/ok"}`, ""},
	} {
		err := checkBody([]byte(c.body))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.body, err)
			}
			continue
		}
		var e *xaalis.Error
		if !errors.As(err, &e) || e.Code != xaalis.EValidation || len(e.Fields[c.field]) == 0 || len(e.Fields) != 1 {
			t.Errorf("%s: got %v %+v, want validation_error naming %q", c.body, err, e, c.field)
		}
	}
}

func TestCheckQuery(t *testing.T) {
	for q, field := range map[string]string{
		"":                            "",
		"status=success&page=2":       "",
		"merchant_ref=ord%00":         "merchant_ref",
		"merchant_ref=ord%09":         "merchant_ref",
		"merchant_ref=%FF":            "merchant_ref",
		"merchant_ref=caf%C3%A9":      "",
		"x%0A=1":                      `"x\n"`,
		"types=payment.success%C2%85": "types",
	} {
		err := checkQuery(q)
		if field == "" {
			if err != nil {
				t.Errorf("%q refused: %v", q, err)
			}
			continue
		}
		var e *xaalis.Error
		if !errors.As(err, &e) || len(e.Fields[field]) == 0 {
			t.Errorf("%q: got %v, want a validation_error naming %s", q, err, field)
		}
	}
}

// FuzzCheckBody: a body checkBody accepts decodes to strings without a
// control character (outside free text) or invalid UTF-8.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"description":"a\nb"}`, `{"a":["\u0000"]}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":{"b":{"c":"\u0085"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkBody(body) != nil {
			return
		}
		if !utf8.Valid(body) && json.Valid(body) {
			// Invalid UTF-8 outside strings is not JSON; inside one it
			// must have been refused.
			t.Fatalf("accepted invalid UTF-8: %q", body)
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		var walk func(any, bool)
		walk = func(x any, free bool) {
			switch y := x.(type) {
			case string:
				if msg := xaalis.TextFault(y, free); msg != "" {
					t.Fatalf("accepted %q: %s", body, msg)
				}
			case []any:
				for _, z := range y {
					walk(z, free) // the elements of a free-text array are free text
				}
			case map[string]any:
				for k, z := range y {
					walk(k, false)
					walk(z, freeTextFields[k])
				}
			}
		}
		walk(v, false)
	})
}
