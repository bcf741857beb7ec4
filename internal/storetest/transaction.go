package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// NewPayment builds a payment of merchant m in mode, initiated, whose
// merchant_ref is ref, not yet stored.
func NewPayment(m *xaalis.Merchant, mode xaalis.Mode, ref string, at time.Time) *xaalis.Transaction {
	return &xaalis.Transaction{
		ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Type: xaalis.TypePayment, Reference: xaalis.NewReference(),
		MerchantRef: ref, Status: xaalis.StatusInitiated, Amount: xaalis.Units(5000, xaalis.XOF), LimitAmount: 500000,
		Country: "SN", Metadata: map[string]string{"order_id": ref}, SuccessURL: "https://shop.example/ok",
		FailedURL: "https://shop.example/ko", ExpiresAt: at.Add(30 * time.Minute), CreatedAt: at, UpdatedAt: at,
	}
}

func insertTx(t *testing.T, s xaalis.Store, x *xaalis.Transaction) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, x) }); err != nil {
		t.Fatalf("insert transaction: %v", err)
	}
}

func testTransaction(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	x := NewPayment(m, xaalis.ModeTest, "order-1", t0)
	x.SettlementAmount = &xaalis.Amount{Minor: 762, Currency: xaalis.EUR}
	x.ExchangeRate = "0.001524"
	x.CreationKey = "create-order-1"
	insertTx(t, s, x)

	got, err := s.Transaction(ctx, m.ID, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreationKey != "create-order-1" {
		t.Fatalf("creation key %q", got.CreationKey)
	}
	// An update writes it (a retry under another key takes the payment).
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		u := *got
		u.CreationKey, u.Status = "create-order-1-again", xaalis.StatusPending
		return tx.UpdateTransaction(ctx, &u)
	}); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Transaction(ctx, m.ID, x.ID); err != nil || got.CreationKey != "create-order-1-again" || got.Status != xaalis.StatusPending {
		t.Fatalf("after an update: %+v %v", got, err)
	}
	if got.Reference != x.Reference || got.MerchantRef != "order-1" || got.Amount != x.Amount || got.LimitAmount != 500000 ||
		got.Metadata["order_id"] != "order-1" || got.NextAction != nil || got.CustomerID != "" || !got.ExpiresAt.Equal(x.ExpiresAt) ||
		got.SettlementAmount == nil || *got.SettlementAmount != *x.SettlementAmount || got.ExchangeRate != "0.001524" {
		t.Fatalf("transaction = %+v", got)
	}
	if _, err := s.Transaction(ctx, "", x.ID); err != nil {
		t.Fatalf("unscoped read: %v", err)
	}
	other := NewMerchant(t, s)
	if _, err := s.Transaction(ctx, other.ID, x.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's transaction: %v", err)
	}
	// merchant_ref is unique per merchant and mode.
	dup := NewPayment(m, xaalis.ModeTest, "order-1", t0)
	err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, dup) })
	if !errors.Is(err, xaalis.ErrDuplicateMerchantRef) {
		t.Fatalf("duplicate merchant_ref: %v", err)
	}
	// A backend may send the insert with a later statement (PostgreSQL
	// queues it): the taken merchant_ref is told wherever it surfaces,
	// and nothing of the transaction stays.
	dup2 := NewPayment(m, xaalis.ModeTest, "order-1", t0)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, dup2); err != nil {
			return err
		}
		_, err := tx.TransactionForUpdate(ctx, x.ID)
		return err
	})
	if !errors.Is(err, xaalis.ErrDuplicateMerchantRef) {
		t.Fatalf("duplicate merchant_ref, then a read: %v", err)
	}
	for _, id := range []string{dup.ID, dup2.ID} {
		if _, err := s.Transaction(ctx, m.ID, id); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("the refused duplicate %s was stored: %v", id, err)
		}
	}
	insertTx(t, s, NewPayment(m, xaalis.ModeLive, "order-1", t0))
	insertTx(t, s, NewPayment(other, xaalis.ModeTest, "order-1", t0))

	for _, key := range []string{x.ID, x.Reference, "order-1"} {
		list, err := s.LookupTransactions(ctx, m.ID, key)
		if err != nil || len(list) == 0 {
			t.Fatalf("lookup %q: %d, %v", key, len(list), err)
		}
	}
	if list, _ := s.LookupTransactions(ctx, m.ID, "order-1"); len(list) != 2 {
		t.Fatalf("lookup by merchant_ref across modes: %d", len(list))
	}

	// Update every mutable field.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, x.ID)
		if err != nil {
			return err
		}
		byRef, err := tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, "order-1")
		if err != nil || byRef.ID != x.ID {
			return fmt.Errorf("by merchant_ref: %v", err)
		}
		// A merchant_ref under the other key type (a namespace of its
		// own), or one never used, is not found.
		for _, c := range []struct {
			kt  xaalis.KeyType
			ref string
		}{{xaalis.KeyPublishable, "order-1"}, {xaalis.KeySecret, "order-2"}} {
			if _, err := tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, c.kt, c.ref); !errors.Is(err, xaalis.ErrNotFound) {
				return fmt.Errorf("by merchant_ref %s with a %s key: %v, want not_found", c.ref, c.kt, err)
			}
		}
		c, err := tx.UpsertCustomer(ctx, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
			Phone: "+221770000010", CreatedAt: t0, UpdatedAt: t0})
		if err != nil {
			return err
		}
		rec := t0.Add(time.Minute)
		cur.Status, cur.Provider, cur.Route, cur.RouteReason, cur.ProviderRef = xaalis.StatusPending, "channel_b", "direct", "primary", "ref-9"
		cur.NextAction = &xaalis.NextAction{Type: xaalis.NextOTP, USSDCode: "#144#"}
		cur.PayerPhone, cur.PayerName, cur.CustomerID, cur.ReconciledAt = "+221770000010", "Awa", c.ID, &rec
		cur.FailureReason, cur.UpdatedAt = "x", t0.Add(time.Hour)
		return tx.UpdateTransaction(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Transaction(ctx, m.ID, x.ID)
	if got.Status != xaalis.StatusPending || got.Provider != "channel_b" || got.Route != "direct" || got.ProviderRef != "ref-9" ||
		got.NextAction == nil || got.NextAction.USSDCode != "#144#" || got.PayerName != "Awa" || got.CustomerID == "" ||
		got.ReconciledAt == nil || got.FailureReason != "x" || !got.UpdatedAt.Equal(t0.Add(time.Hour)) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("updated = %+v", got)
	}
	byProv, err := s.TransactionByProviderRef(ctx, xaalis.ModeTest, "channel_b", "ref-9")
	if err != nil || byProv.ID != x.ID {
		t.Fatalf("by provider ref: %v", err)
	}
	if _, err := s.TransactionByProviderRef(ctx, xaalis.ModeLive, "channel_b", "ref-9"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("provider ref in the other mode: %v", err)
	}
	if byRef, err := s.TransactionByReference(ctx, xaalis.ModeTest, "channel_b", x.Reference); err != nil || byRef.ID != x.ID {
		t.Fatalf("by reference: %+v %v", byRef, err)
	}
	for _, c := range []struct {
		mode          xaalis.Mode
		provider, ref string
	}{{xaalis.ModeLive, "channel_b", x.Reference}, {xaalis.ModeTest, "channel_a", x.Reference}, {xaalis.ModeTest, "channel_b", "TXN-NOPE"}} {
		if _, err := s.TransactionByReference(ctx, c.mode, c.provider, c.ref); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("by reference %+v: %v", c, err)
		}
	}
	cust, err := s.Customer(ctx, m.ID, got.CustomerID)
	if err != nil || cust.Phone != "+221770000010" {
		t.Fatalf("customer: %+v %v", cust, err)
	}
	// The same phone finds the same customer; a name fills a blank one,
	// and the change moves its updated_at (not its created_at). A later
	// name changes nothing, and moves nothing.
	named := t0.Add(2 * time.Hour)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		c, err := tx.UpsertCustomer(ctx, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
			Phone: "+221770000010", Name: "Awa Diop", CreatedAt: named, UpdatedAt: named})
		if err == nil && (c.ID != cust.ID || c.Name != "Awa Diop" || !c.UpdatedAt.Equal(named) || !c.CreatedAt.Equal(cust.CreatedAt)) {
			err = fmt.Errorf("upsert = %+v", c)
		}
		if err != nil {
			return err
		}
		later := named.Add(time.Hour)
		c, err = tx.UpsertCustomer(ctx, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
			Phone: "+221770000010", Name: "Someone Else", CreatedAt: later, UpdatedAt: later})
		if err == nil && (c.Name != "Awa Diop" || !c.UpdatedAt.Equal(named)) {
			err = fmt.Errorf("upsert with another name = %+v", c)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testTransactionByMerchantRefAndPayer: the lookup a payment's creation
// starts with finds the payment by merchant_ref or nothing, and finds or
// makes the payer's customer, in every combination; an error of the
// lookup is the call's error.
func testTransactionByMerchantRefAndPayer(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	x := NewPayment(m, xaalis.ModeTest, "order-1", t0)
	insertTx(t, s, x)
	payer := func(phone, name string) *xaalis.Customer {
		return &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Phone: phone, Name: name,
			CreatedAt: t0, UpdatedAt: t0}
	}
	call := func(ref string, p *xaalis.Customer) (found *xaalis.Transaction, c *xaalis.Customer) {
		t.Helper()
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			var err error
			found, c, err = tx.TransactionByMerchantRefAndPayer(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, ref, p)
			return err
		})
		if err != nil {
			t.Fatalf("merchant_ref %q, payer %+v: %v", ref, p, err)
		}
		return found, c
	}

	if found, c := call("order-1", nil); found == nil || found.ID != x.ID || c != nil {
		t.Fatalf("a taken merchant_ref without a payer: %+v, %+v", found, c)
	}
	if found, c := call("order-2", nil); found != nil || c != nil {
		t.Fatalf("a free merchant_ref without a payer: %+v, %+v", found, c)
	}
	first := payer("+221770000030", "")
	found, c := call("order-2", first)
	if found != nil || c == nil || c.ID != first.ID || c.Phone != "+221770000030" {
		t.Fatalf("a free merchant_ref with a new payer: %+v, %+v", found, c)
	}
	// The same payer again, now with a name: the same customer, named.
	found, again := call("order-1", payer("+221770000030", "Awa"))
	if found == nil || found.ID != x.ID || again == nil || again.ID != first.ID || again.Name != "Awa" {
		t.Fatalf("a taken merchant_ref with a known payer: %+v, %+v", found, again)
	}
	if got, err := s.Customer(ctx, m.ID, first.ID); err != nil || got.Name != "Awa" {
		t.Fatalf("the customer after: %+v, %v", got, err)
	}
	// Under a publishable key the merchant_ref is another namespace.
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		found, _, err := tx.TransactionByMerchantRefAndPayer(ctx, m.ID, xaalis.ModeTest, xaalis.KeyPublishable, "order-1", nil)
		if err == nil && found != nil {
			err = fmt.Errorf("found %s under a publishable key", found.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A payer the database refuses (a mode that is not one: a CHECK
	// constraint) is an error, not a payer found: the error ends the call
	// and its transaction.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		p := payer("+221770000031", "")
		p.Mode = "no-such-mode"
		_, _, err := tx.TransactionByMerchantRefAndPayer(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, "order-3", p)
		return err
	})
	if err == nil {
		t.Fatal("a payer in a mode that does not exist: no error")
	}
}

