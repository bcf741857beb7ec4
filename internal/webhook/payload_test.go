package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84"
	stripewebhook "github.com/stripe/stripe-go/v84/webhook"

	"github.com/xaalis/xaalis/internal/xaalis"
	pw "github.com/xaalis/xaalis/pkg/webhook"
)

const (
	eventID = "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506"
	txID    = "0192f3a4-0000-7000-8000-000000000001"
)

// testEvent is a payment.success event of a live payment with a
// merchant_ref and metadata.order_id, its record rendered by the domain.
func testEvent(t testing.TB, live bool, ref string) *xaalis.Event {
	t.Helper()
	mode := xaalis.ModeTest
	if live {
		mode = xaalis.ModeLive
	}
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tx := &xaalis.Transaction{
		ID: txID, MerchantID: "m1", Mode: mode, Type: xaalis.TypePayment, Reference: "TXN-23456789ABCDEFGH",
		MerchantRef: ref, Status: xaalis.StatusSuccess, Amount: xaalis.Units(5000, xaalis.XOF), Country: "SN",
		Provider: "channel_a", Metadata: map[string]string{"order_id": "A-1001"},
		ExpiresAt: created.Add(time.Hour), CreatedAt: created, UpdatedAt: created.Add(time.Minute),
	}
	data, err := json.Marshal(tx)
	if err != nil {
		t.Fatal(err)
	}
	return &xaalis.Event{ID: eventID, MerchantID: "m1", Mode: mode, Type: xaalis.EventPaymentSuccess,
		ObjectType: "transaction", ObjectID: txID, Seq: 2, Data: data, CreatedAt: created.Add(time.Minute)}
}

func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("payload %s: %v", b, err)
	}
	return m
}

func TestPayloadLegacy(t *testing.T) {
	ev := testEvent(t, false, "ORDER-42")
	b, err := Payload(xaalis.FormatLegacy, ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("legacy: %s", b)
	m := decode(t, b)
	if len(m) != 2 || m["event"] != "payment.success" {
		t.Fatalf("top level = %v", m)
	}
	data := m["data"].(map[string]any)
	want := map[string]any{
		"id": eventID, "transaction_id": txID, "event_type": "payment.success", "merchant_reference": "ORDER-42",
		"merchant_ref": "ORDER-42", "sequence": 2.0, "created": float64(ev.CreatedAt.Unix()), "livemode": false,
		"object": "transaction", "status": "success", "amount": "5000.00", "reference": "TXN-23456789ABCDEFGH",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("data.%s = %v, want %v", k, data[k], v)
		}
	}
	if md := data["metadata"].(map[string]any); md["order_id"] != "A-1001" {
		t.Errorf("metadata = %v", md)
	}
	// Everything else of the record is there.
	for k := range decode(t, ev.Data) {
		if _, ok := data[k]; !ok {
			t.Errorf("record field %s missing", k)
		}
	}
}

