package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// newDispute builds a dispute of payment x, not yet stored.
func newDispute(x *xaalis.Transaction, st xaalis.DisputeStatus, at time.Time) *xaalis.Dispute {
	return &xaalis.Dispute{
		ID: xaalis.NewUUIDv7(), MerchantID: x.MerchantID, Mode: x.Mode, Reference: "DSP-" + xaalis.NewUUIDv7(),
		TransactionID: x.ID, Amount: x.Amount, LedgerAmount: xaalis.Amount{Minor: 762, Currency: xaalis.EUR},
		Reason: "not received", Status: st, DueBy: at.Add(7 * 24 * time.Hour), CreatedAt: at, UpdatedAt: at,
	}
}

func insertDispute(t testing.TB, s xaalis.Store, d *xaalis.Dispute) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertDispute(ctx, d) }); err != nil {
		t.Fatalf("insert dispute: %v", err)
	}
}

// storedPayment inserts a successful payment of m and returns it.
func storedPayment(t *testing.T, s xaalis.Store, m *xaalis.Merchant, mode xaalis.Mode, at time.Time) *xaalis.Transaction {
	t.Helper()
	x := NewPayment(m, mode, "", at)
	x.Status = xaalis.StatusSuccess
	insertTx(t, s, x)
	return x
}

func disputeIDs(ds []*xaalis.Dispute) []string {
	return pluck(ds, func(x *xaalis.Dispute) string { return x.ID })
}

func testDispute(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	x := storedPayment(t, s, m, xaalis.ModeTest, t0)
	d := newDispute(x, xaalis.DisputeNeedsResponse, t0.Add(time.Hour))
	d.Shortfall, d.ProviderEventID, d.MerchantRef = 100, "evt-1", "ORDER-9"
	d.Evidence = []string{"https://shop.example/invoice.pdf"}
	insertDispute(t, s, d)

	for _, key := range []string{d.ID, d.Reference} {
		got, err := s.Dispute(ctx, m.ID, key)
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("dispute by %s = %+v, %v; want %+v", key, got, err, d)
		}
	}
	if _, err := s.Dispute(ctx, other.ID, d.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's dispute: %v", err)
	}
	for _, key := range []string{d.ID, d.Reference} {
		if got, err := s.Dispute(ctx, "", key); err != nil || got.ID != d.ID {
			t.Fatalf("dispute %s of any merchant: %+v %v", key, got, err)
		}
	}
	if _, err := s.Dispute(ctx, m.ID, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("missing dispute: %v", err)
	}
	dup := newDispute(storedPayment(t, s, m, xaalis.ModeTest, t0), xaalis.DisputeNeedsResponse, t0)
	dup.Reference = d.Reference
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertDispute(ctx, dup) }); err == nil {
		t.Fatal("a duplicate reference was stored")
	}

	// The merchant answers with evidence; then the dispute is won.
	responded := t0.Add(2 * time.Hour)
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.DisputeForUpdate(ctx, d.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(cur, d) {
			return fmt.Errorf("dispute for update = %+v", cur)
		}
		open, err := tx.OpenDisputeOf(ctx, x.ID)
		if err != nil || open.ID != d.ID {
			return fmt.Errorf("open dispute = %+v, %v", open, err)
		}
		cur.Status, cur.MerchantResponse, cur.RespondedAt = xaalis.DisputeUnderReview, "delivered on time", &responded
		cur.Evidence = []string{"https://shop.example/receipt.pdf", "https://shop.example/tracking"}
		cur.Shortfall, cur.UpdatedAt = 40, responded
		return tx.UpdateDispute(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := *d
	want.Status, want.MerchantResponse, want.RespondedAt = xaalis.DisputeUnderReview, "delivered on time", &responded
	want.Evidence = []string{"https://shop.example/receipt.pdf", "https://shop.example/tracking"}
	want.Shortfall, want.UpdatedAt = 40, responded
	got, err := s.Dispute(ctx, m.ID, d.ID)
	if err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("answered dispute = %+v, %v; want %+v", got, err, &want)
	}
	closed := t0.Add(3 * time.Hour)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.DisputeForUpdate(ctx, d.ID)
		if err != nil {
			return err
		}
		cur.Status, cur.ClosedAt, cur.UpdatedAt = xaalis.DisputeWon, &closed, closed
		return tx.UpdateDispute(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Dispute(ctx, m.ID, d.Reference)
	if got.Status != xaalis.DisputeWon || !sameTimePtr(got.ClosedAt, &closed) || len(got.Evidence) != 2 ||
		got.Evidence[1] != "https://shop.example/tracking" || !sameTime(got.UpdatedAt, closed) {
		t.Fatalf("won dispute = %+v", got)
	}

	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if _, err := tx.OpenDisputeOf(ctx, x.ID); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("open dispute of a won one: %v", err)
		}
		if _, err := tx.DisputeForUpdate(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("missing dispute for update: %v", err)
		}
		if err := tx.UpdateDispute(ctx, &xaalis.Dispute{ID: "nope", Status: xaalis.DisputeLost}); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("update missing dispute: %v", err)
		}
		byEvent, err := tx.DisputeByProviderEvent(ctx, "evt-1")
		if err != nil || byEvent.ID != d.ID {
			return fmt.Errorf("dispute by provider event = %+v, %v", byEvent, err)
		}
		if _, err := tx.DisputeByProviderEvent(ctx, "evt-2"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("unknown provider event: %v", err)
		}
		// A dispute opened without a notification is not found by "".
		if _, err := tx.DisputeByProviderEvent(ctx, ""); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("empty provider event: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Disputes without a provider event store none; a provider event opens
	// at most one dispute.
	for range 2 {
		insertDispute(t, s, newDispute(storedPayment(t, s, m, xaalis.ModeTest, t0), xaalis.DisputeNeedsResponse, t0))
	}
	again := newDispute(storedPayment(t, s, m, xaalis.ModeTest, t0), xaalis.DisputeNeedsResponse, t0)
	again.ProviderEventID = "evt-1"
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertDispute(ctx, again) }); err == nil {
		t.Fatal("a second dispute of one provider event was stored")
	}
}