func testTransactionList(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	for i := range 6 {
		x := NewPayment(m, xaalis.ModeTest, fmt.Sprint("o-", i), t0.Add(time.Duration(i)*time.Hour))
		if i%2 == 0 {
			x.Status, x.Provider = xaalis.StatusPending, "channel_a"
		}
		insertTx(t, s, x)
	}
	insertTx(t, s, NewPayment(m, xaalis.ModeLive, "live", t0))
	from, to := t0.Add(time.Hour), t0.Add(4*time.Hour)
	for _, c := range []struct {
		f    xaalis.TxFilter
		want int
	}{
		{xaalis.TxFilter{}, 6},
		{xaalis.TxFilter{Status: xaalis.StatusPending}, 3},
		{xaalis.TxFilter{Provider: "channel_a"}, 3},
		{xaalis.TxFilter{MerchantRef: "o-3"}, 1},
		{xaalis.TxFilter{From: &from, To: &to}, 3},
		{xaalis.TxFilter{Type: xaalis.TypePayout}, 0},
	} {
		c.f.MerchantID, c.f.Mode = m.ID, xaalis.ModeTest
		list, total, err := s.Transactions(ctx, c.f, xaalis.PageRequest{Page: 1, PerPage: 2})
		if err != nil || total != c.want || len(list) != min(2, c.want) {
			t.Fatalf("%+v: total %d, %d listed, %v", c.f, total, len(list), err)
		}
		if len(list) == 2 && !list[0].CreatedAt.After(list[1].CreatedAt) {
			t.Fatal("not newest first")
		}
	}

	// The totals of merchant, mode, type and status come from counts the
	// store keeps: they follow status changes, and a change rolled back
	// leaves them as they were.
	pending, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, Status: xaalis.StatusPending},
		xaalis.PageRequest{Page: 1, PerPage: 100})
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending: %d, %v", len(pending), err)
	}
	pending[0].Status = xaalis.StatusSuccess
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.UpdateTransaction(ctx, pending[0]) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	pending[1].Status = xaalis.StatusFailed
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.UpdateTransaction(ctx, pending[1]); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled back: %v", err)
	}
	for _, st := range []xaalis.Status{"", xaalis.StatusPending, xaalis.StatusSuccess, xaalis.StatusFailed, xaalis.StatusInitiated} {
		f := xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.TypePayment, Status: st}
		list, total, err := s.Transactions(ctx, f, xaalis.PageRequest{Page: 1, PerPage: 100})
		if err != nil || total != len(list) {
			t.Errorf("status %q: total %d, %d rows, %v", st, total, len(list), err)
		}
		if st == xaalis.StatusPending && len(list) != 2 {
			t.Errorf("pending after one moved to success: %d", len(list))
		}
	}
}

