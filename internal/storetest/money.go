package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

const testMode = string(xaalis.ModeTest)

// account names a merchant's account in test mode.
func account(m *xaalis.Merchant, bucket string) string {
	return ledger.Merchant(testMode, m.ID, bucket)
}

var clearing = ledger.Provider(testMode, "channel_a", ledger.Clearing)

// newEntry builds an entry of merchant m (none when m is nil).
func newEntry(m *xaalis.Merchant, kind, refID string, at time.Time, ps ...ledger.Posting) *ledger.Entry {
	e := &ledger.Entry{ID: xaalis.NewUUIDv7(), Mode: testMode, Kind: kind, RefType: "transaction", RefID: refID,
		Postings: ps, CreatedAt: at}
	if m != nil {
		e.MerchantID = m.ID
	}
	return e
}

func postEntry(s xaalis.Store, e *ledger.Entry) error {
	ctx := context.Background()
	return s.Update(ctx, func(tx xaalis.Tx) error { return tx.PostEntry(ctx, e) })
}

func mustPost(t testing.TB, s xaalis.Store, e *ledger.Entry) {
	t.Helper()
	if err := postEntry(s, e); err != nil {
		t.Fatalf("post %s: %v", e.Kind, err)
	}
}

// wantBalances checks cached balances in a currency and their time.
func wantBalances(t testing.TB, s xaalis.Store, cur xaalis.Currency, want map[string]int64, at time.Time) {
	t.Helper()
	accounts := make([]string, 0, len(want))
	for a := range want {
		accounts = append(accounts, a)
	}
	got, when, err := s.Balances(context.Background(), accounts, cur)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !when.Equal(at) {
		t.Fatalf("balances %v at %v, want %v at %v", got, when, want, at)
	}
}

func wantClean(t testing.TB, s xaalis.Store) {
	t.Helper()
	ps, err := s.CheckLedger(context.Background())
	if err != nil || len(ps) != 0 {
		t.Fatalf("ledger check: %v, %v", ps, err)
	}
}

func wantNoEntries(t testing.TB, s xaalis.Store, refID string) {
	t.Helper()
	es, err := s.Entries(context.Background(), refID)
	if err != nil || len(es) != 0 {
		t.Fatalf("entries of %s: %d, %v", refID, len(es), err)
	}
}

func testLedgerPost(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	avail, reserved := account(m, ledger.Available), account(m, ledger.Reserved)
	fees, world := ledger.Fees(testMode), ledger.World(testMode)
	e1 := newEntry(m, "payment.success", "pay-1", t0, ledger.Move(clearing, avail, "XOF", 1000)...)
	mustPost(t, s, e1)
	// An account twice in one entry.
	e2 := newEntry(m, "payout.reserve", "pay-1", t0.Add(time.Minute),
		ledger.Posting{Account: avail, Currency: "XOF", Amount: -300},
		ledger.Posting{Account: reserved, Currency: "XOF", Amount: 100},
		ledger.Posting{Account: reserved, Currency: "XOF", Amount: 200})
	mustPost(t, s, e2)
	// Two currencies, each summing to zero; no merchant.
	e3 := newEntry(nil, "fx", "fx-1", t0.Add(2*time.Minute),
		ledger.Posting{Account: clearing, Currency: "EUR", Amount: -50},
		ledger.Posting{Account: avail, Currency: "EUR", Amount: 50},
		ledger.Posting{Account: world, Currency: "XOF", Amount: -70},
		ledger.Posting{Account: fees, Currency: "XOF", Amount: 70})
	mustPost(t, s, e3)

	missing := account(m, ledger.Pending)
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 700, reserved: 300, clearing: -1000, missing: 0}, t0.Add(time.Minute))
	wantBalances(t, s, xaalis.EUR, map[string]int64{avail: 50, clearing: -50}, t0.Add(2*time.Minute))
	wantBalances(t, s, xaalis.XOF, map[string]int64{missing: 0}, time.Time{})
	if got, at, err := s.Balances(ctx, nil, xaalis.XOF); err != nil || len(got) != 0 || !at.IsZero() {
		t.Fatalf("no accounts: %v %v %v", got, at, err)
	}

	es, err := s.Entries(ctx, "pay-1")
	if err != nil || len(es) != 2 {
		t.Fatalf("entries: %d, %v", len(es), err)
	}
	for i, want := range []*ledger.Entry{e1, e2} {
		if !reflect.DeepEqual(es[i], want) {
			t.Fatalf("entry %d = %+v, want %+v", i, es[i], want)
		}
	}
	es, err = s.Entries(ctx, "fx-1")
	if err != nil || len(es) != 1 || es[0].MerchantID != "" || !reflect.DeepEqual(es[0].Postings, e3.Postings) {
		t.Fatalf("entries without a merchant: %+v, %v", es, err)
	}
	wantNoEntries(t, s, "nope")

	// Insertion order, not time order.
	late := newEntry(m, "a", "order", t0.Add(time.Hour), ledger.Move(clearing, avail, "XOF", 1)...)
	early := newEntry(m, "b", "order", t0, ledger.Move(clearing, avail, "XOF", 2)...)
	mustPost(t, s, late)
	mustPost(t, s, early)
	if es, _ := s.Entries(ctx, "order"); len(es) != 2 || es[0].ID != late.ID || es[1].ID != early.ID {
		t.Fatalf("entries not in insertion order: %+v", es)
	}
	wantClean(t, s)
}

