package xaalis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestReserveLimits: a payment's checks count what the process's other
// payments had reserved in each of its scopes before it, not its own;
// a release takes its amount back once, and an empty scope is forgotten.
func TestReserveLimits(t *testing.T) {
	a := &App{}
	pay := func(phone string, minor int64) *Transaction {
		return &Transaction{Mode: ModeTest, MerchantID: "m1", PayerPhone: phone, LimitAmount: minor}
	}
	merchant := VolumeQuery{Mode: ModeTest, MerchantID: "m1"}.Scope()
	prov := VolumeQuery{Mode: ModeTest, MerchantID: "m1", Provider: "channel_b"}.Scope()
	payer := VolumeQuery{Mode: ModeTest, PayerPhone: "+221770000001"}.Scope()

	ctx1, release1 := a.reserveLimits(context.Background(), pay("+221770000001", 100000), "channel_b")
	if got := inFlightOf(ctx1, merchant); got != 0 {
		t.Fatalf("the first payment counts %d in flight", got)
	}
	ctx2, release2 := a.reserveLimits(context.Background(), pay("+221770000002", 50000), "channel_a")
	if got := inFlightOf(ctx2, merchant); got != 100000 {
		t.Fatalf("the second counts %d of the merchant in flight, want 100000", got)
	}
	if got := inFlightOf(ctx2, prov); got != 0 {
		t.Fatalf("another provider's scope: %d", got)
	}
	release1()
	release1() // once only
	ctx3, release3 := a.reserveLimits(context.Background(), pay("+221770000001", 1000), "channel_b")
	if inFlightOf(ctx3, merchant) != 50000 || inFlightOf(ctx3, payer) != 0 || inFlightOf(ctx3, prov) != 0 {
		t.Fatalf("after a release: merchant %d, payer %d, provider %d", inFlightOf(ctx3, merchant), inFlightOf(ctx3, payer), inFlightOf(ctx3, prov))
	}
	release2()
	release3()
	if n := len(a.inFlight.m); n != 0 {
		t.Fatalf("%d scopes left after every release: %v", n, a.inFlight.m)
	}
}

// BenchmarkReserveLimits is what every payment creation adds for its
// reservation: a lock, three map entries, a context value.
func BenchmarkReserveLimits(b *testing.B) {
	a := &App{}
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := &Transaction{Mode: ModeTest, MerchantID: "m1", PayerPhone: fmt.Sprint("+22177", n.Add(1)), LimitAmount: 100000}
			_, release := a.reserveLimits(context.Background(), t, "channel_a")
			release()
		}
	})
}

// BenchmarkCheckAlone is the first pass of a payment's checks, which
// reads no counter: what every creation adds before it reserves.
func BenchmarkCheckAlone(b *testing.B) {
	a := NewApp(nil)
	m := &Merchant{ID: "m1", Country: "SN", SettlementCurrency: XOF, Status: MerchantActive, KYC: KYCApproved}
	t := &Transaction{Mode: ModeTest, MerchantID: "m1", Country: "SN", Amount: Units(1000, XOF), LimitAmount: 100000,
		PayerPhone: "+221770120001"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.checkAlone(ctx, m, t, "channel_a"); err != nil {
			b.Fatal(err)
		}
	}
}