func testDueAndVolume(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	mk := func(ref string, st xaalis.Status, created time.Time, phone string) *xaalis.Transaction {
		x := NewPayment(m, xaalis.ModeTest, ref, created)
		x.Status, x.PayerPhone = st, phone
		if st == xaalis.StatusPending {
			x.Provider, x.ProviderRef = "channel_a", "p-"+ref
		}
		insertTx(t, s, x)
		return x
	}
	old := mk("old", xaalis.StatusPending, t0.Add(-time.Hour), "+221770000020")
	mk("fresh", xaalis.StatusPending, t0, "+221770000020")
	mk("init", xaalis.StatusInitiated, t0.Add(-time.Hour), "")
	mk("done", xaalis.StatusSuccess, t0.Add(-time.Hour), "+221770000020")
	mk("failed", xaalis.StatusFailed, t0.Add(-time.Hour), "+221770000020")

	due, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: t0.Add(29 * time.Minute), Limit: 10, Expired: true})
	if err != nil || len(due) != 2 { // old and init expire at t0-30m
		t.Fatalf("expired: %d, %v", len(due), err)
	}
	due, err = s.DueTransactions(ctx, xaalis.DueQuery{Now: t0, Limit: 10, Reconcile: true, Before: t0.Add(-time.Minute)})
	if err != nil || len(due) != 1 || due[0].ID != old.ID {
		t.Fatalf("reconcile: %d, %v", len(due), err)
	}
	// The volume counters hold settled payments, fed as the App feeds them
	// when a payment enters a counted status: done (t0-1h, no provider) for
	// the payer +221770000020. Pending payments are in the hold counters by
	// their minute of creation, read from FirstHoldMinute on: fresh (t0,
	// channel_a) holds room, old (t0-1h) no longer does; failed and init
	// never count.
	add := func(x *xaalis.Transaction, delta int64) {
		scopes := xaalis.VolumeScopes(x)
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.AddVolume(ctx, scopes, xaalis.VolumeDay(x.CreatedAt), delta) }); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(x *xaalis.Transaction, delta int64) {
		scopes := xaalis.HoldScopes(x)
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.AddVolume(ctx, scopes, xaalis.HoldMinute(x.CreatedAt), delta) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range []string{"old", "fresh"} {
		var x *xaalis.Transaction
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
			x, err = tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, ref)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		hold(x, x.LimitAmount)
	}
	done := &xaalis.Transaction{Mode: xaalis.ModeTest, MerchantID: m.ID, Provider: "", PayerPhone: "+221770000020", CreatedAt: t0.Add(-time.Hour), LimitAmount: 500000}
	add(done, done.LimitAmount)
	holdSince := t0.Add(-xaalis.PendingHold)
	full := func(q xaalis.VolumeQuery) xaalis.VolumeQuery {
		q.Mode = xaalis.ModeTest
		if q.MerchantID == "" && q.PayerPhone == "" {
			q.MerchantID = m.ID
		}
		return q
	}
	vol := func(q xaalis.VolumeQuery) int64 {
		t.Helper()
		v, err := s.Volume(ctx, full(q))
		if err != nil {
			t.Fatalf("volume %+v: %v", q, err)
		}
		return v
	}
	var all []xaalis.VolumeQuery
	var want []int64
	for _, c := range []struct {
		name string
		q    xaalis.VolumeQuery
		want int64
	}{
		{"merchant, holds from t0-30m", xaalis.VolumeQuery{Since: t0.Add(-2 * time.Hour), HoldSince: holdSince}, 2 * 500000},
		{"merchant, holds from t0-2h", xaalis.VolumeQuery{Since: t0.Add(-2 * time.Hour), HoldSince: t0.Add(-2 * time.Hour)}, 3 * 500000},
		// The day is the unit of the counters: a window starting any time
		// today counts today; held payments are taken from the window's day.
		{"since t0's day", xaalis.VolumeQuery{Since: t0, HoldSince: holdSince}, 2 * 500000},
		{"since tomorrow", xaalis.VolumeQuery{Since: t0.Add(24 * time.Hour), HoldSince: holdSince}, 0},
		{"payer", xaalis.VolumeQuery{PayerPhone: "+221770000020", Since: t0, HoldSince: holdSince}, 2 * 500000},
		{"merchant on channel_a", xaalis.VolumeQuery{Provider: "channel_a", Since: t0, HoldSince: holdSince}, 500000},
		{"merchant on channel_a, old holds too", xaalis.VolumeQuery{Provider: "channel_a", Since: t0, HoldSince: t0.Add(-2 * time.Hour)}, 2 * 500000},
		{"another payer", xaalis.VolumeQuery{PayerPhone: "+221770000099", Since: t0, HoldSince: holdSince}, 0},
	} {
		if got := vol(c.q); got != c.want {
			t.Errorf("%s: volume %d, want %d", c.name, got, c.want)
		}
		all, want = append(all, full(c.q)), append(want, c.want)
	}
	// Volumes answers every query at once, the same: queries of one scope
	// with other bounds (the merchant's day and month, older holds) share
	// a read of its counters.
	if got, err := s.Volumes(ctx, all); err != nil || !slices.Equal(got, want) {
		t.Errorf("volumes: %v, %v; want %v", got, err, want)
	}
	// A pending payment that fails stops holding room: its hold is taken
	// back out.
	var fresh *xaalis.Transaction
	if err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
		fresh, err = tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, "fresh")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hold(fresh, -fresh.LimitAmount)
	if got := vol(xaalis.VolumeQuery{Since: t0, HoldSince: holdSince}); got != 500000 {
		t.Fatalf("after a failure: %d", got)
	}
	// A settled payment leaving the counted statuses takes its amount back out.
	add(done, -done.LimitAmount)
	if got := vol(xaalis.VolumeQuery{Since: t0, HoldSince: holdSince}); got != 0 {
		t.Fatalf("after taking done out: %d", got)
	}
	if v, _ := s.Volume(ctx, xaalis.VolumeQuery{Mode: xaalis.ModeLive, MerchantID: m.ID, Since: t0, HoldSince: t0.Add(-2 * time.Hour)}); v != 0 {
		t.Fatalf("the live mode counts apart: %d", v)
	}
	_ = old
}

