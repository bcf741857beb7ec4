package http

// Micro-benchmarks of the request and answer coding every payment
// creation goes through: decoding the body and encoding the record
// envelope (what the idempotency store keeps, byte for byte). Speed is
// measured here, never asserted: see BENCHMARKS.md.

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const benchPaymentBody = `{"merchant_ref":"b1a2-create-payment-1234","amount":1000,"provider":"channel_a",` +
	`"payer":{"phone":"+221770120001","name":"Awa Diop"},"success_url":"https://shop.example/thanks",` +
	`"failed_url":"https://shop.example/sorry","metadata":{"order_id":"b1a2-create-payment-1234"}}`

func BenchmarkDecodePaymentInput(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(benchPaymentBody))
		var in xaalis.PaymentInput
		if err := decode(r, &in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	t := &xaalis.Transaction{
		ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", MerchantID: "0192f3a4-0000-7d8e-9fa0-b1c2d3e4f506",
		Mode: xaalis.ModeTest, Type: xaalis.TypePayment, Reference: "TXN-23456789ABCDEFGH", MerchantRef: "ORDER-42",
		Status: xaalis.StatusSuccess, Amount: xaalis.Amount{Minor: 500000, Currency: xaalis.XOF}, Country: "SN",
		Provider: "channel_a", Route: "simulator", RouteReason: "test mode", PayerPhone: "+221770000001",
		PayerName: "Awa Diop", SuccessURL: "https://shop.example/thanks", FailedURL: "https://shop.example/sorry",
		Metadata: map[string]string{"order_id": "A-1001"}, Fee: xaalis.Amount{Minor: 5000, Currency: xaalis.XOF},
		ExpiresAt: now.Add(30 * time.Minute), CreatedAt: now, UpdatedAt: now,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRecord(t, false); err != nil {
			b.Fatal(err)
		}
	}
}
