// Package webhook verifies and parses the webhooks Xaalis sends.
//
// Every delivery is an HTTP POST with a JSON body and a signature header:
//
//	X-Xaalis-Signature: t=1767225600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// The signature is HMAC-SHA256, keyed with the endpoint's whsec_ secret,
// over the timestamp, a dot and the raw body ("1767225600.{...}"), in
// lowercase hexadecimal. While a secret is being rotated the header carries
// one v1 entry per secret; a delivery is genuine when any of them matches.
// Verify checks the signature (in constant time) and that the timestamp is
// within a tolerance of the current time (DefaultTolerance, 300 s), which
// bounds replays.
//
// Parse reads both payload formats into one Event: the legacy format
// ({"event": "payment.success", "data": {...}}) and the 2026-06-01 format
// (the common payments API's event shape: {"id", "object": "event",
// "type", "created", "livemode", "data": {"object": {...}}}). In both,
// Event.ID (the body's data.id) is the unique event id: deliveries are
// at least once, so a receiver deduplicates on it and answers 2xx at once
// for an event it has already handled. Events of one object carry
// Sequence (1, 2, ...) and Created, so a receiver can order them even
// when a retry makes them arrive out of order.
//
// ConstructEvent does both steps. The package depends on the standard
// library only.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the HTTP header that carries the signature.
const Header = "X-Xaalis-Signature"

// DefaultTolerance is how far the signature's timestamp may be from the
// receiver's clock, either way.
const DefaultTolerance = 300 * time.Second

// Errors of Verify. Every error Verify returns is one of them (possibly
// wrapped: test with errors.Is).
var (
	// ErrNoSignature: the signature header is missing or empty.
	ErrNoSignature = errors.New("webhook: no signature header")
	// ErrBadHeader: the header is not t=<unix>,v1=<hex>[,v1=<hex>...].
	ErrBadHeader = errors.New("webhook: malformed signature header")
	// ErrTimestamp: the timestamp is further from now than the tolerance.
	ErrTimestamp = errors.New("webhook: signature timestamp outside the tolerance")
	// ErrMismatch: no v1 entry is the signature of this body with this
	// secret.
	ErrMismatch = errors.New("webhook: signature does not match")
)

// maxHeader bounds the work spent on a hostile header.
const maxHeader = 8 << 10

// signedHeader is a parsed signature header.
type signedHeader struct {
	t    int64
	sigs [][]byte
}

// parseHeader reads t=<unix>,v1=<hex>[,v1=<hex>...]. Entries of other
// schemes (v0=, ...) are skipped, as are v1 entries that are not 64
// hexadecimal characters: a later scheme may add them. Exactly one t is
// required, and at least one well-formed v1.
func parseHeader(header string) (*signedHeader, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return nil, ErrNoSignature
	}
	if len(header) > maxHeader {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadHeader, maxHeader)
	}
	h := &signedHeader{t: -1}
	seenT := false
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%w: entry %q is not key=value", ErrBadHeader, truncate(part))
		}
		switch strings.TrimSpace(k) {
		case "t":
			if seenT {
				return nil, fmt.Errorf("%w: more than one t", ErrBadHeader)
			}
			seenT = true
			t, err := parseUnix(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%w: t is not a unix time", ErrBadHeader)
			}
			h.t = t
		case "v1":
			v = strings.TrimSpace(v)
			if len(v) != 2*sha256.Size {
				continue
			}
			sig, err := hex.DecodeString(v)
			if err != nil {
				continue
			}
			h.sigs = append(h.sigs, sig)
		}
	}
	if !seenT {
		return nil, fmt.Errorf("%w: no t", ErrBadHeader)
	}
	if len(h.sigs) == 0 {
		return nil, fmt.Errorf("%w: no v1 signature", ErrBadHeader)
	}
	return h, nil
}

// parseUnix reads a non-negative decimal number of seconds.
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > 12 {
		return 0, errors.New("bad")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("bad")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// mac is the v1 signature of payload at t with secret.
func mac(payload []byte, secret string, t int64) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, t, 10))
	m.Write([]byte{'.'})
	m.Write(payload)
	return m.Sum(nil)
}

// Verify checks a signature header against the raw request body: one of
// its v1 entries must be the HMAC-SHA256 of "<t>.<payload>" keyed with
// secret (compared in constant time, every entry), and |now - t| must be
// at most tolerance (DefaultTolerance when tolerance is 0 or less).
//
// payload must be the body exactly as received, before any JSON parsing.
func Verify(payload []byte, header, secret string, now time.Time, tolerance time.Duration) error {
	h, err := parseHeader(header)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(h.t, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	if secret == "" {
		return fmt.Errorf("%w: empty secret", ErrMismatch)
	}
	want := mac(payload, secret, h.t)
	ok := 0
	for _, sig := range h.sigs {
		// Every entry is compared, so the time taken does not say which
		// one matched.
		ok |= subtleEqual(want, sig)
	}
	if ok == 0 {
		return ErrMismatch
	}
	return nil
}

func subtleEqual(a, b []byte) int {
	if hmac.Equal(a, b) {
		return 1
	}
	return 0
}

// Sign returns the signature header value of payload at t: one v1 entry
// per secret, in order. Xaalis signs with it; it is exported so that a
// receiver's tests can sign their own fixtures.
func Sign(payload []byte, secrets []string, t time.Time) string {
	var b strings.Builder
	ts := t.Unix()
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(ts, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(payload, s, ts)))
	}
	return b.String()
}