func testEvents(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	x := NewPayment(m, xaalis.ModeTest, "ev", t0)
	insertTx(t, s, x)
	for i, typ := range []string{"payment.success", "payment.refunded"} {
		e := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: typ, ObjectType: "transaction",
			ObjectID: x.ID, Data: []byte(`{"n":` + fmt.Sprint(i) + `}`), CreatedAt: t0}
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertEvent(ctx, e) }); err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i+1) {
			t.Fatalf("seq = %d", e.Seq)
		}
	}
	evs, err := s.Events(ctx, x.ID)
	if err != nil || len(evs) != 2 || evs[1].Type != "payment.refunded" || string(evs[0].Data) != `{"n":0}` {
		t.Fatalf("events: %d, %v", len(evs), err)
	}

	// An object's first event, in the transaction that creates it, is
	// numbered 1 without a look at the object's events.
	y := NewPayment(m, xaalis.ModeTest, "ev-first", t0)
	ey := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: "payment.success",
		ObjectType: "transaction", ObjectID: y.ID, Data: []byte(`{"first":true}`), CreatedAt: t0, First: true}
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, y); err != nil {
			return err
		}
		return tx.InsertEvent(ctx, ey)
	}); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.Events(ctx, y.ID); err != nil || len(evs) != 1 || evs[0].Seq != 1 || ey.Seq != 1 ||
		string(evs[0].Data) != `{"first":true}` {
		t.Fatalf("first event: %+v, seq %d, %v", evs, ey.Seq, err)
	}
	// First for an object that has events is a broken promise: the
	// transaction fails, and nothing of it is kept (the payment inserted
	// with it neither).
	z := NewPayment(m, xaalis.ModeTest, "ev-wrong-first", t0)
	wrong := &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: "payment.failed",
		ObjectType: "transaction", ObjectID: x.ID, Data: []byte(`{}`), CreatedAt: t0, First: true}
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, z); err != nil {
			return err
		}
		return tx.InsertEvent(ctx, wrong)
	}); err == nil {
		t.Fatal("a second event numbered 1 was accepted")
	}
	if evs, err := s.Events(ctx, x.ID); err != nil || len(evs) != 2 {
		t.Fatalf("events after the failed insert: %d, %v", len(evs), err)
	}
	if _, err := s.Transaction(ctx, m.ID, z.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("the failed transaction's payment: %v", err)
	}
	var first, second bool
	_ = s.Update(ctx, func(tx xaalis.Tx) (err error) {
		first, err = tx.NotificationFirstSeen(ctx, "channel_a", "n-1", t0)
		return
	})
	_ = s.Update(ctx, func(tx xaalis.Tx) (err error) {
		second, err = tx.NotificationFirstSeen(ctx, "channel_a", "n-1", t0)
		return
	})
	if !first || second {
		t.Fatalf("notification seen: %v then %v", first, second)
	}
}