func testLedgerUnbalanced(t *testing.T, s xaalis.Store) {
	m := NewMerchant(t, s)
	avail := account(m, ledger.Available)
	for _, e := range []*ledger.Entry{
		newEntry(m, "bad", "unbalanced", t0, ledger.Posting{Account: avail, Currency: "XOF", Amount: 100},
			ledger.Posting{Account: clearing, Currency: "XOF", Amount: -90}),
		newEntry(m, "bad", "unbalanced", t0, ledger.Posting{Account: avail, Currency: "XOF", Amount: 100},
			ledger.Posting{Account: clearing, Currency: "EUR", Amount: -100}),
		newEntry(m, "bad", "unbalanced", t0, ledger.Posting{Account: avail, Currency: "XOF", Amount: 0},
			ledger.Posting{Account: clearing, Currency: "XOF", Amount: 0}),
		newEntry(m, "bad", "unbalanced", t0),
	} {
		if err := postEntry(s, e); !errors.Is(err, ledger.ErrUnbalanced) {
			t.Fatalf("%+v: err = %v, want ErrUnbalanced", e.Postings, err)
		}
	}
	wantNoEntries(t, s, "unbalanced")
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 0, clearing: 0}, time.Time{})
	wantClean(t, s)
}

func testLedgerNegative(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	avail, reserved, pending := account(m, ledger.Available), account(m, ledger.Reserved), account(m, ledger.Pending)
	world := ledger.World(testMode)
	mustPost(t, s, newEntry(m, "payment.success", "seed", t0, ledger.Move(clearing, avail, "XOF", 1000)...))

	// Below zero on an existing row, after another entry of the same
	// transaction: the whole transaction rolls back.
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.PostEntry(ctx, newEntry(m, "ok", "neg", t0.Add(time.Minute), ledger.Move(clearing, avail, "XOF", 100)...)); err != nil {
			return err
		}
		return tx.PostEntry(ctx, newEntry(m, "too much", "neg", t0.Add(time.Minute), ledger.Move(avail, world, "XOF", 1500)...))
	})
	if !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("overdraw available: err = %v, want ErrNegative", err)
	}
	// Below zero on a new row.
	err = postEntry(s, newEntry(m, "too much", "neg", t0.Add(time.Minute), ledger.Move(reserved, pending, "XOF", 5)...))
	if !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("overdraw a new reserved: err = %v, want ErrNegative", err)
	}
	wantNoEntries(t, s, "neg")
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 1000, reserved: 0, pending: 0, world: 0, clearing: -1000}, t0)
	wantClean(t, s)

	// Exactly zero is allowed; accounts that are not non-negative may go
	// below zero (a merchant's pending memo, the world, a provider).
	mustPost(t, s, newEntry(m, "payout", "ok", t0.Add(time.Hour), ledger.Move(avail, world, "XOF", 1000)...))
	mustPost(t, s, newEntry(m, "memo", "ok", t0.Add(time.Hour), ledger.Move(pending, world, "XOF", 5)...))
	mustPost(t, s, newEntry(m, "out", "ok", t0.Add(time.Hour), ledger.Move(world, clearing, "XOF", 2000)...))
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 0, pending: -5, world: -995, clearing: 1000}, t0.Add(time.Hour))
	wantClean(t, s)

	// Debt: an entry that allows it takes available below zero (a refund);
	// a credit to a negative available passes and recovers part of it;
	// a debit without AllowDebt is refused while available is negative,
	// and so is one that would end below zero, even on a new row.
	owed := newEntry(m, "refund.reserve", "debt", t0.Add(2*time.Hour), ledger.Move(avail, reserved, "XOF", 700)...)
	owed.AllowDebt = true
	mustPost(t, s, owed)
	mustPost(t, s, newEntry(m, "payment.success", "debt", t0.Add(2*time.Hour), ledger.Move(clearing, avail, "XOF", 300)...))
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: -400, reserved: 700}, t0.Add(2*time.Hour))
	err = postEntry(s, newEntry(m, "payout.reserve", "debt-no", t0.Add(3*time.Hour), ledger.Move(avail, reserved, "XOF", 1)...))
	if !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("debit of an indebted available: err = %v, want ErrNegative", err)
	}
	m2 := NewMerchant(t, s)
	err = postEntry(s, newEntry(m2, "payout.reserve", "debt-no", t0.Add(3*time.Hour), ledger.Move(account(m2, ledger.Available), account(m2, ledger.Reserved), "XOF", 1)...))
	if !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("overdraw a new available: err = %v, want ErrNegative", err)
	}
	wantNoEntries(t, s, "debt-no")
	mustPost(t, s, newEntry(m, "payment.success", "debt", t0.Add(3*time.Hour), ledger.Move(clearing, avail, "XOF", 500)...))
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 100, reserved: 700}, t0.Add(3*time.Hour))
	wantClean(t, s)
}

func testLockBalance(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	avail := account(m, ledger.Available)
	lock := func() int64 {
		t.Helper()
		var b int64
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) { b, err = tx.LockBalance(ctx, avail, xaalis.XOF); return err }); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := lock(); b != 0 {
		t.Fatalf("new balance = %d", b)
	}
	if b := lock(); b != 0 { // the row exists now
		t.Fatalf("balance = %d", b)
	}
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 0}, time.Time{})
	wantClean(t, s)
	mustPost(t, s, newEntry(m, "payment.success", "p", t0, ledger.Move(clearing, avail, "XOF", 1000)...))
	if b := lock(); b != 1000 {
		t.Fatalf("balance after a posting = %d", b)
	}
	// Locking in one currency leaves the other alone.
	var eur int64
	if err := s.Update(ctx, func(tx xaalis.Tx) (err error) { eur, err = tx.LockBalance(ctx, avail, xaalis.EUR); return err }); err != nil || eur != 0 {
		t.Fatalf("EUR balance = %d, %v", eur, err)
	}
	wantClean(t, s)
}

