package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// recordEnvelope is the canonical shape of a single record.
type recordEnvelope struct {
	Data     any  `json:"data"`
	Livemode bool `json:"livemode"`
}

// listEnvelope is the canonical shape of a list.
type listEnvelope struct {
	Data       any               `json:"data"`
	Pagination xaalis.Pagination `json:"pagination"`
	Livemode   bool              `json:"livemode"`
}

func encodeRecord(v any, live bool) ([]byte, error) {
	if t, ok := v.(*xaalis.Transaction); ok && t != nil {
		// Every payment's answer, on the writer's path (the commit hook
		// stores it): a transaction's JSON is json.Marshal's own output,
		// compact and HTML-escaped, so written inside the envelope as is
		// it gives the bytes json.Marshal of the envelope would, without
		// the second pass json.Marshal makes over a Marshaler's output to
		// check and compact it (TestEncodeRecordTransaction).
		b := t.AppendJSON(append(make([]byte, 0, 2048), `{"data":`...))
		b = append(b, `,"livemode":`...)
		return append(strconv.AppendBool(b, live), "}\n"...), nil
	}
	b, err := json.Marshal(recordEnvelope{Data: v, Livemode: live})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// record answers one record. When the command stored this very response
// with its Idempotency-Key, those bytes are sent, so a replay is the same
// to the byte.
func (s *Server) record(w http.ResponseWriter, r *http.Request, status int, v any) {
	if st, _ := r.Context().Value(ctxIdempotency).(*idemState); st != nil && st.body != nil && st.status == status {
		st.stored = true
		writeBytes(w, status, st.body)
		return
	}
	b, err := encodeRecord(v, principal(r).Mode().Live())
	if err != nil {
		Error(w, r, err)
		return
	}
	writeBytes(w, status, b)
}

// list answers one page of a list.
func (s *Server) list(w http.ResponseWriter, r *http.Request, items any, p xaalis.Pagination) {
	if rv := reflect.ValueOf(items); rv.Kind() == reflect.Slice && rv.IsNil() {
		items = []struct{}{} // an empty page is [], never null
	}
	b, err := encodeList(items, p, principal(r).Mode().Live())
	if err != nil {
		Error(w, r, err)
		return
	}
	writeBytes(w, http.StatusOK, b)
}

// encodeList writes a page as json.Marshal of its listEnvelope would,
// with a newline. A page of transactions, the lists merchants poll,
// writes each record's JSON into the envelope: json.Marshal would
// scan every record's bytes again to check and compact them, which cost
// more than writing them (TestEncodeRecordTransaction).
func encodeList(items any, p xaalis.Pagination, live bool) ([]byte, error) {
	txs, ok := items.([]*xaalis.Transaction)
	if !ok || slices.Contains(txs, nil) {
		b, err := json.Marshal(listEnvelope{Data: items, Pagination: p, Livemode: live})
		return append(b, '\n'), err
	}
	pg, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 1536*len(txs)+len(pg)+64)
	b = append(b, `{"data":[`...)
	for i, t := range txs {
		if i > 0 {
			b = append(b, ',')
		}
		b = t.AppendJSON(b)
	}
	b = append(append(append(b, `],"pagination":`...), pg...), `,"livemode":`...)
	return append(strconv.AppendBool(b, live), "}\n"...), nil
}

// decode reads a JSON object body into v. An empty body is an empty
// object. It returns invalid_request for a body that is not a JSON object
// or that holds a key twice (context.key names it), and validation_error
// for a field of the wrong type or a string the input hygiene rules
// refuse (checkBody: control characters, invalid UTF-8).
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return xaalis.E(xaalis.ERequestTooLarge, "max_bytes", tooBig.Limit)
		}
		return xaalis.Errorf(xaalis.EInvalidRequest, "The request body could not be read.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	// null decodes into a struct as nothing at all; it is not the object
	// every body is.
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return xaalis.Errorf(xaalis.EInvalidRequest, "The body must be a JSON object.")
	}
	// A key given twice is refused rather than read as its last value.
	if k := xaalis.DuplicateKey(body, v); k != "" {
		return xaalis.DuplicateKeyError(k)
	}
	if err := checkBody(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		// Bodies are JSON whatever the Content-Type says (curl -d sends a
		// form type); name the header only when it may explain the failure.
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, perr := mime.ParseMediaType(ct); perr != nil || mt != "application/json" {
				if e, ok := decodeError(err).(*xaalis.Error); ok && e.Code == xaalis.EInvalidRequest {
					return xaalis.Errorf(xaalis.EInvalidRequest, "%s Send JSON with Content-Type: application/json (got %q).", e.Message, ct)
				}
			}
		}
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return xaalis.Errorf(xaalis.EInvalidRequest, "The body holds more than one JSON value.")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return xaalis.Errorf(xaalis.EInvalidRequest, "The body is not valid JSON: %s (at byte %d).", syn.Error(), syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return xaalis.Errorf(xaalis.EInvalidRequest, "The body is not valid JSON: it ends too early.")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return xaalis.Errorf(xaalis.EInvalidRequest, "The body must be a JSON object.")
		}
		v := xaalis.ValidationErrors{}
		v.Add(typ.Field, "must be "+jsonKind(typ.Type))
		return v.Err()
	}
	var fe *xaalis.Error
	if errors.As(err, &fe) {
		return fe
	}
	return xaalis.Errorf(xaalis.EInvalidRequest, "The body could not be decoded: %s.", err.Error())
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "of another type"
}

// pageRequest reads page and per_page. It returns validation_error for
// values that are not integers in range.
func pageRequest(r *http.Request) (xaalis.PageRequest, error) {
	p := xaalis.PageRequest{Page: 1, PerPage: xaalis.DefaultPerPage}
	v := xaalis.ValidationErrors{}
	q := r.URL.Query()
	p.Page = pageNumber(q, v)
	if s := q.Get("per_page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > xaalis.MaxPerPage {
			v.Add("per_page", "must be an integer from 1 to 100")
		}
		p.PerPage = n
	}
	return p, v.Err()
}

// pageNumber reads `page` (1 when absent) and adds its validation message
// to v when it is not an integer from 1 to xaalis.MaxPage.
func pageNumber(q url.Values, v xaalis.ValidationErrors) int {
	s := q.Get("page")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > xaalis.MaxPage {
		v.Add("page", fmt.Sprintf("must be an integer from 1 to %d", xaalis.MaxPage))
	}
	return n
}
