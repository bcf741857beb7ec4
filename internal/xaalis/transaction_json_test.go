package xaalis

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// asMarshal fails t unless the record's MarshalJSON gives the bytes
// json.Marshal gives of the same record through reflection, and those
// bytes also through json.Marshal of the transaction (a list's path).
func asMarshal(t testing.TB, x *Transaction) {
	t.Helper()
	want, err := json.Marshal(x.jsonRecord())
	if err != nil {
		t.Fatal(err)
	}
	got, err := x.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, want)
	}
	if via, err := json.Marshal(x); err != nil || !bytes.Equal(via, want) {
		t.Fatalf("json.Marshal of the transaction: %s, %v", via, err)
	}
}

func jsonTestTransaction() *Transaction {
	now := time.Date(2026, 11, 27, 8, 0, 0, 123456789, time.UTC)
	return &Transaction{
		ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", MerchantID: "m", Mode: ModeTest, Type: TypePayment,
		Reference: "TXN-ABCDEF123456", MerchantRef: "order-1", Status: StatusSuccess,
		Amount: Amount{Minor: 150000, Currency: XOF}, Country: "SN", Provider: "channel_a",
		PayerPhone: "+221770000001", CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(30 * time.Minute),
	}
}

func TestTransactionJSONAsMarshal(t *testing.T) {
	settled := Amount{Minor: 2500, Currency: "EUR"}
	cases := map[string]func(x *Transaction){
		"minimal, nulls": func(x *Transaction) {
			x.MerchantRef, x.Provider, x.PayerPhone = "", "", ""
		},
		"every optional field": func(x *Transaction) {
			x.Mode = ModeLive
			x.Route, x.RouteReason = "channel_a", "cheapest"
			x.PaymentURL = "http://localhost:8080/checkout/x"
			x.PayerName, x.CustomerID = "Awa Diop", "cus_1"
			x.Metadata = map[string]string{"z": "last", "a": "first", "order_id": "A-1001", "": "empty key"}
			x.SuccessURL, x.FailedURL, x.CallbackURL = "https://s/ok", "https://s/ko", "https://s/cb"
			x.FailureReason, x.Description, x.ParentID = "insufficient_funds", "a refund", "pay_1"
			x.Fee = Amount{Minor: 5000, Currency: XOF}
			x.ExchangeRate, x.SettlementAmount = "655.957", &settled
		},
		"settlement without a rate": func(x *Transaction) { x.SettlementAmount = &settled },
		"empty metadata":            func(x *Transaction) { x.Metadata = map[string]string{} },
		"next action, redirect": func(x *Transaction) {
			x.NextAction = &NextAction{Type: NextRedirect, RedirectURL: "https://w/a?b=1&c=<2>"}
		},
		"next action, every field": func(x *Transaction) {
			x.NextAction = &NextAction{Type: NextOTP, USSDCode: "#144#", Instructions: "Dial \"#144#\"\n"}
		},
		"next action, type only": func(x *Transaction) { x.NextAction = &NextAction{Type: NextUSSD} },
		"escapes": func(x *Transaction) {
			x.MerchantRef = "a\"b\\c</script>&\u2028\u2029\x00\x01\x1f\x7f\b\f\n\r\t"
			x.Description = "caf\xe9 \xff\xfe é 日本 \U0001F600 \xed\xa0\x80"
			x.Metadata = map[string]string{"<k>": "\u2028", "k\xff": "v\x00"}
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			x := jsonTestTransaction()
			edit(x)
			asMarshal(t, x)
		})
	}
}

// FuzzTransactionJSON holds MarshalJSON to json.Marshal's bytes for any
// strings a merchant or provider may put in a record.
func FuzzTransactionJSON(f *testing.F) {
	f.Add("order-1", "a description", "key", "value", "https://x/?a=1&b=<2>")
	f.Add("\u2028\"\\", "\xff\xfe", "\x00", "\x7f\u2029", "")
	f.Fuzz(func(t *testing.T, ref, desc, k, v, url string) {
		x := jsonTestTransaction()
		x.MerchantRef, x.Description, x.Metadata, x.CallbackURL = ref, desc, map[string]string{k: v, v: k}, url
		x.NextAction = &NextAction{Type: NextOTP, USSDCode: k, Instructions: desc, RedirectURL: url}
		x.Route, x.RouteReason, x.FailureReason, x.PayerName = ref, desc, v, k
		asMarshal(t, x)
	})
}

func BenchmarkTransactionAppendJSON(b *testing.B) {
	x := jsonTestTransaction()
	x.Metadata = map[string]string{"order_id": "A-1001", "cart": "3 items"}
	x.SuccessURL, x.PaymentURL = "https://shop.example/thanks", "http://localhost:8080/checkout/x"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTransactionReflectJSON(b *testing.B) {
	x := jsonTestTransaction()
	x.Metadata = map[string]string{"order_id": "A-1001", "cart": "3 items"}
	x.SuccessURL, x.PaymentURL = "https://shop.example/thanks", "http://localhost:8080/checkout/x"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(x.jsonRecord()); err != nil {
			b.Fatal(err)
		}
	}
}