// testOneOpenDispute: a payment has at most one open dispute (needs_response
// or under_review); once it is won or lost a new one may open.
func testOneOpenDispute(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	x := storedPayment(t, s, m, xaalis.ModeTest, t0)
	insertTwice := func(first *xaalis.Dispute) {
		t.Helper()
		second := newDispute(x, xaalis.DisputeNeedsResponse, t0.Add(time.Minute))
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertDispute(ctx, second) }); err == nil {
			t.Fatalf("a second open dispute was stored beside a %s one", first.Status)
		}
		if _, err := s.Dispute(ctx, m.ID, second.ID); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("the refused dispute is there: %v", err)
		}
	}
	closeAs := func(d *xaalis.Dispute, st xaalis.DisputeStatus) {
		t.Helper()
		at := d.CreatedAt.Add(time.Hour)
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			cur, err := tx.DisputeForUpdate(ctx, d.ID)
			if err != nil {
				return err
			}
			cur.Status, cur.ClosedAt, cur.UpdatedAt = st, &at, at
			return tx.UpdateDispute(ctx, cur)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	openOf := func() string {
		t.Helper()
		var id string
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			d, err := tx.OpenDisputeOf(ctx, x.ID)
			if err == nil {
				id = d.ID
			} else if errors.Is(err, xaalis.ErrNotFound) {
				err = nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	d1 := newDispute(x, xaalis.DisputeNeedsResponse, t0)
	insertDispute(t, s, d1)
	insertTwice(d1)
	// under_review is open too.
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.DisputeForUpdate(ctx, d1.ID)
		if err != nil {
			return err
		}
		cur.Status = xaalis.DisputeUnderReview
		return tx.UpdateDispute(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	insertTwice(d1)
	if id := openOf(); id != d1.ID {
		t.Fatalf("open dispute %q, want %q", id, d1.ID)
	}
	closeAs(d1, xaalis.DisputeWon)
	if id := openOf(); id != "" {
		t.Fatalf("open dispute %q after it was won", id)
	}
	d2 := newDispute(x, xaalis.DisputeNeedsResponse, t0.Add(2*time.Hour))
	insertDispute(t, s, d2)
	if id := openOf(); id != d2.ID {
		t.Fatalf("open dispute %q, want the new %q", id, d2.ID)
	}
	insertTwice(d2)
	closeAs(d2, xaalis.DisputeLost)
	d3 := newDispute(x, xaalis.DisputeNeedsResponse, t0.Add(4*time.Hour))
	insertDispute(t, s, d3)
	// Reopening a closed dispute beside an open one is refused too.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.DisputeForUpdate(ctx, d1.ID)
		if err != nil {
			return err
		}
		cur.Status = xaalis.DisputeUnderReview
		return tx.UpdateDispute(ctx, cur)
	})
	if err == nil {
		t.Fatal("a closed dispute reopened beside an open one")
	}
	list, total, err := s.Disputes(ctx, m.ID, xaalis.ModeTest, "", xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || total != 3 || !reflect.DeepEqual(disputeIDs(list), []string{d3.ID, d2.ID, d1.ID}) {
		t.Fatalf("disputes of the payment: %v (%d), %v", disputeIDs(list), total, err)
	}
}

func testDisputeList(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	statuses := []xaalis.DisputeStatus{xaalis.DisputeNeedsResponse, xaalis.DisputeUnderReview, xaalis.DisputeWon,
		xaalis.DisputeNeedsResponse, xaalis.DisputeLost, xaalis.DisputeNeedsResponse}
	var ds []*xaalis.Dispute
	for i, st := range statuses {
		at := t0.Add(time.Duration(i) * time.Hour)
		d := newDispute(storedPayment(t, s, m, xaalis.ModeTest, at), st, at)
		insertDispute(t, s, d)
		ds = append(ds, d)
	}
	live := newDispute(storedPayment(t, s, m, xaalis.ModeLive, t0), xaalis.DisputeNeedsResponse, t0.Add(10*time.Hour))
	insertDispute(t, s, live)
	insertDispute(t, s, newDispute(storedPayment(t, s, other, xaalis.ModeTest, t0), xaalis.DisputeNeedsResponse, t0))

	for _, c := range []struct {
		status xaalis.DisputeStatus
		page   xaalis.PageRequest
		total  int
		want   []*xaalis.Dispute
	}{
		{"", xaalis.PageRequest{Page: 1, PerPage: 4}, 6, []*xaalis.Dispute{ds[5], ds[4], ds[3], ds[2]}},
		{"", xaalis.PageRequest{Page: 2, PerPage: 4}, 6, []*xaalis.Dispute{ds[1], ds[0]}},
		{"", xaalis.PageRequest{Page: 3, PerPage: 4}, 6, nil},
		{xaalis.DisputeNeedsResponse, xaalis.PageRequest{Page: 1, PerPage: 2}, 3, []*xaalis.Dispute{ds[5], ds[3]}},
		{xaalis.DisputeNeedsResponse, xaalis.PageRequest{Page: 2, PerPage: 2}, 3, []*xaalis.Dispute{ds[0]}},
		{xaalis.DisputeUnderReview, xaalis.PageRequest{Page: 1, PerPage: 10}, 1, []*xaalis.Dispute{ds[1]}},
		{xaalis.DisputeWon, xaalis.PageRequest{Page: 1, PerPage: 10}, 1, []*xaalis.Dispute{ds[2]}},
	} {
		list, total, err := s.Disputes(ctx, m.ID, xaalis.ModeTest, c.status, c.page)
		if err != nil || total != c.total || !reflect.DeepEqual(disputeIDs(list), disputeIDs(c.want)) {
			t.Fatalf("status %q page %d: %v (%d), %v; want %v (%d)", c.status, c.page.Page, disputeIDs(list), total, err,
				disputeIDs(c.want), c.total)
		}
		for i, d := range list {
			if !reflect.DeepEqual(d, c.want[i]) {
				t.Fatalf("listed %+v, want %+v", d, c.want[i])
			}
		}
	}
	list, total, err := s.Disputes(ctx, m.ID, xaalis.ModeLive, "", xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != live.ID {
		t.Fatalf("live disputes: %v (%d), %v", disputeIDs(list), total, err)
	}
}

func testDueDisputes(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	mk := func(m *xaalis.Merchant, st xaalis.DisputeStatus, due time.Time) *xaalis.Dispute {
		d := newDispute(storedPayment(t, s, m, xaalis.ModeTest, t0), st, t0)
		d.DueBy = due
		insertDispute(t, s, d)
		return d
	}
	now := t0.Add(24 * time.Hour)
	late := mk(m, xaalis.DisputeNeedsResponse, now.Add(-time.Hour))
	onTime := mk(other, xaalis.DisputeNeedsResponse, now) // due exactly now: due
	oldest := mk(m, xaalis.DisputeNeedsResponse, now.Add(-2*time.Hour))
	mk(m, xaalis.DisputeNeedsResponse, now.Add(time.Second))      // not yet
	mk(m, xaalis.DisputeUnderReview, now.Add(-3*time.Hour))       // answered
	mk(other, xaalis.DisputeLost, now.Add(-3*time.Hour))          // closed
	mk(m, xaalis.DisputeWon, now.Add(-3*time.Hour))               // closed
	mk(other, xaalis.DisputeNeedsResponse, now.Add(48*time.Hour)) // not yet

	due, err := s.DueDisputes(ctx, now, 10)
	if err != nil || !reflect.DeepEqual(disputeIDs(due), []string{oldest.ID, late.ID, onTime.ID}) {
		t.Fatalf("due disputes: %v, %v; want %v", disputeIDs(due), err, []string{oldest.ID, late.ID, onTime.ID})
	}
	if !reflect.DeepEqual(due[0], oldest) {
		t.Fatalf("due dispute = %+v, want %+v", due[0], oldest)
	}
	due, err = s.DueDisputes(ctx, now, 2)
	if err != nil || !reflect.DeepEqual(disputeIDs(due), []string{oldest.ID, late.ID}) {
		t.Fatalf("due disputes, limit 2: %v, %v", disputeIDs(due), err)
	}
	if due, err := s.DueDisputes(ctx, t0, 10); err != nil || len(due) != 0 {
		t.Fatalf("due disputes at t0: %v, %v", disputeIDs(due), err)
	}
}

func splitIDs(ss []*xaalis.SplitItem) []string {
	return pluck(ss, func(x *xaalis.SplitItem) string { return x.ID })
}

func testSplits(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, b1, b2 := NewMerchant(t, s), NewMerchant(t, s), NewMerchant(t, s)
	x := storedPayment(t, s, m, xaalis.ModeTest, t0)
	y := storedPayment(t, s, m, xaalis.ModeTest, t0)
	credited := t0.Add(time.Minute)
	var items []*xaalis.SplitItem
	for i, b := range []*xaalis.Merchant{b1, b2, b1} {
		items = append(items, &xaalis.SplitItem{
			ID: xaalis.NewUUIDv7(), PaymentID: x.ID, MerchantID: m.ID, Mode: xaalis.ModeTest, BeneficiaryID: b.ID,
			Amount:       xaalis.Amount{Minor: int64(1000 * (i + 1)), Currency: xaalis.XOF},
			LedgerAmount: xaalis.Amount{Minor: int64(152 * (i + 1)), Currency: xaalis.EUR},
			Description:  fmt.Sprint("share ", i), CreatedAt: t0.Add(time.Duration(i) * time.Second),
		})
	}
	items[1].CreditedAt = &credited
	other := &xaalis.SplitItem{ID: xaalis.NewUUIDv7(), PaymentID: y.ID, MerchantID: m.ID, Mode: xaalis.ModeTest,
		BeneficiaryID: b2.ID, Amount: xaalis.Units(5, xaalis.XOF), LedgerAmount: xaalis.Units(5, xaalis.XOF), CreatedAt: t0}
	// Inserted newest first: Splits orders them.
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		for _, it := range []*xaalis.SplitItem{items[2], other, items[0], items[1]} {
			if err := tx.InsertSplitItem(ctx, it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Splits(ctx, x.ID)
	if err != nil || !reflect.DeepEqual(got, items) {
		t.Fatalf("splits = %v, %v; want %v", splitIDs(got), err, splitIDs(items))
	}
	if got, err := s.Splits(ctx, "nope"); err != nil || len(got) != 0 {
		t.Fatalf("splits of a missing payment: %v, %v", splitIDs(got), err)
	}
	bad := *other
	bad.ID, bad.BeneficiaryID = xaalis.NewUUIDv7(), "not-a-merchant"
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertSplitItem(ctx, &bad) }); err == nil {
		t.Fatal("a split item to a missing beneficiary was stored")
	}

	later := t0.Add(time.Hour)
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		locked, err := tx.SplitItemsForUpdate(ctx, x.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(locked, items) {
			return fmt.Errorf("split items for update = %v", splitIDs(locked))
		}
		for _, it := range locked {
			if it.CreditedAt == nil {
				if err := tx.MarkSplitCredited(ctx, it.ID, later); err != nil {
					return err
				}
			}
		}
		if err := tx.MarkSplitCredited(ctx, "nope", later); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("credit a missing split item: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Splits(ctx, x.ID)
	for i, it := range got {
		want := credited
		if i != 1 {
			want = later
		}
		if !sameTimePtr(it.CreditedAt, &want) {
			t.Fatalf("split %d credited at %v, want %v", i, it.CreditedAt, want)
		}
	}
	if got, _ := s.Splits(ctx, y.ID); len(got) != 1 || got[0].CreditedAt != nil || !reflect.DeepEqual(got[0], other) {
		t.Fatalf("the other payment's splits: %+v", got)
	}
	// A rolled-back credit leaves the item uncredited.
	_ = s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.MarkSplitCredited(ctx, other.ID, later); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if got, _ := s.Splits(ctx, y.ID); got[0].CreditedAt != nil {
		t.Fatal("a rolled-back credit stayed")
	}
}

// newCustomer stores a customer of m with a phone and returns it.
func newCustomer(t testing.TB, s xaalis.Store, m *xaalis.Merchant, mode xaalis.Mode, phone string, at time.Time) *xaalis.Customer {
	t.Helper()
	ctx := context.Background()
	var c *xaalis.Customer
	err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
		c, err = tx.UpsertCustomer(ctx, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode,
			Phone: phone, Name: "Awa", CreatedAt: at, UpdatedAt: at})
		return err
	})
	if err != nil {
		t.Fatalf("insert customer: %v", err)
	}
	return c
}

// newPlan stores a monthly plan of m and returns it.
func newPlan(t testing.TB, s xaalis.Store, m *xaalis.Merchant, mode xaalis.Mode) *xaalis.Plan {
	t.Helper()
	ctx := context.Background()
	p := &xaalis.Plan{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Name: "monthly",
		Amount: xaalis.Units(5000, xaalis.XOF), Interval: xaalis.IntervalMonth, IntervalCount: 1, Active: true,
		Metadata: map[string]string{"tier": "gold"}, CreatedAt: t0, UpdatedAt: t0}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreatePlan(ctx, p) }); err != nil {
		t.Fatalf("create plan: %v", err)
	}
	return p
}

