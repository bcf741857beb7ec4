package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Input hygiene: the one place that refuses the strings a request may not
// carry into the database, the logs or a merchant's webhook. Every string
// of a JSON body (keys and values, at any depth), every query parameter
// (name and value) and every stored header value (Idempotency-Key) must
// be valid UTF-8 without control characters: no NUL, no other C0
// character (U+0001–U+001F), no DEL (U+007F), no C1 character
// (U+0080–U+009F). Free text (freeTextFields) may also hold tab and line
// breaks (LF, or CR LF). A JSON escape of a lone surrogate ("\ud800"),
// which decoders silently turn into U+FFFD, is refused as invalid UTF-8.
// The answer is 422 validation_error naming the field.

// freeTextFields are the fields whose values are prose written by people:
// tab and newline are allowed there, and only there.
var freeTextFields = map[string]bool{
	"description":       true,
	"reason":            true,
	"merchant_note":     true,
	"merchant_response": true, // the dispute's evidence text
}

// msgKey is the fault of a JSON key: the text rules' own faults are
// xaalis.TextFault's messages.
const msgKey = "has a key that is not valid UTF-8 or holds control characters"

// cleanBody reports whether a JSON body certainly holds no string the
// hygiene rules refuse, without parsing it: valid UTF-8, no DEL or C1
// character, and no escape at all (escapes are how JSON writes control
// characters, tabs, newlines and lone surrogates). Most bodies pass; the
// others are walked by checkBody.
func cleanBody(body []byte) bool {
	if bytes.IndexByte(body, '\\') >= 0 || bytes.IndexByte(body, 0x7f) >= 0 {
		return false
	}
	// C1 characters are C2 80–C2 9F in UTF-8.
	for i := bytes.IndexByte(body, 0xc2); i >= 0; {
		if i+1 < len(body) && body[i+1] >= 0x80 && body[i+1] <= 0x9f {
			return false
		}
		j := bytes.IndexByte(body[i+1:], 0xc2)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return utf8.Valid(body)
}

// checkBody applies the hygiene rules to every string of a JSON body. A
// body that is not JSON passes here: the decoder then answers it.
func checkBody(body []byte) error {
	if cleanBody(body) {
		return nil
	}
	v := xaalis.ValidationErrors{}
	walkJSON(body, func(path string, freeText, isKey bool, raw []byte, s string) {
		msg := xaalis.TextFault(s, freeText && !isKey)
		if msg == "" && strings.ContainsRune(s, utf8.RuneError) && !literalReplacement(raw) {
			// The decoder replaced an invalid sequence or a lone
			// surrogate escape: the sender's string was not UTF-8.
			msg = xaalis.MsgUTF8
		}
		if msg == "" {
			return
		}
		if isKey {
			msg = msgKey
		}
		if len(v[path]) == 0 {
			v.Add(path, msg)
		}
	})
	return v.Err()
}

// literalReplacement reports whether a raw JSON string token spells every
// U+FFFD it holds, literally or as the escape \ufffd: only then is a
// U+FFFD in its decoded value the sender's own.
func literalReplacement(raw []byte) bool {
	want := bytes.Count(raw, []byte("\uFFFD"))
	lower := bytes.ToLower(raw)
	want += bytes.Count(lower, []byte(`\ufffd`))
	got := 0
	var s string
	if json.Unmarshal(raw, &s) == nil {
		got = strings.Count(s, "\uFFFD")
	}
	return got <= want
}

// walkJSON calls visit for every string of a JSON document, key or value,
// with the path of the field it is in ("payer.name", "metadata.order",
// "evidence[2]"), whether that field is free text, and the string's raw
// token. It stops silently at the first syntax error.
func walkJSON(body []byte, visit func(path string, freeText, isKey bool, raw []byte, s string)) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		array bool
		index int
		key   string
		// wantKey: in an object, the next string is a key.
		wantKey bool
		path    string
	}
	var stack []*frame
	field := func() (path string, name string) {
		if len(stack) == 0 {
			return "body", ""
		}
		f := stack[len(stack)-1]
		if f.array {
			return fmt.Sprintf("%s[%d]", f.path, f.index), f.key
		}
		if f.path == "" {
			return f.key, f.key
		}
		return f.path + "." + f.key, f.key
	}
	// after moves the enclosing frame past one value.
	after := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.array {
			f.index++
		} else {
			f.wantKey = true
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				path, name := field()
				if len(stack) == 0 {
					path = ""
				}
				stack = append(stack, &frame{array: t == '[', key: name, wantKey: t == '{', path: path})
			case '}', ']':
				stack = stack[:len(stack)-1]
				after()
			}
		case string:
			raw := bytes.TrimLeft(body[start:dec.InputOffset()], " \t\r\n,:")
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
				f := stack[n-1]
				f.key, f.wantKey = t, false
				p := f.path
				if p == "" {
					p = "body"
				}
				visit(p, false, true, raw, t)
				continue
			}
			path, name := field()
			visit(path, freeTextFields[name], false, raw, t)
			after()
		default:
			after()
		}
	}
}

// checkQuery applies the hygiene rules to every query parameter, its name
// and its values. A parameter is named as the client wrote it.
func checkQuery(rawQuery string) error {
	if rawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// A pair that does not decode (a stray %, a ;) is not dropped: the
		// handlers would read the query without it, and a list would come
		// back unfiltered as if its filter had matched everything.
		return xaalis.Errorf(xaalis.EInvalidRequest, "The query string cannot be read: %v.", err)
	}
	v := xaalis.ValidationErrors{}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if msg := xaalis.TextFault(name, false); msg != "" {
			v.Add(strconv.QuoteToASCII(name), "is a query parameter name that "+msg)
			continue
		}
		for _, val := range q[name] {
			if msg := xaalis.TextFault(val, false); msg != "" {
				v.Add(name, msg)
				break
			}
		}
	}
	return v.Err()
}

// checkHeader applies the hygiene rules to a header value the service
// stores.
func checkHeader(name, value string) error {
	if msg := xaalis.TextFault(value, false); msg != "" {
		return &xaalis.Error{Code: xaalis.EValidation, Fields: xaalis.ValidationErrors{name: {msg}}}
	}
	return nil
}