// testLedgerConcurrent spends one balance from many transactions at once:
// LockBalance makes them take turns, so exactly the affordable ones pass.
func testLedgerConcurrent(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	avail, world := account(m, ledger.Available), ledger.World(testMode)
	mustPost(t, s, newEntry(m, "payment.success", "seed", t0, ledger.Move(clearing, avail, "XOF", 1000)...))
	var spent atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			posted := false
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				posted = false
				b, err := tx.LockBalance(ctx, avail, xaalis.XOF)
				if err != nil || b < 100 {
					return err
				}
				posted = true
				return tx.PostEntry(ctx, newEntry(m, "payout", fmt.Sprint("spend-", i), t0.Add(time.Minute),
					ledger.Move(avail, world, "XOF", 100)...))
			})
			if err != nil {
				t.Error(err)
				return
			}
			if posted {
				spent.Add(1)
			}
		}()
	}
	wg.Wait()
	if spent.Load() != 10 {
		t.Fatalf("%d spends went through, want 10", spent.Load())
	}
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 0, world: 1000}, t0.Add(time.Minute))
	wantClean(t, s)
}

// testLedgerCheckedDebits spends one balance from many transactions at
// once with checked debits alone (no LockBalance): whether the store
// checks them as they are posted or at commit, exactly the affordable
// ones commit, the others fail with ledger.ErrNegative, and available
// never goes below zero.
func testLedgerCheckedDebits(t *testing.T, s xaalis.Store) {
	m := NewMerchant(t, s)
	avail, reserved := account(m, ledger.Available), account(m, ledger.Reserved)
	mustPost(t, s, newEntry(m, "payment.success", "seed", t0, ledger.Move(clearing, avail, "XOF", 1000)...))
	var spent, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := postEntry(s, newEntry(m, "payout.reserve", fmt.Sprint("checked-", i), t0.Add(time.Minute),
				ledger.Move(avail, reserved, "XOF", 100)...))
			switch {
			case err == nil:
				spent.Add(1)
			case errors.Is(err, ledger.ErrNegative):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if spent.Load() != 10 || refused.Load() != 15 {
		t.Fatalf("%d debits committed and %d were refused, want 10 and 15", spent.Load(), refused.Load())
	}
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 0, reserved: 1000}, t0.Add(time.Minute))
	wantClean(t, s)
}

// testLedgerCheckAtCommit: a store that checks debits of available at
// commit (xaalis.CommitChecks) holds no lock on the balance before it:
// a second transaction spends the balance while the first is still open,
// and the first then fails at its commit with insufficient_balance and
// the figures of the moment. A store that checks as it posts is skipped.
func testLedgerCheckAtCommit(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	avail, reserved := account(m, ledger.Available), account(m, ledger.Reserved)
	mustPost(t, s, newEntry(m, "payment.success", "seed", t0, ledger.Move(clearing, avail, "XOF", 1000)...))
	at := t0.Add(time.Minute)
	posted := make(chan bool)
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Update(ctx, func(tx xaalis.Tx) error {
			if c, ok := tx.(xaalis.CommitChecks); !ok || !c.ChecksAtCommit() {
				posted <- false
				return nil
			}
			// A credit, then a debit the balance covers now but not once
			// the other transaction has committed.
			if err := tx.PostEntry(ctx, newEntry(m, "payment.success", "first", at, ledger.Move(clearing, avail, "XOF", 100)...)); err != nil {
				return err
			}
			if err := tx.PostEntry(ctx, newEntry(m, "payout.reserve", "first", at, ledger.Move(avail, reserved, "XOF", 800)...)); err != nil {
				return err
			}
			posted <- true
			<-release
			return nil
		})
	}()
	if !<-posted {
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		t.Skip("the store checks debits as they are posted")
	}
	second, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := s.Update(second, func(tx xaalis.Tx) error {
		return tx.PostEntry(second, newEntry(m, "payout.reserve", "second", at, ledger.Move(avail, reserved, "XOF", 700)...))
	})
	cancel()
	close(release)
	if err != nil {
		t.Fatalf("the second debit, while the first transaction is open: %v (it must not wait for it)", err)
	}
	err = <-first
	var e *xaalis.Error
	if !errors.As(err, &e) || e.Code != xaalis.EInsufficientBalance || !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("the first transaction's commit: %v, want insufficient_balance caused by ErrNegative", err)
	}
	// 300 left by the second, plus the first's own credit of 100.
	if got := fmt.Sprint(e.Context["currency"], " ", e.Context["available"], " ", e.Context["required"]); got != "XOF 4.00 8.00" {
		t.Fatalf("figures: %s, want XOF 4.00 8.00 (400 and 800 minor units)", got)
	}
	wantNoEntries(t, s, "first")
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: 300, reserved: 700}, at)
	wantClean(t, s)
}

// testLedgerConcurrentCross posts, from many transactions at once, entries
// that name the same accounts in opposite orders: balance rows are locked
// in one order whatever the postings' order, so none deadlocks.
func testLedgerConcurrentCross(t *testing.T, s xaalis.Store) {
	m := NewMerchant(t, s)
	a, b, c := clearing, ledger.World(testMode), account(m, ledger.Pending)
	orders := [][]string{{a, b, c}, {c, b, a}, {b, c, a}, {a, c, b}}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := orders[i%len(orders)]
			e := newEntry(m, "cross", "cross", t0, ledger.Posting{Account: o[0], Currency: "XOF", Amount: -3},
				ledger.Posting{Account: o[1], Currency: "XOF", Amount: 1}, ledger.Posting{Account: o[2], Currency: "XOF", Amount: 2})
			if err := postEntry(s, e); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var sum int64
	got, _, err := s.Balances(context.Background(), []string{a, b, c}, xaalis.XOF)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		sum += v
	}
	if es, _ := s.Entries(context.Background(), "cross"); len(es) != 24 || sum != 0 {
		t.Fatalf("%d entries, balances %v", len(es), got)
	}
	wantClean(t, s)
}