func TestPayload20260601(t *testing.T) {
	ev := testEvent(t, true, "ORDER-42")
	b, err := Payload(xaalis.Format20260601, ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2026-06-01: %s", b)
	if !strings.HasPrefix(string(b), `{"id":"`+eventID+`","object":"event","type":"payment.success","api_version":"2026-06-01",`) {
		t.Fatalf("payload = %s", b)
	}
	m := decode(t, b)
	for k, v := range map[string]any{"id": eventID, "object": "event", "type": "payment.success",
		"api_version": "2026-06-01", "created": float64(ev.CreatedAt.Unix()), "livemode": true,
		"pending_webhooks": 1.0, "sequence": 2.0} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if r := m["request"].(map[string]any); len(r) != 2 || r["id"] != nil || r["idempotency_key"] != nil {
		t.Errorf("request = %v", r)
	}
	data := m["data"].(map[string]any)
	if data["id"] != eventID || data["merchant_reference"] != "ORDER-42" || len(data) != 3 {
		t.Errorf("data = %v", data)
	}
	// data.object is the record, unchanged.
	var gotRecord, wantRecord any
	raw := decode(t, b)["data"].(map[string]any)["object"]
	gotRecord = raw
	json.Unmarshal(ev.Data, &wantRecord)
	gb, _ := json.Marshal(gotRecord)
	wb, _ := json.Marshal(wantRecord)
	if string(gb) != string(wb) {
		t.Errorf("record changed:\n got %s\nwant %s", gb, wb)
	}
}

func TestPayloadWithoutMerchantRef(t *testing.T) {
	ev := testEvent(t, false, "")
	for _, f := range []xaalis.PayloadFormat{xaalis.FormatLegacy, xaalis.Format20260601} {
		b, err := Payload(f, ev)
		if err != nil {
			t.Fatal(err)
		}
		data := decode(t, b)["data"].(map[string]any)
		v, ok := data["merchant_reference"]
		if !ok || v != nil {
			t.Errorf("%s: merchant_reference = %v (present %v), want null", f, v, ok)
		}
		if !strings.Contains(string(b), `"merchant_reference":null`) {
			t.Errorf("%s: %s", f, b)
		}
	}
}

func TestPayloadRecordWithoutRefFields(t *testing.T) {
	ev := &xaalis.Event{ID: eventID, Mode: xaalis.ModeLive, Type: "dispute.opened", ObjectType: "dispute",
		ObjectID: "dp_1", Seq: 1, Data: json.RawMessage(`{"id":"dp_1","object":"dispute","merchant_ref":"R9"}`),
		CreatedAt: time.Unix(1767225600, 0)}
	b, err := Payload(xaalis.FormatLegacy, ev)
	if err != nil {
		t.Fatal(err)
	}
	data := decode(t, b)["data"].(map[string]any)
	if data["dispute_id"] != "dp_1" || data["id"] != eventID || data["merchant_reference"] != "R9" ||
		data["livemode"] != true {
		t.Fatalf("data = %v", data)
	}
	for _, bad := range []json.RawMessage{json.RawMessage(`[1]`), json.RawMessage(`"x"`)} {
		ev.Data = bad
		if _, err := Payload(xaalis.FormatLegacy, ev); err == nil {
			t.Errorf("record %s accepted", bad)
		}
	}
	ev.Data = json.RawMessage(`{}`)
	if _, err := Payload("1999-01-01", ev); err == nil {
		t.Error("unknown format accepted")
	}
}

// The 2026-06-01 body, signed by pkg/webhook.Sign, verifies and parses
// with stripe-go's webhook package as it is.
func TestStripeGoAcceptsFormat20260601(t *testing.T) {
	ev := testEvent(t, true, "ORDER-42")
	body, err := Payload(xaalis.Format20260601, ev)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, header, secret string) {
		t.Helper()
		se, err := stripewebhook.ConstructEventWithOptions(body, header, secret,
			stripewebhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		if err != nil {
			t.Fatalf("stripe-go refused the delivery: %v", err)
		}
		if se.ID != eventID || se.Type != stripe.EventType("payment.success") || !se.Livemode ||
			se.Created != ev.CreatedAt.Unix() || se.Object != "event" || se.APIVersion != "2026-06-01" {
			t.Fatalf("stripe event = %+v", se)
		}
		if se.Data == nil || se.Data.Object["merchant_ref"] != "ORDER-42" || se.Data.Object["id"] != txID {
			t.Fatalf("stripe event data = %+v", se.Data)
		}
		if se.GetObjectValue("metadata", "order_id") != "A-1001" {
			t.Fatalf("metadata.order_id = %q", se.GetObjectValue("metadata", "order_id"))
		}
	}
	t.Run("OneSecret", func(t *testing.T) {
		secret := NewSecret()
		check(t, pw.Sign(body, []string{secret}, time.Now()), secret)
		if _, err := stripewebhook.ConstructEventWithOptions(body, pw.Sign(body, []string{secret}, time.Now()),
			NewSecret(), stripewebhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}); err == nil {
			t.Fatal("stripe-go accepted a wrong secret")
		}
	})
	t.Run("RotationEitherSecret", func(t *testing.T) {
		current, previous := NewSecret(), NewSecret()
		header := pw.Sign(body, []string{current, previous}, time.Now())
		if strings.Count(header, "v1=") != 2 {
			t.Fatalf("header %s", header)
		}
		check(t, header, current)
		check(t, header, previous)
	})
}

// Both formats verify and parse with the merchants' package.
func TestPublicPackageAcceptsBothFormats(t *testing.T) {
	for _, f := range []xaalis.PayloadFormat{xaalis.FormatLegacy, xaalis.Format20260601} {
		t.Run(string(f), func(t *testing.T) {
			ev := testEvent(t, f == xaalis.Format20260601, "ORDER-42")
			body, err := Payload(f, ev)
			if err != nil {
				t.Fatal(err)
			}
			old, cur := NewSecret(), NewSecret()
			header := pw.Sign(body, []string{cur, old}, time.Now())
			for _, secret := range []string{cur, old} {
				got, err := pw.ConstructEvent(body, header, secret)
				if err != nil {
					t.Fatal(err)
				}
				if got.ID != eventID || got.Type != ev.Type || got.Sequence != 2 ||
					!got.Created.Equal(ev.CreatedAt) || got.MerchantReference != "ORDER-42" ||
					got.Livemode != ev.Mode.Live() {
					t.Fatalf("event = %+v", got)
				}
				rec := decode(t, got.Data)
				if rec["status"] != "success" || rec["merchant_ref"] != "ORDER-42" {
					t.Fatalf("record = %v", rec)
				}
			}
			if _, err := pw.ConstructEvent(body, header, NewSecret()); err == nil {
				t.Fatal("wrong secret accepted")
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s := NewSecret()
		if len(s) != len("whsec_")+32 || !strings.HasPrefix(s, "whsec_") {
			t.Fatalf("secret %q", s)
		}
		for _, c := range s[6:] {
			if !strings.ContainsRune(base62, c) {
				t.Fatalf("secret %q has %q", s, c)
			}
		}
		if seen[s] {
			t.Fatal("repeated secret")
		}
		seen[s] = true
	}
}
