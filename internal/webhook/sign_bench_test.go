package webhook_test

// Micro-benchmarks of the delivery hot path: signing a body (pkg/webhook,
// as the dispatcher and receivers do) and rendering an event in both
// payload formats. Speed is measured here, never asserted: see
// BENCHMARKS.md (`go test -run '^$' -bench . ./internal/webhook`).

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
	pw "github.com/xaalis/xaalis/pkg/webhook"
)

func benchEvent(b *testing.B) *xaalis.Event {
	b.Helper()
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	t := &xaalis.Transaction{
		ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", MerchantID: "0192f3a4-0000-7d8e-9fa0-b1c2d3e4f506",
		Mode: xaalis.ModeTest, Type: xaalis.TypePayment, Reference: "TXN-23456789ABCDEFGH", MerchantRef: "ORDER-42",
		Status: xaalis.StatusSuccess, Amount: xaalis.Amount{Minor: 500000, Currency: xaalis.XOF}, Country: "SN",
		Provider: "channel_a", Route: "simulator", RouteReason: "test mode", ProviderRef: "sim_a_0123456789",
		PayerPhone: "+221770000001", PayerName: "Awa Diop", SuccessURL: "https://shop.example/thanks",
		FailedURL: "https://shop.example/sorry", Metadata: map[string]string{"order_id": "A-1001"},
		Fee: xaalis.Amount{Minor: 5000, Currency: xaalis.XOF}, ExpiresAt: now.Add(30 * time.Minute), CreatedAt: now, UpdatedAt: now,
	}
	data, err := json.Marshal(t)
	if err != nil {
		b.Fatal(err)
	}
	return &xaalis.Event{ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f999", MerchantID: t.MerchantID, Mode: t.Mode,
		Type: xaalis.EventPaymentSuccess, ObjectType: "transaction", ObjectID: t.ID, Seq: 2, Data: data, CreatedAt: now}
}

func BenchmarkSign(b *testing.B) {
	body, err := webhook.Payload(xaalis.Format20260601, benchEvent(b))
	if err != nil {
		b.Fatal(err)
	}
	at := time.Unix(1780315260, 0)
	for _, c := range []struct {
		name    string
		secrets []string
	}{
		{"one-secret", []string{"whsec_0123456789abcdefghijklmnopqrstuv"}},
		{"rotation-two-secrets", []string{"whsec_0123456789abcdefghijklmnopqrstuv", "whsec_vutsrqponmlkjihgfedcba9876543210"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = pw.Sign(body, c.secrets, at)
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	body, err := webhook.Payload(xaalis.Format20260601, benchEvent(b))
	if err != nil {
		b.Fatal(err)
	}
	const secret = "whsec_0123456789abcdefghijklmnopqrstuv"
	now := time.Now()
	header := pw.Sign(body, []string{secret}, now)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := pw.Verify(body, header, secret, now, pw.DefaultTolerance); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPayload(b *testing.B) {
	ev := benchEvent(b)
	for _, f := range []xaalis.PayloadFormat{xaalis.Format20260601, xaalis.FormatLegacy} {
		b.Run(string(f), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := webhook.Payload(f, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