// LedgerCorruption checks that CheckLedger finds what raw SQL breaks
// behind the store's back. exec runs one statement (no parameters, valid
// in both dialects) on the same database as s.
func LedgerCorruption(t *testing.T, s xaalis.Store, exec func(query string) error) {
	t.Helper()
	m := NewMerchant(t, s)
	avail := account(m, ledger.Available)
	e1 := newEntry(m, "payment.success", "p", t0, ledger.Move(clearing, avail, "XOF", 1000)...)
	mustPost(t, s, e1)
	mustPost(t, s, newEntry(m, "payout", "p", t0, ledger.Move(avail, ledger.World(testMode), "XOF", 400)...))
	wantClean(t, s)
	check := func(want ...ledger.Problem) {
		t.Helper()
		got, err := s.CheckLedger(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("problems:\n%v\nwant\n%v", got, want)
		}
	}
	run := func(q string) {
		t.Helper()
		if err := exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// One row of the balance (PostgreSQL splits a hot balance in shards).
	run(`UPDATE ledger_balances SET balance = balance + 7 WHERE account = '` + avail + `' AND currency = 'XOF'
		AND balance = (SELECT max(balance) FROM ledger_balances WHERE account = '` + avail + `' AND currency = 'XOF')`)
	check(ledger.Problem{Kind: "balance_mismatch", Account: avail, Currency: "XOF", Cached: 607, Posted: 600})
	// A cached balance without postings, and a posting without a cached
	// balance that unbalances its entry.
	run(`INSERT INTO ledger_balances (account, currency, balance, non_negative) VALUES ('test:ghost', 'XOF', 5, false)`)
	run(`INSERT INTO ledger_postings (entry_id, line, account, currency, amount) VALUES ('` + e1.ID + `', 3, 'test:stray', 'XOF', 40)`)
	check(
		ledger.Problem{Kind: "balance_mismatch", Account: "test:ghost", Currency: "XOF", Cached: 5},
		ledger.Problem{Kind: "balance_mismatch", Account: avail, Currency: "XOF", Cached: 607, Posted: 600},
		ledger.Problem{Kind: "balance_mismatch", Account: "test:stray", Currency: "XOF", Posted: 40},
		ledger.Problem{Kind: "unbalanced_entry", EntryID: e1.ID, Currency: "XOF", Posted: 40},
	)
	// A cached count of transactions (a list's total_count) that is not
	// the rows': one payment, counted three times.
	insertTx(t, s, NewPayment(m, xaalis.ModeTest, "counted", t0))
	run(`UPDATE transaction_counts SET n = n + 2 WHERE merchant_id = '` + m.ID + `' AND n = 1`)
	check(
		ledger.Problem{Kind: "balance_mismatch", Account: "test:ghost", Currency: "XOF", Cached: 5},
		ledger.Problem{Kind: "balance_mismatch", Account: avail, Currency: "XOF", Cached: 607, Posted: 600},
		ledger.Problem{Kind: "balance_mismatch", Account: "test:stray", Currency: "XOF", Posted: 40},
		ledger.Problem{Kind: ledger.CountMismatch, Counted: m.ID + " test payment initiated", Cached: 3, Posted: 1},
		ledger.Problem{Kind: "unbalanced_entry", EntryID: e1.ID, Currency: "XOF", Posted: 40},
	)
}

// newChild builds a payout or refund of merchant m, not yet stored.
func newChild(m *xaalis.Merchant, mode xaalis.Mode, typ xaalis.TxType, parentID string, st xaalis.Status, minor int64, at time.Time) *xaalis.Transaction {
	return &xaalis.Transaction{
		ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Type: typ, Reference: xaalis.NewReference(),
		Status: st, Amount: xaalis.Amount{Minor: minor, Currency: xaalis.XOF}, LimitAmount: minor, Country: "SN",
		ParentID: parentID, PayerPhone: "+221770000030", ExpiresAt: at.Add(30 * time.Minute), CreatedAt: at, UpdatedAt: at,
	}
}

func testTransactionMoneyColumns(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	p := NewPayment(m, xaalis.ModeTest, "order-1", t0)
	insertTx(t, s, p)
	got, err := s.Transaction(ctx, m.ID, p.ID)
	if err != nil || got.ParentID != "" || got.Fee != (xaalis.Amount{}) || got.IdempotencyKey != "" || got.Description != "" ||
		got.DispatchedAt != nil {
		t.Fatalf("payment = %+v, %v", got, err)
	}
	dispatched := t0.Add(time.Minute)
	r := newChild(m, xaalis.ModeTest, xaalis.TypeRefund, p.ID, xaalis.StatusInitiated, 200000, t0)
	r.Fee, r.IdempotencyKey, r.Description, r.DispatchedAt = xaalis.Amount{Minor: 150, Currency: xaalis.XOF}, "idem-1", "damaged", &dispatched
	insertTx(t, s, r)
	got, err = s.Transaction(ctx, m.ID, r.ID)
	if err != nil || got.ParentID != p.ID || got.Fee != r.Fee || got.IdempotencyKey != "idem-1" || got.Description != "damaged" ||
		got.DispatchedAt == nil || !got.DispatchedAt.Equal(dispatched) || got.Type != xaalis.TypeRefund {
		t.Fatalf("refund = %+v, %v", got, err)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, r.ID)
		if err != nil {
			return err
		}
		again := t0.Add(time.Hour)
		cur.Status, cur.Fee, cur.Description, cur.DispatchedAt = xaalis.StatusPending, xaalis.Amount{Minor: 200, Currency: xaalis.XOF}, "x", &again
		return tx.UpdateTransaction(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Transaction(ctx, m.ID, r.ID)
	if got.Status != xaalis.StatusPending || got.Fee.Minor != 200 || got.Description != "x" || !got.DispatchedAt.Equal(t0.Add(time.Hour)) ||
		got.ParentID != p.ID || got.IdempotencyKey != "idem-1" {
		t.Fatalf("updated refund = %+v", got)
	}
	// parent_id names an existing transaction.
	orphan := newChild(m, xaalis.ModeTest, xaalis.TypeRefund, xaalis.NewUUIDv7(), xaalis.StatusInitiated, 100, t0)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, orphan) }); err == nil {
		t.Fatal("a refund of a missing payment was stored")
	}
}

