package xaalis_test

// Micro-benchmarks of functions every API request runs: the idempotency
// fingerprint, the transaction record's JSON, phone parsing by form (the
// mixed BenchmarkParsePhone is in phone_test.go), and the TXN-
// reference. Speed is measured here, never asserted: see BENCHMARKS.md
// (`go test -run '^$' -bench . ./internal/xaalis`).

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const benchBody = `{"merchant_ref":"b1a2-create-payment-1234","amount":1000,"provider":"channel_a",` +
	`"payer":{"phone":"+221770120001","name":"Awa Diop"},"success_url":"https://shop.example/thanks",` +
	`"failed_url":"https://shop.example/sorry","metadata":{"order_id":"b1a2-create-payment-1234"}}`

func BenchmarkFingerprint(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"payment-270B", []byte(benchBody)},
		{"64KiB", []byte(strings.Repeat("x", 64<<10))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = xaalis.Fingerprint("POST", "/v1/payments", "", c.body)
			}
		})
	}
}

func benchTransaction() *xaalis.Transaction {
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	return &xaalis.Transaction{
		ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", MerchantID: "0192f3a4-0000-7d8e-9fa0-b1c2d3e4f506",
		Mode: xaalis.ModeTest, Type: xaalis.TypePayment, Reference: "TXN-23456789ABCDEFGH", MerchantRef: "ORDER-42",
		Status: xaalis.StatusPending, Amount: xaalis.Amount{Minor: 500000, Currency: xaalis.XOF}, Country: "SN",
		Provider: "channel_a", Route: "simulator", RouteReason: "test mode", ProviderRef: "sim_a_0123456789",
		NextAction: &xaalis.NextAction{Type: xaalis.NextRedirect, RedirectURL: "https://wallet.channel-a.example/pay/sim_a_0123456789",
			Instructions: "Open the link to approve the payment in your wallet app."},
		PayerPhone: "+221770000001", PayerName: "Awa Diop", CustomerID: "0192f3a4-1111-7d8e-9fa0-b1c2d3e4f506",
		SuccessURL: "https://shop.example/thanks", FailedURL: "https://shop.example/sorry",
		Metadata: map[string]string{"order_id": "A-1001", "cart": "3 items"},
		Fee:      xaalis.Amount{Minor: 5000, Currency: xaalis.XOF}, ExpiresAt: now.Add(30 * time.Minute),
		CreatedAt: now, UpdatedAt: now, PaymentURL: "http://localhost:8080/checkout/0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506",
	}
}

func BenchmarkTransactionJSON(b *testing.B) {
	t := benchTransaction()
	out, err := json.Marshal(t)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(t); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePhoneByForm(b *testing.B) {
	for _, c := range []struct {
		name, raw string
		country   xaalis.Country
	}{
		{"SN-E164", "+221771234567", "SN"},
		{"SN-national-spaced", "77 123 45 67", "SN"},
		{"CI-10-digit", "+2250700000001", "CI"},
		{"BJ-old-plan-refused", "+22997000001", "BJ"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = xaalis.ParsePhone(c.raw, c.country)
			}
		})
	}
}

func BenchmarkNewReference(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = xaalis.NewReference()
	}
}
