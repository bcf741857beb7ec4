package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// testDurable: Durable returns nil while commands commit beside it, and,
// once every Update has returned, at once: an answered command's commit
// is durable, and so is everything committed before it.
func testDurable(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 32 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			m := &xaalis.Merchant{ID: xaalis.NewUUIDv7(), Name: "Durable", Country: "SN", SettlementCurrency: xaalis.XOF,
				Status: xaalis.MerchantActive, KYC: xaalis.KYCPending, CreatedAt: t0, UpdatedAt: t0}
			errs <- s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateMerchant(ctx, m) })
		}()
		go func() {
			defer wg.Done()
			errs <- s.Durable(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Durable(done); err != nil {
		t.Fatalf("Durable after every command was answered = %v, want nil at once", err)
	}
}