func testRefundedAmount(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	p, q := NewPayment(m, xaalis.ModeTest, "p", t0), NewPayment(m, xaalis.ModeTest, "q", t0)
	insertTx(t, s, p)
	insertTx(t, s, q)
	minor := int64(100)
	for _, st := range []xaalis.Status{xaalis.StatusInitiated, xaalis.StatusPending, xaalis.StatusSuccess,
		xaalis.StatusFailed, xaalis.StatusCancelled, xaalis.StatusExpired} {
		insertTx(t, s, newChild(m, xaalis.ModeTest, xaalis.TypeRefund, p.ID, st, minor, t0))
		minor *= 2
	}
	insertTx(t, s, newChild(m, xaalis.ModeTest, xaalis.TypeRefund, q.ID, xaalis.StatusSuccess, 10000, t0))
	insertTx(t, s, newChild(m, xaalis.ModeTest, xaalis.TypePayout, p.ID, xaalis.StatusSuccess, 20000, t0))
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		for id, want := range map[string]int64{p.ID: 100 + 200 + 400, q.ID: 10000, "nope": 0} {
			got, err := tx.RefundedAmount(ctx, id)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("refunded amount of %s = %d, want %d", id, got, want)
			}
		}
		for id, want := range map[string]int64{p.ID: 400, q.ID: 10000, "nope": 0} {
			got, err := tx.SucceededRefundAmount(ctx, id)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("succeeded refund amount of %s = %d, want %d", id, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testTransactionByIdempotencyKeyAndMerchantRef: a payout's lookup finds
// the transaction of its Idempotency-Key and the one of its merchant_ref,
// each or neither, skips the key when there is none, and keeps the key's
// and the merchant_ref's namespaces (merchant, mode, key type) apart.
func testTransactionByIdempotencyKeyAndMerchantRef(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	byKey := newChild(m, xaalis.ModeTest, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	byKey.IdempotencyKey, byKey.MerchantRef = "k1", "po-1"
	insertTx(t, s, byKey)
	byRef := newChild(m, xaalis.ModeTest, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	byRef.MerchantRef = "po-2"
	insertTx(t, s, byRef)
	id := func(x *xaalis.Transaction) string {
		if x == nil {
			return ""
		}
		return x.ID
	}
	for _, c := range []struct {
		name            string
		merchant        string
		mode            xaalis.Mode
		key             string
		kt              xaalis.KeyType
		ref             string
		wantKey, wantRf string
	}{
		{"the key and its own merchant_ref", m.ID, xaalis.ModeTest, "k1", xaalis.KeySecret, "po-1", byKey.ID, byKey.ID},
		{"the key and another's merchant_ref", m.ID, xaalis.ModeTest, "k1", xaalis.KeySecret, "po-2", byKey.ID, byRef.ID},
		{"a new key and a taken merchant_ref", m.ID, xaalis.ModeTest, "k2", xaalis.KeySecret, "po-2", "", byRef.ID},
		{"no key and a taken merchant_ref", m.ID, xaalis.ModeTest, "", xaalis.KeySecret, "po-2", "", byRef.ID},
		{"the key and a free merchant_ref", m.ID, xaalis.ModeTest, "k1", xaalis.KeySecret, "po-3", byKey.ID, ""},
		{"neither", m.ID, xaalis.ModeTest, "k2", xaalis.KeySecret, "po-3", "", ""},
		{"no key and a free merchant_ref", m.ID, xaalis.ModeTest, "", xaalis.KeySecret, "po-3", "", ""},
		{"live mode", m.ID, xaalis.ModeLive, "k1", xaalis.KeySecret, "po-1", "", ""},
		{"another merchant", other.ID, xaalis.ModeTest, "k1", xaalis.KeySecret, "po-1", "", ""},
		{"a publishable key's merchant_ref", m.ID, xaalis.ModeTest, "k1", xaalis.KeyPublishable, "po-2", byKey.ID, ""},
	} {
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			k, r, err := tx.TransactionByIdempotencyKeyAndMerchantRef(ctx, c.merchant, c.mode, c.key, c.kt, c.ref)
			if err != nil {
				return err
			}
			if id(k) != c.wantKey || id(r) != c.wantRf {
				return fmt.Errorf("found %q and %q, want %q and %q", id(k), id(r), c.wantKey, c.wantRf)
			}
			if k != nil && (k.IdempotencyKey != "k1" || k.Type != xaalis.TypePayout || k.Amount.Minor != 5000) {
				return fmt.Errorf("by key: %+v", k)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func testTransactionByIdempotencyKey(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	x := newChild(m, xaalis.ModeTest, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	x.IdempotencyKey = "k1"
	insertTx(t, s, x)
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		got, err := tx.TransactionByIdempotencyKey(ctx, m.ID, xaalis.ModeTest, "k1")
		if err != nil || got.ID != x.ID || got.IdempotencyKey != "k1" {
			return fmt.Errorf("by key: %+v, %v", got, err)
		}
		for _, c := range []struct {
			merchant string
			mode     xaalis.Mode
			key      string
		}{{m.ID, xaalis.ModeLive, "k1"}, {other.ID, xaalis.ModeTest, "k1"}, {m.ID, xaalis.ModeTest, "k2"}} {
			if _, err := tx.TransactionByIdempotencyKey(ctx, c.merchant, c.mode, c.key); !errors.Is(err, xaalis.ErrNotFound) {
				return fmt.Errorf("%+v: %v, want not_found", c, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dup := newChild(m, xaalis.ModeTest, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	dup.IdempotencyKey = "k1"
	err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, dup) })
	if err == nil || errors.Is(err, xaalis.ErrDuplicateMerchantRef) {
		t.Fatalf("duplicate idempotency key: %v", err)
	}
	live := newChild(m, xaalis.ModeLive, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	live.IdempotencyKey = "k1"
	insertTx(t, s, live)
	otherKey := newChild(other, xaalis.ModeTest, xaalis.TypePayout, "", xaalis.StatusInitiated, 5000, t0)
	otherKey.IdempotencyKey = "k1"
	insertTx(t, s, otherKey)
	// A record lets its key go: the key finds nothing, and a new record
	// takes it (a key past its day names a new request).
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.ForgetTransactionKey(ctx, x.ID); err != nil {
			return err
		}
		if _, err := tx.TransactionByIdempotencyKey(ctx, m.ID, xaalis.ModeTest, "k1"); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("after forgetting: %v, want not_found", err)
		}
		if err := tx.ForgetTransactionKey(ctx, xaalis.NewUUIDv7()); !errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("forgetting an unknown transaction's key: %v", err)
		}
		return tx.InsertTransaction(ctx, dup)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Transaction(ctx, m.ID, x.ID); got == nil || got.IdempotencyKey != "" {
		t.Fatalf("the record that let its key go: %+v", got)
	}
}

func testDueDispatch(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	p := NewPayment(m, xaalis.ModeTest, "", t0.Add(-3*time.Hour)) // initiated: expired, not dispatched
	insertTx(t, s, p)
	mk := func(typ xaalis.TxType, st xaalis.Status, created time.Time, dispatched *time.Time) *xaalis.Transaction {
		parent := ""
		if typ == xaalis.TypeRefund {
			parent = p.ID
		}
		x := newChild(m, xaalis.ModeTest, typ, parent, st, 5000, created)
		x.DispatchedAt, x.Provider, x.ProviderRef = dispatched, "channel_a", "p-"+xaalis.NewUUIDv7()
		insertTx(t, s, x)
		return x
	}
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	a := mk(xaalis.TypePayout, xaalis.StatusInitiated, t0.Add(-time.Hour), nil)
	b := mk(xaalis.TypeRefund, xaalis.StatusPending, t0.Add(-3*time.Hour), at(-2*time.Hour))
	mk(xaalis.TypePayout, xaalis.StatusPending, t0.Add(-3*time.Hour), at(0))              // dispatched recently
	mk(xaalis.TypePayout, xaalis.StatusSuccess, t0.Add(-3*time.Hour), nil)                // done
	mk(xaalis.TypeRefund, xaalis.StatusFailed, t0.Add(-3*time.Hour), nil)                 // done
	mk(xaalis.TypeRefund, xaalis.StatusInitiated, t0, nil)                                // created recently
	mk(xaalis.TypePayout, xaalis.StatusPending, t0.Add(-3*time.Hour), at(-1*time.Minute)) // at Before exactly: not before it

	ids := func(xs []*xaalis.Transaction) []string {
		out := []string{}
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	due, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: t0, Limit: 10, Dispatch: true, Before: t0.Add(-time.Minute)})
	if err != nil || !reflect.DeepEqual(ids(due), []string{b.ID, a.ID}) {
		t.Fatalf("dispatch: %v, %v; want %v", ids(due), err, []string{b.ID, a.ID})
	}
	due, err = s.DueTransactions(ctx, xaalis.DueQuery{Now: t0, Limit: 1, Dispatch: true, Before: t0.Add(-time.Minute)})
	if err != nil || !reflect.DeepEqual(ids(due), []string{b.ID}) {
		t.Fatalf("dispatch, limit 1: %v, %v", ids(due), err)
	}
	// Expiry and reconciliation are about payments only.
	due, err = s.DueTransactions(ctx, xaalis.DueQuery{Now: t0.Add(time.Hour), Limit: 10, Expired: true})
	if err != nil || !reflect.DeepEqual(ids(due), []string{p.ID}) {
		t.Fatalf("expired: %v, %v; want only the payment", ids(due), err)
	}
	due, err = s.DueTransactions(ctx, xaalis.DueQuery{Now: t0, Limit: 10, Reconcile: true, Before: t0})
	if err != nil || len(due) != 0 {
		t.Fatalf("reconcile: %v, %v; want none", ids(due), err)
	}
}

// newPayoutRequest builds a submitted payout request, not yet stored.
func newPayoutRequest(m *xaalis.Merchant, mode xaalis.Mode, at time.Time) *xaalis.PayoutRequest {
	return &xaalis.PayoutRequest{
		ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Reference: xaalis.NewPayoutRequestReference(),
		Status: xaalis.PRSubmitted, Amount: xaalis.Amount{Minor: 1_000_000, Currency: xaalis.XOF},
		Fee: xaalis.Amount{Minor: 10_000, Currency: xaalis.XOF}, Net: xaalis.Amount{Minor: 990_000, Currency: xaalis.XOF},
		DestPhone: "+221770000040", DestIBAN: "SN08SN0100152000048500003035", DestBank: "CBAO", MerchantNote: "weekly",
		SubmittedAt: at, UpdatedAt: at,
	}
}

func insertPR(t testing.TB, s xaalis.Store, r *xaalis.PayoutRequest) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertPayoutRequest(ctx, r) }); err != nil {
		t.Fatalf("insert payout request: %v", err)
	}
}

func testPayoutRequest(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	r1, r2, r3 := newPayoutRequest(m, xaalis.ModeTest, t0), newPayoutRequest(m, xaalis.ModeTest, t0.Add(time.Hour)),
		newPayoutRequest(m, xaalis.ModeTest, t0.Add(2*time.Hour))
	r4, ro := newPayoutRequest(m, xaalis.ModeLive, t0.Add(3*time.Hour)), newPayoutRequest(other, xaalis.ModeTest, t0)
	for _, r := range []*xaalis.PayoutRequest{r1, r2, r3, r4, ro} {
		insertPR(t, s, r)
	}
	for _, key := range []string{r1.ID, r1.Reference} {
		got, err := s.PayoutRequest(ctx, m.ID, key)
		if err != nil || !reflect.DeepEqual(got, r1) {
			t.Fatalf("payout request by %s = %+v, %v; want %+v", key, got, err, r1)
		}
	}
	if _, err := s.PayoutRequest(ctx, other.ID, r1.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's payout request: %v", err)
	}
	// Without a merchant (the operator's lookup), any merchant's.
	for _, key := range []string{ro.ID, ro.Reference} {
		if got, err := s.PayoutRequest(ctx, "", key); err != nil || got.ID != ro.ID {
			t.Fatalf("payout request of any merchant by %s = %+v, %v", key, got, err)
		}
	}
	dup := newPayoutRequest(m, xaalis.ModeTest, t0)
	dup.Reference = r1.Reference
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertPayoutRequest(ctx, dup) }); err == nil {
		t.Fatal("a duplicate reference was stored")
	}
	list, err := s.PayoutRequests(ctx, m.ID, xaalis.ModeTest, 2)
	if err != nil || len(list) != 2 || list[0].ID != r3.ID || list[1].ID != r2.ID {
		t.Fatalf("latest payout requests: %d, %v", len(list), err)
	}
	if list, _ := s.PayoutRequests(ctx, m.ID, xaalis.ModeLive, 10); len(list) != 1 || list[0].ID != r4.ID {
		t.Fatalf("live payout requests: %d", len(list))
	}

	update := func(id string, f func(r *xaalis.PayoutRequest)) {
		t.Helper()
		err := s.Update(ctx, func(tx xaalis.Tx) error {
			r, err := tx.PayoutRequestForUpdate(ctx, id)
			if err != nil {
				return err
			}
			f(r)
			return tx.UpdatePayoutRequest(ctx, r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ts := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	complete := func(done time.Duration) func(r *xaalis.PayoutRequest) {
		return func(r *xaalis.PayoutRequest) {
			r.Status, r.ApprovedAt, r.CompletedAt, r.UpdatedAt = xaalis.PRCompleted, ts(10*time.Minute), ts(done), t0.Add(done)
		}
	}
	update(r1.ID, complete(5*time.Hour))
	update(r2.ID, complete(4*time.Hour))
	update(r4.ID, complete(4*time.Hour))
	update(r3.ID, func(r *xaalis.PayoutRequest) {
		r.Status, r.RejectionReason, r.FailureReason, r.UpdatedAt = xaalis.PRFailed, "n/a", "bank refused", t0.Add(6*time.Hour)
	})
	got, err := s.PayoutRequest(ctx, m.ID, r1.ID)
	if err != nil || got.Status != xaalis.PRCompleted || got.ApprovedAt == nil || !got.ApprovedAt.Equal(t0.Add(10*time.Minute)) ||
		got.CompletedAt == nil || !got.CompletedAt.Equal(t0.Add(5*time.Hour)) || !got.UpdatedAt.Equal(t0.Add(5*time.Hour)) ||
		!got.SubmittedAt.Equal(t0) || got.Amount != r1.Amount {
		t.Fatalf("completed = %+v, %v", got, err)
	}
	got, _ = s.PayoutRequest(ctx, m.ID, r3.Reference)
	if got.Status != xaalis.PRFailed || got.RejectionReason != "n/a" || got.FailureReason != "bank refused" || got.CompletedAt != nil {
		t.Fatalf("failed = %+v", got)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.UpdatePayoutRequest(ctx, &xaalis.PayoutRequest{ID: "nope"}) })
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error { _, err := tx.PayoutRequestForUpdate(ctx, "nope"); return err })
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("lock missing: %v", err)
	}

	for _, c := range []struct {
		page xaalis.PageRequest
		want []string
	}{
		{xaalis.PageRequest{Page: 1, PerPage: 1}, []string{r1.ID}},
		{xaalis.PageRequest{Page: 2, PerPage: 1}, []string{r2.ID}},
		{xaalis.PageRequest{Page: 3, PerPage: 1}, nil},
		{xaalis.PageRequest{Page: 1, PerPage: 10}, []string{r1.ID, r2.ID}},
	} {
		list, total, err := s.Settlements(ctx, m.ID, xaalis.ModeTest, c.page)
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		if err != nil || total != 2 || !reflect.DeepEqual(ids, c.want) {
			t.Fatalf("settlements %+v: %v (total %d), %v; want %v", c.page, ids, total, err, c.want)
		}
	}
	if list, total, _ := s.Settlements(ctx, m.ID, xaalis.ModeLive, xaalis.PageRequest{Page: 1, PerPage: 10}); total != 1 ||
		len(list) != 1 || list[0].ID != r4.ID {
		t.Fatalf("live settlements: %d of %d", len(list), total)
	}
	if list, total, _ := s.Settlements(ctx, other.ID, xaalis.ModeTest, xaalis.PageRequest{Page: 1, PerPage: 10}); total != 0 || len(list) != 0 {
		t.Fatalf("settlements of a merchant without any: %d of %d", len(list), total)
	}
}

func testPayoutRequestsSince(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, other := NewMerchant(t, s), NewMerchant(t, s)
	insertPR(t, s, newPayoutRequest(m, xaalis.ModeTest, t0))
	insertPR(t, s, newPayoutRequest(m, xaalis.ModeLive, t0.Add(time.Hour)))
	insertPR(t, s, newPayoutRequest(m, xaalis.ModeTest, t0.Add(2*time.Hour)))
	insertPR(t, s, newPayoutRequest(other, xaalis.ModeTest, t0.Add(time.Hour)))
	since := func(merchantID string, mode xaalis.Mode, at time.Time) (n int, oldest time.Time, err error) {
		err = s.Update(ctx, func(tx xaalis.Tx) error {
			n, oldest, err = tx.PayoutRequestsSince(ctx, merchantID, mode, at)
			return err
		})
		return
	}
	// Each mode counts its own: test requests never hold back live ones.
	for _, c := range []struct {
		mode   xaalis.Mode
		since  time.Time
		n      int
		oldest time.Time
	}{
		{xaalis.ModeTest, t0, 2, t0},
		{xaalis.ModeTest, t0.Add(time.Second), 1, t0.Add(2 * time.Hour)},
		{xaalis.ModeTest, t0.Add(3 * time.Hour), 0, time.Time{}},
		{xaalis.ModeLive, t0, 1, t0.Add(time.Hour)},
		{xaalis.ModeLive, t0.Add(time.Hour), 1, t0.Add(time.Hour)},
		{xaalis.ModeLive, t0.Add(time.Hour + time.Second), 0, time.Time{}},
	} {
		n, oldest, err := since(m.ID, c.mode, c.since)
		if err != nil || n != c.n || !oldest.Equal(c.oldest) {
			t.Fatalf("%s since %v: %d, %v, %v; want %d, %v", c.mode, c.since, n, oldest, err, c.n, c.oldest)
		}
	}
	if _, _, err := since("nope", xaalis.ModeTest, t0); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("missing merchant: %v", err)
	}
	// Concurrent submissions count each other: at most 6 in the window.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				n, _, err := tx.PayoutRequestsSince(ctx, m.ID, xaalis.ModeTest, t0)
				if err != nil || n >= 6 {
					return err
				}
				return tx.InsertPayoutRequest(ctx, newPayoutRequest(m, xaalis.ModeTest, t0.Add(time.Hour)))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, _, err := since(m.ID, xaalis.ModeTest, t0); err != nil || n != 6 {
		t.Fatalf("after concurrent submissions: %d, %v; want 6", n, err)
	}
}

func testOperatorToken(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	revoked := t0.Add(time.Hour)
	live := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "ops", Hash: hash("a"), CreatedAt: t0}
	old := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "old", Hash: hash("b"), CreatedAt: t0, RevokedAt: &revoked}
	for _, o := range []*xaalis.OperatorToken{live, old} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertOperatorToken(ctx, o) }); err != nil {
			t.Fatal(err)
		}
		got, err := s.OperatorTokenByHash(ctx, o.Hash)
		if err != nil || !reflect.DeepEqual(got, o) {
			t.Fatalf("token = %+v, %v; want %+v", got, err, o)
		}
	}
	if _, err := s.OperatorTokenByHash(ctx, hash("c")); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	dup := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "dup", Hash: hash("a"), CreatedAt: t0}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertOperatorToken(ctx, dup) }); err == nil {
		t.Fatal("a duplicate token hash was stored")
	}
}

