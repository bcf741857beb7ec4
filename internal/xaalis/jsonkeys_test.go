package xaalis

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	type inner struct {
		Phone string `json:"phone"`
		Name  string
	}
	type body struct {
		Amount   int               `json:"amount"`
		Payer    *inner            `json:"payer"`
		Items    []inner           `json:"items"`
		Metadata map[string]string `json:"metadata"`
		Raw      json.RawMessage   `json:"raw"`
		Skip     string            `json:"-"`
	}
	for _, c := range []struct {
		body string
		want string
	}{
		{`{"amount":1}`, ""},
		{`{"amount":1,"amount":2}`, "amount"},
		{`{"amount":1,"AMOUNT":2}`, "AMOUNT"},
		{`{"amount":1,"\u0061mount":2}`, "amount"},
		{`{"payer":{"phone":"1","name":"a","phone":"2"}}`, "payer.phone"},
		{`{"payer":{"Name":"a","name":"b"}}`, "payer.name"},
		{`{"items":[{"phone":"1"},{"phone":"1","Phone":"2"}]}`, "items[1].Phone"},
		{`{"metadata":{"a":"1","A":"2"}}`, ""},
		{`{"metadata":{"a":"1","a":"2"}}`, "metadata.a"},
		{`{"raw":{"x":1,"X":2}}`, ""},
		{`{"raw":{"x":1,"x":2}}`, "raw.x"},
		{`{"unknown":{"k":1,"k":2}}`, "unknown.k"},
		{`{"unknown":{"k":1,"K":2}}`, ""},
		{`{"a":{"x":1},"b":{"x":1}}`, ""},
		{`{"a":[{"x":1},{"x":1}]}`, ""},
		{`[{"x":1,"x":2}]`, "[0].x"},
		{`{"amount":1,`, ""},
		{`"x"`, ""},
		{``, ""},
		{`{"amount":1}{"amount":2}`, ""},
		{`{"amount":1,"amount"`, "amount"},
		{`{"amount":1,"amount" 5}`, "amount"},
		{`{"payer":{"name":"a"},"name":"b"}`, ""},
		{`{"amount":"{\"amount\":1,\"amount\":2}"}`, ""},
	} {
		if got := DuplicateKey([]byte(c.body), &body{}); got != c.want {
			t.Errorf("%s: got %q, want %q", c.body, got, c.want)
		}
	}
	// Deeper than the fast scan follows.
	deep := strings.Repeat("[", 70) + `{"amount":1,"amount":2}` + strings.Repeat("]", 70)
	if got, want := DuplicateKey([]byte(deep), nil), strings.Repeat("[0]", 70)+".amount"; got != want {
		t.Errorf("70 arrays deep: got %q, want %q", got, want)
	}
	if got := DuplicateKey([]byte(`{"a":1,"A":1}`), nil); got != "" {
		t.Errorf("untyped: case differs, got %q", got)
	}
}

// FuzzDistinctKeys: a body whose keys the fast scan finds distinct holds
// no key twice by the decoder's tokens either, in a struct's objects
// (case folded) or in untyped ones (exact).
func FuzzDistinctKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `{"a":"b","b":1}`,
		`["a","a"]`, `{"a":"\"","a":1}`, `{"\u0061":1,"a":2}`, `{"a":1,"a"`, `{"a":1,"a" 5}`, `{,"a":1,"a":2}`,
		`{"k":1,"K":2}`, `{"a":[{"x":1},{"x":1}]}`, `{"amount":1}{"amount":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		type target struct {
			A int            `json:"a"`
			K int            `json:"k"`
			M map[string]any `json:"m"`
		}
		if !distinctKeys([]byte(body)) {
			return
		}
		if k := duplicateKey([]byte(body), &target{}); k != "" {
			t.Fatalf("%q: distinct by the fast scan, yet %q twice in a struct", body, k)
		}
		if k := duplicateKey([]byte(body), nil); k != "" {
			t.Fatalf("%q: distinct by the fast scan, yet %q twice untyped", body, k)
		}
	})
}

// FuzzDuplicateKey: no body crashes the scan, and a body it passes decodes
// into a map with as many keys as its top-level object has.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `[`, `{"a":`, `{}`, `{"A":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		type target struct {
			A int            `json:"a"`
			M map[string]any `json:"m"`
		}
		_ = DuplicateKey([]byte(body), &target{})
		if DuplicateKey([]byte(body), nil) != "" {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &m) != nil {
			return
		}
		// Count the top-level keys by tokens: equal counts mean no key of
		// the top-level object was dropped as a duplicate.
		dec := json.NewDecoder(strings.NewReader(body))
		n, depth := 0, 0
		expectKey := false
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch v := tok.(type) {
			case json.Delim:
				switch v {
				case '{', '[':
					depth++
					expectKey = depth == 1 && v == '{'
					continue
				case '}', ']':
					depth--
				}
			case string:
				if depth == 1 && expectKey {
					n++
					expectKey = false
					continue
				}
			}
			if depth == 1 {
				expectKey = true
			}
		}
		if n != len(m) {
			t.Fatalf("%q: %d keys, map holds %d, yet no duplicate reported", body, n, len(m))
		}
	})
}