// Event is a delivered event, whichever payload format carried it.
type Event struct {
	// ID is the unique event id (the body's data.id, and its id in the
	// 2026-06-01 format): deduplicate on it.
	ID string
	// Type is the event type: payment.success, payout.failed, ...
	Type string
	// Created is when the event happened (second precision).
	Created time.Time
	// Livemode is false for events of test mode.
	Livemode bool
	// Sequence numbers the events of one object (a transaction, ...) from
	// 1: a higher number is a later state.
	Sequence int64
	// Data is the record. In the 2026-06-01 format it is data.object, the
	// record as the API answers it. In the legacy format it is the data
	// object as sent: the record's fields, with id the event id and the
	// record's own id under <object>_id (transaction_id, ...).
	Data json.RawMessage
	// MerchantReference is the merchant's reference of the record
	// (merchant_reference, else merchant_ref, else metadata.order_id); ""
	// when it has none.
	MerchantReference string
	// Raw is the whole body.
	Raw json.RawMessage
}

// Parse reads a webhook body of either format. It does not verify the
// signature: use ConstructEvent, or Verify first.
func Parse(payload []byte) (*Event, error) {
	var top struct {
		ID       string          `json:"id"`
		Object   string          `json:"object"`
		Type     string          `json:"type"`
		Event    string          `json:"event"`
		Created  *int64          `json:"created"`
		Livemode bool            `json:"livemode"`
		Sequence int64           `json:"sequence"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(payload, &top); err != nil {
		return nil, fmt.Errorf("webhook: body is not a JSON event: %w", err)
	}
	if len(top.Data) == 0 || bytes.Equal(top.Data, []byte("null")) {
		return nil, errors.New("webhook: body has no data")
	}
	ev := &Event{Raw: json.RawMessage(payload)}
	switch {
	case top.Object == "event" && top.Type != "":
		// 2026-06-01: data = {id, merchant_reference, object: record}.
		var data struct {
			ID                string          `json:"id"`
			MerchantReference *string         `json:"merchant_reference"`
			Object            json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(top.Data, &data); err != nil {
			return nil, fmt.Errorf("webhook: data is not an object: %w", err)
		}
		ev.ID, ev.Type, ev.Livemode, ev.Sequence = top.ID, top.Type, top.Livemode, top.Sequence
		if ev.ID == "" {
			ev.ID = data.ID
		}
		if top.Created != nil {
			ev.Created = time.Unix(*top.Created, 0)
		}
		ev.Data = data.Object
		if data.MerchantReference != nil {
			ev.MerchantReference = *data.MerchantReference
		}
	case top.Event != "":
		// legacy: data = the record with the event's fields.
		var data struct {
			ID       string `json:"id"`
			Livemode bool   `json:"livemode"`
			Sequence int64  `json:"sequence"`
			Created  *int64 `json:"created"`
		}
		if err := json.Unmarshal(top.Data, &data); err != nil {
			return nil, fmt.Errorf("webhook: data is not an object: %w", err)
		}
		ev.ID, ev.Type, ev.Livemode, ev.Sequence = data.ID, top.Event, data.Livemode, data.Sequence
		if data.Created != nil {
			ev.Created = time.Unix(*data.Created, 0)
		}
		ev.Data = top.Data
	default:
		return nil, errors.New("webhook: body is neither a legacy nor a 2026-06-01 event")
	}
	if ev.ID == "" {
		return nil, errors.New("webhook: event has no id")
	}
	if ev.MerchantReference == "" {
		ev.MerchantReference = merchantReference(ev.Data)
	}
	return ev, nil
}

// merchantReference reads merchant_reference, merchant_ref, then
// metadata.order_id from a record.
func merchantReference(record json.RawMessage) string {
	var r map[string]json.RawMessage
	if json.Unmarshal(record, &r) != nil {
		return ""
	}
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	if s := str(r["merchant_reference"]); s != "" {
		return s
	}
	if s := str(r["merchant_ref"]); s != "" {
		return s
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(r["metadata"], &md) == nil {
		return str(md["order_id"])
	}
	return ""
}

// ConstructEvent verifies a delivery against the current time with
// DefaultTolerance, then parses it. header is the X-Xaalis-Signature
// value and payload the raw body.
func ConstructEvent(payload []byte, header, secret string) (*Event, error) {
	if err := Verify(payload, header, secret, time.Now(), DefaultTolerance); err != nil {
		return nil, err
	}
	return Parse(payload)
}