// DebtFoldSeed is what a database migrated to 00011 holds for CheckDebtFold:
// merchant DebtFoldMerchant collected 810 XOF, then a dispute of 10 000
// held those 810 and owed 9 190 in the old chargeback_debt account.
const DebtFoldMerchant = "0190aaaa-0000-7000-8000-000000000001"

// DebtFoldRows are the seed's ledger rows: entries (id, kind), postings
// (entry, line, account, amount) and balances (account, balance,
// non_negative), all in XOF at t0.
var DebtFoldRows = struct {
	Entries  [][2]string
	Postings []struct {
		Entry   string
		Line    int
		Account string
		Amount  int64
	}
	Balances []struct {
		Account     string
		Balance     int64
		NonNegative bool
	}
}{
	Entries: [][2]string{{"seed-pay", "payment.success"}, {"seed-dispute", "dispute.open"}},
	Postings: []struct {
		Entry   string
		Line    int
		Account string
		Amount  int64
	}{
		{"seed-pay", 1, "test:provider:channel_a:clearing", -81000},
		{"seed-pay", 2, "test:merchant:" + DebtFoldMerchant + ":available", 81000},
		{"seed-dispute", 1, "test:merchant:" + DebtFoldMerchant + ":reserved", 1000000},
		{"seed-dispute", 2, "test:merchant:" + DebtFoldMerchant + ":available", -81000},
		{"seed-dispute", 3, "test:merchant:" + DebtFoldMerchant + ":chargeback_debt", -919000},
	},
	Balances: []struct {
		Account     string
		Balance     int64
		NonNegative bool
	}{
		{"test:provider:channel_a:clearing", -81000, false},
		{"test:merchant:" + DebtFoldMerchant + ":available", 0, true},
		{"test:merchant:" + DebtFoldMerchant + ":reserved", 1000000, true},
		{"test:merchant:" + DebtFoldMerchant + ":chargeback_debt", -919000, false},
	},
}

