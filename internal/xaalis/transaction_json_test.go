package xaalis

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// transactionJSON is the record as json.Marshal rendered it before
// AppendJSON: the reference AppendJSON must equal.
type transactionJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Type               TxType            `json:"type"`
	Reference          string            `json:"reference"`
	MerchantRef        *string           `json:"merchant_ref"`
	MerchantReference  *string           `json:"merchant_reference"`
	Status             Status            `json:"status"`
	Amount             string            `json:"amount"`
	Currency           Currency          `json:"currency"`
	Country            Country           `json:"country"`
	Provider           *string           `json:"provider"`
	Route              *RouteInfo        `json:"route"`
	PaymentURL         *string           `json:"payment_url"`
	CheckoutURL        *string           `json:"checkout_url"`
	NextAction         *NextAction       `json:"next_action"`
	Payer              Payer             `json:"payer"`
	CustomerID         *string           `json:"customer_id"`
	Metadata           map[string]string `json:"metadata"`
	SuccessURL         *string           `json:"success_url"`
	FailedURL          *string           `json:"failed_url"`
	CallbackURL        *string           `json:"callback_url"`
	FailureReason      *string           `json:"failure_reason"`
	FeeAmount          *string           `json:"fee_amount"`
	PaymentID          *string           `json:"payment_id"`
	Description        *string           `json:"description"`
	ExchangeRate       *string           `json:"exchange_rate,omitempty"`
	SettlementAmount   *string           `json:"settlement_amount,omitempty"`
	SettlementCurrency *Currency         `json:"settlement_currency,omitempty"`
	Livemode           bool              `json:"livemode"`
	ExpiresAt          string            `json:"expires_at"`
	CreatedAt          string            `json:"created_at"`
	UpdatedAt          string            `json:"updated_at"`
}

// Payer is the payer block of transactionJSON.
type Payer struct {
	Phone *string `json:"phone"`
	Name  *string `json:"name"`
}

// RouteInfo is the route block of transactionJSON.
type RouteInfo struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// jsonRecord fills transactionJSON as MarshalJSON did.
func (t *Transaction) jsonRecord() transactionJSON {
	md := t.Metadata
	if md == nil {
		md = map[string]string{}
	}
	j := transactionJSON{
		ID: t.ID, Object: "transaction", Type: t.Type, Reference: t.Reference,
		MerchantRef: strPtr(t.MerchantRef), MerchantReference: strPtr(t.MerchantRef),
		Status: t.Status, Amount: t.Amount.Decimal(), Currency: t.Amount.Currency, Country: t.Country,
		Provider: strPtr(t.Provider), PaymentURL: strPtr(t.PaymentURL), CheckoutURL: strPtr(t.PaymentURL),
		NextAction: t.NextAction, Payer: Payer{Phone: strPtr(t.PayerPhone), Name: strPtr(t.PayerName)},
		CustomerID: strPtr(t.CustomerID), Metadata: md, SuccessURL: strPtr(t.SuccessURL),
		FailedURL: strPtr(t.FailedURL), CallbackURL: strPtr(t.CallbackURL), FailureReason: strPtr(t.FailureReason),
		Livemode: t.Mode.Live(), ExpiresAt: Timestamp(t.ExpiresAt), CreatedAt: Timestamp(t.CreatedAt),
		UpdatedAt: Timestamp(t.UpdatedAt),
	}
	if t.Route != "" {
		j.Route = &RouteInfo{Name: t.Route, Reason: t.RouteReason}
	}
	if t.Fee.Currency != "" {
		j.FeeAmount = strPtr(t.Fee.Decimal())
	}
	j.PaymentID, j.Description = strPtr(t.ParentID), strPtr(t.Description)
	if t.SettlementAmount != nil {
		j.ExchangeRate = strPtr(t.ExchangeRate)
		j.SettlementAmount = strPtr(t.SettlementAmount.Decimal())
		j.SettlementCurrency = &t.SettlementAmount.Currency
	}
	return j
}

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

// benchJSONTransaction is a payment's record as create-payment answers it.
func benchJSONTransaction() *Transaction {
	x := jsonTestTransaction()
	x.Metadata = map[string]string{"order_id": "A-1001", "cart": "3 items"}
	x.SuccessURL, x.PaymentURL = "https://shop.example/thanks", "http://localhost:8080/checkout/x"
	return x
}

func BenchmarkTransactionAppendJSON(b *testing.B) {
	x := benchJSONTransaction()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransactionReflectJSON is what AppendJSON replaced: json.Marshal
// of the reflected record.
func BenchmarkTransactionReflectJSON(b *testing.B) {
	x := benchJSONTransaction()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(x.jsonRecord()); err != nil {
			b.Fatal(err)
		}
	}
}