// newSubscription builds an active subscription, not yet stored.
func newSubscription(p *xaalis.Plan, c *xaalis.Customer, at time.Time) *xaalis.Subscription {
	end := at.AddDate(0, 1, 0)
	return &xaalis.Subscription{
		ID: xaalis.NewUUIDv7(), MerchantID: p.MerchantID, Mode: p.Mode, PlanID: p.ID, CustomerID: c.ID,
		Status: xaalis.SubscriptionActive, CurrentPeriodStart: at, CurrentPeriodEnd: end, NextActionAt: end,
		Metadata: map[string]string{"seat": "1"}, CreatedAt: at, UpdatedAt: at,
	}
}

func insertSubscription(t testing.TB, s xaalis.Store, sub *xaalis.Subscription) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertSubscription(ctx, sub) }); err != nil {
		t.Fatalf("insert subscription: %v", err)
	}
}

func subscriptionIDs(ss []*xaalis.Subscription) []string {
	return pluck(ss, func(x *xaalis.Subscription) string { return x.ID })
}

func testSubscription(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	p, p2 := newPlan(t, s, m, xaalis.ModeTest), newPlan(t, s, m, xaalis.ModeTest)
	c := newCustomer(t, s, m, xaalis.ModeTest, "+221770000050", t0)
	sub := newSubscription(p, c, t0)
	sub.Provider = "channel_a"
	insertSubscription(t, s, sub)

	got, err := s.Subscription(ctx, m.ID, sub.ID)
	if err != nil || !reflect.DeepEqual(got, sub) {
		t.Fatalf("subscription = %+v, %v; want %+v", got, err, sub)
	}
	if _, err := s.Subscription(ctx, other.ID, sub.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's subscription: %v", err)
	}
	bad := newSubscription(p, c, t0)
	bad.PlanID = "nope"
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertSubscription(ctx, bad) }); err == nil {
		t.Fatal("a subscription to a missing plan was stored")
	}

	// Update every mutable field.
	pay := storedPayment(t, s, m, xaalis.ModeTest, t0)
	cancelled := t0.Add(time.Hour)
	want := *sub
	want.PlanID, want.Status, want.Provider, want.CancelAtPeriodEnd = p2.ID, xaalis.SubscriptionCancelled, "", true
	want.CurrentPeriodStart, want.CurrentPeriodEnd = t0.AddDate(0, 1, 0), t0.AddDate(0, 2, 0)
	want.NextActionAt, want.FailedAttempts, want.LatestPaymentID = t0.Add(26*time.Hour), 2, pay.ID
	want.CancelledAt, want.Metadata, want.UpdatedAt = &cancelled, map[string]string{"seat": "2", "team": "b"}, cancelled
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.SubscriptionForUpdate(ctx, sub.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(cur, sub) {
			return fmt.Errorf("subscription for update = %+v", cur)
		}
		next := want
		return tx.UpdateSubscription(ctx, &next)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.Subscription(ctx, m.ID, sub.ID)
	if err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("updated subscription = %+v, %v; want %+v", got, err, &want)
	}
	// And back: the latest payment and cancellation clear.
	want.Status, want.LatestPaymentID, want.CancelledAt, want.Metadata = xaalis.SubscriptionActive, "", nil, map[string]string{}
	err = s.Update(ctx, func(tx xaalis.Tx) error { next := want; return tx.UpdateSubscription(ctx, &next) })
	if err != nil {
		t.Fatal(err)
	}
	if got, err = s.Subscription(ctx, m.ID, sub.ID); err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("cleared subscription = %+v, %v; want %+v", got, err, &want)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if _, err := tx.SubscriptionForUpdate(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("missing subscription for update: %v", err)
		}
		if err := tx.UpdateSubscription(ctx, &xaalis.Subscription{ID: "nope", PlanID: p.ID, Status: xaalis.SubscriptionActive}); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("update missing subscription: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testSubscriptionList(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	p := newPlan(t, s, m, xaalis.ModeTest)
	c := newCustomer(t, s, m, xaalis.ModeTest, "+221770000051", t0)
	statuses := []xaalis.SubscriptionStatus{xaalis.SubscriptionActive, xaalis.SubscriptionCancelled,
		xaalis.SubscriptionActive, xaalis.SubscriptionExpired, xaalis.SubscriptionActive}
	var subs []*xaalis.Subscription
	for i, st := range statuses {
		sub := newSubscription(p, c, t0.Add(time.Duration(i)*time.Hour))
		sub.Status = st
		insertSubscription(t, s, sub)
		subs = append(subs, sub)
	}
	lp := newPlan(t, s, m, xaalis.ModeLive)
	live := newSubscription(lp, newCustomer(t, s, m, xaalis.ModeLive, "+221770000051", t0), t0.Add(9*time.Hour))
	insertSubscription(t, s, live)
	op := newPlan(t, s, other, xaalis.ModeTest)
	insertSubscription(t, s, newSubscription(op, newCustomer(t, s, other, xaalis.ModeTest, "+221770000051", t0), t0))

	for _, c := range []struct {
		status xaalis.SubscriptionStatus
		page   xaalis.PageRequest
		total  int
		want   []*xaalis.Subscription
	}{
		{"", xaalis.PageRequest{Page: 1, PerPage: 3}, 5, []*xaalis.Subscription{subs[4], subs[3], subs[2]}},
		{"", xaalis.PageRequest{Page: 2, PerPage: 3}, 5, []*xaalis.Subscription{subs[1], subs[0]}},
		{xaalis.SubscriptionActive, xaalis.PageRequest{Page: 1, PerPage: 2}, 3, []*xaalis.Subscription{subs[4], subs[2]}},
		{xaalis.SubscriptionActive, xaalis.PageRequest{Page: 2, PerPage: 2}, 3, []*xaalis.Subscription{subs[0]}},
		{xaalis.SubscriptionCancelled, xaalis.PageRequest{Page: 1, PerPage: 10}, 1, []*xaalis.Subscription{subs[1]}},
		{xaalis.SubscriptionExpired, xaalis.PageRequest{Page: 1, PerPage: 10}, 1, []*xaalis.Subscription{subs[3]}},
	} {
		list, total, err := s.Subscriptions(ctx, m.ID, xaalis.ModeTest, c.status, c.page)
		if err != nil || total != c.total || !reflect.DeepEqual(subscriptionIDs(list), subscriptionIDs(c.want)) {
			t.Fatalf("status %q page %d: %v (%d), %v; want %v (%d)", c.status, c.page.Page, subscriptionIDs(list), total,
				err, subscriptionIDs(c.want), c.total)
		}
		for i, sub := range list {
			if !reflect.DeepEqual(sub, c.want[i]) {
				t.Fatalf("listed %+v, want %+v", sub, c.want[i])
			}
		}
	}
	list, total, err := s.Subscriptions(ctx, m.ID, xaalis.ModeLive, "", xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != live.ID {
		t.Fatalf("live subscriptions: %v (%d), %v", subscriptionIDs(list), total, err)
	}
}

func testDueSubscriptions(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	p, op := newPlan(t, s, m, xaalis.ModeTest), newPlan(t, s, other, xaalis.ModeLive)
	c, oc := newCustomer(t, s, m, xaalis.ModeTest, "+221770000052", t0), newCustomer(t, s, other, xaalis.ModeLive, "+221770000052", t0)
	now := t0.Add(30 * 24 * time.Hour)
	mk := func(p *xaalis.Plan, c *xaalis.Customer, st xaalis.SubscriptionStatus, next time.Time) *xaalis.Subscription {
		sub := newSubscription(p, c, t0)
		sub.Status, sub.NextActionAt = st, next
		insertSubscription(t, s, sub)
		return sub
	}
	late := mk(p, c, xaalis.SubscriptionActive, now.Add(-time.Hour))
	onTime := mk(op, oc, xaalis.SubscriptionActive, now) // due exactly now: due
	oldest := mk(op, oc, xaalis.SubscriptionActive, now.Add(-48*time.Hour))
	mk(p, c, xaalis.SubscriptionActive, now.Add(time.Second))      // not yet
	mk(p, c, xaalis.SubscriptionCancelled, now.Add(-72*time.Hour)) // cancelled
	mk(op, oc, xaalis.SubscriptionExpired, now.Add(-72*time.Hour)) // expired
	mk(op, oc, xaalis.SubscriptionActive, now.Add(24*time.Hour))   // not yet

	due, err := s.DueSubscriptions(ctx, now, 10)
	if err != nil || !reflect.DeepEqual(subscriptionIDs(due), []string{oldest.ID, late.ID, onTime.ID}) {
		t.Fatalf("due subscriptions: %v, %v; want %v", subscriptionIDs(due), err, []string{oldest.ID, late.ID, onTime.ID})
	}
	if !reflect.DeepEqual(due[1], late) {
		t.Fatalf("due subscription = %+v, want %+v", due[1], late)
	}
	due, err = s.DueSubscriptions(ctx, now, 1)
	if err != nil || len(due) != 1 || due[0].ID != oldest.ID {
		t.Fatalf("due subscriptions, limit 1: %v, %v", subscriptionIDs(due), err)
	}
	// Cancelling one takes it out of the due list.
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.SubscriptionForUpdate(ctx, oldest.ID)
		if err != nil {
			return err
		}
		cur.Status, cur.CancelledAt = xaalis.SubscriptionCancelled, &now
		return tx.UpdateSubscription(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	due, err = s.DueSubscriptions(ctx, now, 10)
	if err != nil || !reflect.DeepEqual(subscriptionIDs(due), []string{late.ID, onTime.ID}) {
		t.Fatalf("due subscriptions after a cancellation: %v, %v", subscriptionIDs(due), err)
	}
}

func customerIDs(cs []*xaalis.Customer) []string {
	return pluck(cs, func(x *xaalis.Customer) string { return x.ID })
}

func testCustomers(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	var cs []*xaalis.Customer
	for i := range 5 {
		cs = append(cs, newCustomer(t, s, m, xaalis.ModeTest, fmt.Sprintf("+22177000006%d", i), t0.Add(time.Duration(i)*time.Minute)))
	}
	live := newCustomer(t, s, m, xaalis.ModeLive, "+221770000060", t0.Add(time.Hour)) // a phone of the test list too
	newCustomer(t, s, other, xaalis.ModeTest, "+221770000060", t0.Add(time.Hour))

	for _, c := range []struct {
		page xaalis.PageRequest
		want []*xaalis.Customer
	}{
		{xaalis.PageRequest{Page: 1, PerPage: 2}, []*xaalis.Customer{cs[4], cs[3]}},
		{xaalis.PageRequest{Page: 2, PerPage: 2}, []*xaalis.Customer{cs[2], cs[1]}},
		{xaalis.PageRequest{Page: 3, PerPage: 2}, []*xaalis.Customer{cs[0]}},
		{xaalis.PageRequest{Page: 4, PerPage: 2}, nil},
	} {
		list, total, err := s.Customers(ctx, xaalis.CustomerFilter{MerchantID: m.ID, Mode: xaalis.ModeTest}, c.page)
		if err != nil || total != 5 || !reflect.DeepEqual(customerIDs(list), customerIDs(c.want)) {
			t.Fatalf("page %d: %v (%d), %v; want %v", c.page.Page, customerIDs(list), total, err, customerIDs(c.want))
		}
		for i, got := range list {
			if !reflect.DeepEqual(got, c.want[i]) {
				t.Fatalf("listed %+v, want %+v", got, c.want[i])
			}
		}
	}
	list, total, err := s.Customers(ctx, xaalis.CustomerFilter{MerchantID: m.ID, Mode: xaalis.ModeLive}, xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || total != 1 || len(list) != 1 || !reflect.DeepEqual(list[0], live) {
		t.Fatalf("live customers: %v (%d), %v", customerIDs(list), total, err)
	}

	err = s.Update(ctx, func(tx xaalis.Tx) error {
		got, err := tx.CustomerForUpdate(ctx, m.ID, cs[2].ID)
		if err != nil || !reflect.DeepEqual(got, cs[2]) {
			return fmt.Errorf("customer for update = %+v, %v", got, err)
		}
		if _, err := tx.CustomerForUpdate(ctx, other.ID, cs[2].ID); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("another merchant's customer: %v", err)
		}
		if _, err := tx.CustomerForUpdate(ctx, m.ID, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("missing customer: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testPlanByID(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	p, op := newPlan(t, s, m, xaalis.ModeTest), newPlan(t, s, other, xaalis.ModeLive)
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		for _, want := range []*xaalis.Plan{p, op} {
			got, err := tx.PlanByID(ctx, want.ID)
			if err != nil || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("plan by id = %+v, %v; want %+v", got, err, want)
			}
		}
		if _, err := tx.PlanByID(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("missing plan: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
