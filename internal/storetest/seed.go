package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// testSeedPayments: payments seeded in bulk read back as payments that
// succeeded through the API (list, count, lookups by id and reference,
// their event, entry, customer), the balances, volume and stat counters
// hold their sums, the ledger check finds nothing, and a payment written
// the ordinary way afterwards adds up with them.
func testSeedPayments(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	seeder, ok := s.(xaalis.BulkSeeder)
	if !ok {
		t.Skip("the store is no BulkSeeder")
	}
	m := NewMerchant(t, s)
	from, to := t0.AddDate(0, 0, -10), t0
	spec := xaalis.SeedSpec{MerchantID: m.ID, Mode: xaalis.ModeTest, N: 2000, Amount: xaalis.Units(1000, xaalis.XOF),
		Fee: xaalis.Units(10, xaalis.XOF), Provider: "channel_a", Country: "SN", From: from, To: to, Sample: 50,
		BaseURL: "https://pay.example"}

	for name, bad := range map[string]func(*xaalis.SeedSpec){
		"N=0":              func(s *xaalis.SeedSpec) { s.N = 0 },
		"unknown merchant": func(s *xaalis.SeedSpec) { s.MerchantID = xaalis.NewUUIDv7() },
		"fee > amount":     func(s *xaalis.SeedSpec) { s.Fee = xaalis.Units(2000, xaalis.XOF) },
		"empty window":     func(s *xaalis.SeedSpec) { s.To = s.From },
	} {
		sp := spec
		bad(&sp)
		if _, err := seeder.SeedPayments(ctx, sp); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	wantClean(t, s)

	sample, err := seeder.SeedPayments(ctx, spec)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if len(sample) != spec.Sample {
		t.Fatalf("sample of %d, want %d", len(sample), spec.Sample)
	}
	f := xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.TypePayment}
	list, total, err := s.Transactions(ctx, f, xaalis.PageRequest{Page: 1, PerPage: 20})
	if err != nil || total != spec.N || len(list) != 20 {
		t.Fatalf("list: %d of %d, %v; want 20 of %d", len(list), total, err, spec.N)
	}
	for i, x := range list {
		if x.Status != xaalis.StatusSuccess || x.CreatedAt.Before(from) || !x.CreatedAt.Before(to) ||
			(i > 0 && x.CreatedAt.After(list[i-1].CreatedAt)) {
			t.Fatalf("listed %d: %s at %v", i, x.Status, x.CreatedAt)
		}
	}
	f.Status = xaalis.StatusSuccess
	f.From, f.To = &from, &to
	if _, n, err := s.Transactions(ctx, f, xaalis.PageRequest{Page: 1, PerPage: 1}); err != nil || n != spec.N {
		t.Fatalf("successful payments in [From, To): %d, %v", n, err)
	}

	seen := map[string]bool{}
	for _, sp := range sample {
		if seen[sp.ID] {
			t.Fatalf("sample repeats %s", sp.ID)
		}
		seen[sp.ID] = true
		x, err := s.Transaction(ctx, m.ID, sp.ID)
		if err != nil {
			t.Fatalf("transaction %s: %v", sp.ID, err)
		}
		if x.Reference != sp.Reference || !xaalis.LooksLikeReference(x.Reference) || len(x.Reference) != 20 {
			t.Fatalf("reference %q, want %q of 16 characters", x.Reference, sp.Reference)
		}
		if x.Type != xaalis.TypePayment || x.Status != xaalis.StatusSuccess || x.Amount != spec.Amount ||
			x.Fee != spec.Fee || x.LimitAmount != spec.Amount.Minor || x.Provider != spec.Provider ||
			x.Country != spec.Country || x.PayerPhone == "" || x.CustomerID == "" || x.ProviderRef == "" ||
			!x.UpdatedAt.Equal(x.CreatedAt) || !x.ExpiresAt.Equal(x.CreatedAt.Add(30*time.Minute)) {
			t.Fatalf("seeded payment %+v", x)
		}
		u, err := uuid.Parse(x.ID)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %s: version %v, %v", x.ID, u.Version(), err)
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != x.CreatedAt.UnixMilli() {
			t.Fatalf("id %s has time %v, created_at %v", x.ID, time.Unix(sec, nsec).UTC(), x.CreatedAt)
		}
		byRef, err := s.LookupTransactions(ctx, m.ID, sp.Reference)
		if err != nil || len(byRef) != 1 || byRef[0].ID != sp.ID {
			t.Fatalf("lookup %s: %v, %v", sp.Reference, byRef, err)
		}
		c, err := s.Customer(ctx, m.ID, x.CustomerID)
		if err != nil || c.Phone != x.PayerPhone || c.Mode != xaalis.ModeTest {
			t.Fatalf("customer %s: %+v, %v", x.CustomerID, c, err)
		}
		if _, err := xaalis.ParsePhone(x.PayerPhone, "SN"); err != nil {
			t.Fatalf("payer %s: %v", x.PayerPhone, err)
		}
		// The event carries the record as the API renders it.
		es, err := s.Events(ctx, x.ID)
		if err != nil || len(es) != 1 || es[0].Type != xaalis.EventPaymentSuccess || es[0].Seq != 1 ||
			!es[0].CreatedAt.Equal(x.UpdatedAt) {
			t.Fatalf("events of %s: %v, %v", x.ID, es, err)
		}
		x.PaymentURL = "https://pay.example/checkout/" + x.ID
		want, _ := json.Marshal(x)
		var got, wantJSON any
		if err := json.Unmarshal(es[0].Data, &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(want, &wantJSON)
		if g, w := mustJSON(got), mustJSON(wantJSON); g != w {
			t.Fatalf("event data\n%s\nwant\n%s", g, w)
		}
		entries, err := s.Entries(ctx, x.ID)
		if err != nil || len(entries) != 1 || entries[0].Kind != "payment.success" || !entries[0].CreatedAt.Equal(x.CreatedAt) {
			t.Fatalf("entries of %s: %v, %v", x.ID, entries, err)
		}
		var sum int64
		for _, p := range entries[0].Postings {
			sum += p.Amount
		}
		if sum != 0 || len(entries[0].Postings) != 3 {
			t.Fatalf("postings of %s: %+v", x.ID, entries[0].Postings)
		}
	}

	n := int64(spec.N)
	avail, fees := account(m, ledger.Available), ledger.Fees(testMode)
	got, _, err := s.Balances(ctx, []string{avail}, xaalis.XOF)
	if err != nil || got[avail] != n*99000 {
		t.Fatalf("available %v, %v; want %d", got, err, n*99000)
	}
	if v, err := s.Volume(ctx, xaalis.VolumeQuery{Mode: xaalis.ModeTest, MerchantID: m.ID, Since: from}); err != nil || v != n*100000 {
		t.Fatalf("volume %d, %v; want %d", v, err, n*100000)
	}
	if v, err := s.Volume(ctx, xaalis.VolumeQuery{Mode: xaalis.ModeTest, MerchantID: m.ID, Provider: "channel_a", Since: from}); err != nil || v != n*100000 {
		t.Fatalf("provider volume %d, %v; want %d", v, err, n*100000)
	}
	// 2 000 payments: payers 0 to 9, 200 payments each.
	payer := xaalis.SeedPayerPhone(3)
	if v, err := s.Volume(ctx, xaalis.VolumeQuery{Mode: xaalis.ModeTest, PayerPhone: payer, Since: from}); err != nil || v != 200*100000 {
		t.Fatalf("payer volume %d, %v; want %d", v, err, 200*100000)
	}
	stats := statMap(t, s, 0)
	if got := stats[xaalis.StatPayments+"/test|channel_a|SN|success"]; got != [2]int64{n, n * 100000} {
		t.Fatalf("stat counters %v", stats)
	}
	wantClean(t, s)

	// A payment written the ordinary way afterwards.
	x := NewPayment(m, xaalis.ModeTest, "after-seed", t0)
	x.Status, x.Provider, x.PayerPhone = xaalis.StatusSuccess, "channel_a", payer
	x.Fee = xaalis.Units(10, xaalis.XOF)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, x); err != nil {
			return err
		}
		if err := tx.AddVolume(ctx, xaalis.VolumeScopes(x), xaalis.VolumeDay(x.CreatedAt), x.LimitAmount); err != nil {
			return err
		}
		return tx.PostEntry(ctx, newEntry(m, "payment.success", x.ID, t0,
			ledger.Posting{Account: clearing, Currency: "XOF", Amount: -500000},
			ledger.Posting{Account: fees, Currency: "XOF", Amount: 1000},
			ledger.Posting{Account: avail, Currency: "XOF", Amount: 499000}))
	})
	if err != nil {
		t.Fatalf("payment after the seed: %v", err)
	}
	if _, total, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest}, xaalis.PageRequest{Page: 1, PerPage: 1}); err != nil || total != spec.N+1 {
		t.Fatalf("after: %d, %v", total, err)
	}
	if got, _, err := s.Balances(ctx, []string{avail}, xaalis.XOF); err != nil || got[avail] != n*99000+499000 {
		t.Fatalf("available after %v, %v", got, err)
	}
	if v, err := s.Volume(ctx, xaalis.VolumeQuery{Mode: xaalis.ModeTest, MerchantID: m.ID, Since: from}); err != nil || v != n*100000+500000 {
		t.Fatalf("volume after %d, %v", v, err)
	}
	wantClean(t, s)

	// A second seed of the same merchant adds to the same rows.
	spec.N, spec.Sample = 500, 0
	if _, err := seeder.SeedPayments(ctx, spec); err != nil {
		t.Fatalf("second seed: %v", err)
	}
	if _, total, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest}, xaalis.PageRequest{Page: 1, PerPage: 1}); err != nil || total != 2501 {
		t.Fatalf("after the second seed: %d, %v", total, err)
	}
	wantClean(t, s)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