// CheckDebtFold checks a store opened (so migrated past 00012) over the
// DebtFoldRows seed: the chargeback debt moved into available by one
// balanced entry, the ledger is clean, a credit recovers part of the debt
// and a debit without AllowDebt is refused.
func CheckDebtFold(t *testing.T, s xaalis.Store) {
	t.Helper()
	avail := "test:merchant:" + DebtFoldMerchant + ":available"
	debt := "test:merchant:" + DebtFoldMerchant + ":chargeback_debt"
	reserved := "test:merchant:" + DebtFoldMerchant + ":reserved"
	got, _, err := s.Balances(context.Background(), []string{avail, debt, reserved}, xaalis.XOF)
	if err != nil {
		t.Fatal(err)
	}
	if got[avail] != -919000 || got[debt] != 0 || got[reserved] != 1000000 {
		t.Fatalf("after the migration: %v", got)
	}
	es, err := s.Entries(context.Background(), debt)
	if err != nil || len(es) != 1 || es[0].Kind != "debt.fold" || es[0].MerchantID != DebtFoldMerchant {
		t.Fatalf("fold entry: %v %+v", err, es)
	}
	wantClean(t, s)
	m := &xaalis.Merchant{ID: DebtFoldMerchant}
	mustPost(t, s, newEntry(m, "payment.success", "fold", t0.Add(time.Hour), ledger.Move(clearing, avail, "XOF", 50000)...))
	if err := postEntry(s, newEntry(m, "payout.reserve", "fold", t0.Add(time.Hour), ledger.Move(avail, reserved, "XOF", 1)...)); !errors.Is(err, ledger.ErrNegative) {
		t.Fatalf("debit of an indebted available: %v", err)
	}
	wantBalances(t, s, xaalis.XOF, map[string]int64{avail: -869000}, t0.Add(time.Hour))
	wantClean(t, s)
}
