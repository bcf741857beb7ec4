package http

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestEncodeRecordTransaction: the envelope encodeRecord splices around a
// transaction's own JSON is, to the byte, what json.Marshal of the
// envelope writes. The stored answer of a payment and its replays are
// these bytes, so a difference (an escape, a space, a field's order)
// would show in no test of the API but in clients comparing answers.
func TestEncodeRecordTransaction(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	settle := xaalis.Amount{Minor: 1525, Currency: "EUR"}
	full := &xaalis.Transaction{
		ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", MerchantID: "m", Mode: xaalis.ModeLive, Type: xaalis.TypePayment,
		Reference: "TXN-23456789ABCDEFGH", MerchantRef: "<order & co>", Status: xaalis.StatusPending,
		Amount: xaalis.Amount{Minor: 1000, Currency: xaalis.XOF}, Country: "SN", Provider: "channel_a",
		Route: "simulator", RouteReason: "test mode", PayerPhone: "+221770000001",
		// HTML characters, the two separators JavaScript reads as line
		// ends, a quote, a backslash and a control character: what
		// json.Marshal escapes.
		PayerName: "Awa \"Diop\" <b>\u2028\u2029\\\x01 é",
		Metadata:  map[string]string{"z": "last", "a": "<script>", "m": "&amp;"},
		NextAction: &xaalis.NextAction{Type: xaalis.NextRedirect, RedirectURL: "https://pay.example/?a=1&b=<2>",
			Instructions: "Ouvrez le lien"},
		Fee: xaalis.Amount{Minor: 10, Currency: xaalis.XOF}, ExchangeRate: "655.957", SettlementAmount: &settle,
		ParentID: "p", Description: "line\nbreak", PaymentURL: "http://localhost/checkout/x",
		ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now,
	}
	for _, c := range []struct {
		name string
		tx   *xaalis.Transaction
		live bool
	}{
		{"every field", full, true},
		{"every field, test mode", full, false},
		{"the fewest fields", &xaalis.Transaction{ID: "x", Type: xaalis.TypePayout, Status: xaalis.StatusFailed}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := encodeRecord(c.tx, c.live)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(recordEnvelope{Data: c.tx, Livemode: c.live})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			if !bytes.Equal(got, want) {
				t.Fatalf("encodeRecord:\n%s\njson.Marshal of the envelope:\n%s", got, want)
			}
			// And the event's data, the transaction's MarshalJSON, is what
			// json.Marshal makes of the transaction.
			own, err := c.tx.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if std, _ := json.Marshal(c.tx); !bytes.Equal(own, std) {
				t.Fatalf("MarshalJSON:\n%s\njson.Marshal:\n%s", own, std)
			}
		})
	}
	// A page of transactions, written by encodeList around each record's
	// own JSON, is json.Marshal's envelope to the byte; so are the pages
	// it leaves to json.Marshal.
	pg := xaalis.NewPagination(xaalis.PageRequest{Page: 2, PerPage: 3}, 7)
	for name, items := range map[string]any{
		"transactions":        []*xaalis.Transaction{full, {ID: "x", Type: xaalis.TypePayout, Status: xaalis.StatusFailed}, full},
		"one transaction":     []*xaalis.Transaction{full},
		"no transaction":      []*xaalis.Transaction{},
		"a nil transaction":   []*xaalis.Transaction{full, nil},
		"other records":       []*xaalis.Customer{{ID: "cus_1", Phone: "+221770000001", Name: "<Awa>"}},
		"no record of a kind": []struct{}{},
	} {
		for _, live := range []bool{false, true} {
			got, err := encodeList(items, pg, live)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(listEnvelope{Data: items, Pagination: pg, Livemode: live})
			if err != nil {
				t.Fatal(err)
			}
			if want = append(want, '\n'); !bytes.Equal(got, want) {
				t.Fatalf("%s: encodeList:\n%s\njson.Marshal of the envelope:\n%s", name, got, want)
			}
		}
	}
	// A nil transaction takes json.Marshal's way: "data": null.
	got, err := encodeRecord((*xaalis.Transaction)(nil), false)
	if err != nil || string(got) != "{\"data\":null,\"livemode\":false}\n" {
		t.Fatalf("nil transaction: %q, %v", got, err)
	}
}
