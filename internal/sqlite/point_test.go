package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestPointReadsIgnoreCancel: the reads every request makes through an
// index (the key, a payment's volumes, a lookup by id or reference) run
// to their answer even when the request's context has ended, so that the
// driver does not watch the context with a goroutine of its own; a list,
// whose page may skip many rows, still stops at the request's end (its
// count, from a few rows of counters, does not).
func TestPointReadsIgnoreCancel(t *testing.T) {
	s := openTemp(t)
	m := storetest.NewMerchant(t, s)
	x := storetest.NewPayment(m, xaalis.ModeTest, "order-1", time.Now())
	if err := s.Update(context.Background(), func(tx xaalis.Tx) error { return tx.InsertTransaction(context.Background(), x) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if _, _, _, err := s.KeyByHash(ctx, []byte("no such key"), "k"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Errorf("KeyByHash after the request's end: %v, want not_found from the read", err)
	}
	q := xaalis.VolumeQuery{Mode: xaalis.ModeTest, MerchantID: m.ID, Since: time.Now(), HoldSince: time.Now()}
	if _, err := s.Volumes(ctx, []xaalis.VolumeQuery{q, q}); err != nil {
		t.Errorf("Volumes after the request's end: %v", err)
	}
	if _, err := s.Volume(ctx, q); err != nil {
		t.Errorf("Volume after the request's end: %v", err)
	}
	if list, err := s.LookupTransactions(ctx, m.ID, x.Reference); err != nil || len(list) != 1 {
		t.Errorf("LookupTransactions after the request's end: %d records, %v", len(list), err)
	}
	f := xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.TypePayment}
	if _, _, err := s.Transactions(ctx, f, xaalis.PageRequest{Page: 1, PerPage: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("Transactions after the request's end: %v, want context.Canceled", err)
	}
}
