package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// groupCommand is a payment as a batch writes it: the transaction, its
// first event and a ledger entry crediting the merchant, each a statement
// the batch merges with the other commands'.
func groupCommand(m *xaalis.Merchant, x *xaalis.Transaction) func(xaalis.Tx) error {
	ctx := context.Background()
	return func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, x); err != nil {
			return err
		}
		if err := tx.InsertEvent(ctx, &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
			Type: "payment.success", ObjectType: "transaction", ObjectID: x.ID, Data: []byte(`{}`), CreatedAt: pgT0,
			First: true}); err != nil {
			return err
		}
		return tx.PostEntry(ctx, &ledger.Entry{ID: xaalis.NewUUIDv7(), Mode: "test", MerchantID: m.ID,
			Kind: "payment.success", RefType: "transaction", RefID: x.ID, CreatedAt: pgT0, Postings: []ledger.Posting{
				{Account: ledger.Provider("test", "sim", ledger.Clearing), Currency: "XOF", Amount: -1000},
				{Account: ledger.Merchant("test", m.ID, ledger.Available), Currency: "XOF", Amount: 1000},
			}})
	}
}

// overdraw debits the merchant's available money by more than it holds.
func overdraw(m *xaalis.Merchant) func(xaalis.Tx) error {
	return func(tx xaalis.Tx) error {
		return tx.PostEntry(context.Background(), &ledger.Entry{ID: xaalis.NewUUIDv7(), Mode: "test", MerchantID: m.ID,
			Kind: "payout.reserve", RefType: "transaction", RefID: xaalis.NewUUIDv7(), CreatedAt: pgT0,
			Postings: []ledger.Posting{
				{Account: ledger.Merchant("test", m.ID, ledger.Available), Currency: "XOF", Amount: -1_000_000_000},
				{Account: ledger.Merchant("test", m.ID, ledger.Reserved), Currency: "XOF", Amount: 1_000_000_000},
			}})
	}
}

// batch runs fns as one batch: a first command holds the store's one
// worker until every other is queued behind it. It returns each one's
// error.
func batch(t *testing.T, s *postgres.Store, fns ...func(xaalis.Tx) error) []error {
	t.Helper()
	return batchCtx(t, s, nil, fns...)
}

// batchCtx is batch with each command's own context (ctxs[i], when ctxs
// has it): its request's.
func batchCtx(t *testing.T, s *postgres.Store, ctxs []context.Context, fns ...func(xaalis.Tx) error) []error {
	t.Helper()
	ctx := xaalis.Rerunnable(context.Background())
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Update(ctx, func(xaalis.Tx) error {
			once.Do(func() { close(held) })
			<-release
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	<-held
	errs := make([]error, len(fns))
	for i, fn := range fns {
		cctx := ctx
		if i < len(ctxs) && ctxs[i] != nil {
			cctx = xaalis.Rerunnable(ctxs[i])
		}
		wg.Go(func() { errs[i] = s.Update(cctx, fn) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.GroupQueued() < len(fns) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d commands queued", s.GroupQueued(), len(fns))
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	return errs
}

// TestGroupCommit: commands marked rerunnable that arrive together share
// one transaction, each table's rows in one statement; a command that
// fails in a batch (its fn, a constraint of a merged statement, a
// balance check at the commit) gets its own error and the others commit.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	s.SetGroupWorkers(1)
	m := storetest.NewMerchant(t, s)
	var all []*xaalis.Transaction
	commands := func(n int) ([]*xaalis.Transaction, []func(xaalis.Tx) error) {
		var xs []*xaalis.Transaction
		var fns []func(xaalis.Tx) error
		for i := range n {
			x := pgPayment(m, fmt.Sprintf("group-%d-%d", len(all), i))
			xs, fns = append(xs, x), append(fns, groupCommand(m, x))
		}
		all = append(all, xs...)
		return xs, fns
	}

	t.Run("one transaction", func(t *testing.T) {
		before := s.Stats()
		_, fns := commands(6)
		for i, err := range batch(t, s, fns...) {
			if err != nil {
				t.Fatalf("command %d: %v", i, err)
			}
		}
		after := s.Stats()
		if after.Reruns != before.Reruns {
			t.Fatalf("%d commands run again alone; want none", after.Reruns-before.Reruns)
		}
		// The holder's transaction (alone, writing nothing) and the six's.
		if tx, cmds := after.Transactions-before.Transactions, after.Commands-before.Commands; tx != 2 || cmds != 7 {
			t.Fatalf("%d transactions for %d commands; want the holder's and one for the six", tx, cmds)
		}
	})

	t.Run("fan-outs", func(t *testing.T) {
		// Three merchants' events in one batch, each fanned out to the
		// endpoints of its merchant and mode subscribed to it: with one, two
		// or more endpoints than the IDs made ahead.
		endpoint := func(m *xaalis.Merchant, at int, events ...string) *xaalis.WebhookEndpoint {
			w := &xaalis.WebhookEndpoint{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
				URL: fmt.Sprintf("https://shop.example/%d", at), Events: events, Format: xaalis.Format20260601,
				Secret: "whsec_" + xaalis.NewUUIDv7(), CreatedAt: pgT0.Add(time.Duration(at) * time.Second),
				UpdatedAt: pgT0.Add(time.Duration(at) * time.Second)}
			if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertWebhookEndpoint(ctx, w) }); err != nil {
				t.Fatal(err)
			}
			return w
		}
		one, two, many := storetest.NewMerchant(t, s), storetest.NewMerchant(t, s), storetest.NewMerchant(t, s)
		want := map[*xaalis.Merchant][]*xaalis.WebhookEndpoint{one: {endpoint(one, 0)}}
		want[two] = []*xaalis.WebhookEndpoint{endpoint(two, 0, "*"), endpoint(two, 2, xaalis.EventPaymentSuccess)}
		endpoint(two, 1, xaalis.EventPaymentFailed) // not subscribed
		for i := range xaalis.MaxWebhookEndpoints + 2 {
			want[many] = append(want[many], endpoint(many, i))
		}
		merchants := []*xaalis.Merchant{one, two, many}
		events := make([]*xaalis.Event, len(merchants))
		made := make([][]string, len(merchants))
		var fns []func(xaalis.Tx) error
		for i, m := range merchants {
			// The first command's event is not its object's first: written
			// at once, it leaves only its fan-out queued, ahead of the
			// other commands' events; their fan-outs must still follow them.
			events[i] = &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
				Type: xaalis.EventPaymentSuccess, ObjectType: "transaction", ObjectID: xaalis.NewUUIDv7(), First: i > 0,
				Data: []byte(`{}`), CreatedAt: pgT0.Add(time.Duration(i) * time.Minute)}
			fns = append(fns, func(tx xaalis.Tx) error {
				made[i] = nil
				if err := tx.InsertEvent(ctx, events[i]); err != nil {
					return err
				}
				return tx.InsertFanOut(ctx, events[i], func() string {
					id := xaalis.NewUUIDv7()
					made[i] = append(made[i], id)
					return id
				})
			})
		}
		before := s.Stats()
		for i, err := range batch(t, s, fns...) {
			if err != nil {
				t.Fatalf("command %d: %v", i, err)
			}
		}
		if tx := s.Stats().Transactions - before.Transactions; tx != 2 {
			t.Fatalf("%d transactions; want the holder's and one for the three", tx)
		}
		for i, m := range merchants {
			ds, err := s.Deliveries(ctx, events[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != len(want[m]) {
				t.Fatalf("event %d: %d deliveries, want %d", i, len(ds), len(want[m]))
			}
			// Those named by the IDs made ahead first, in their order; the
			// others, named at random, may sort anywhere by ID.
			slices.SortStableFunc(ds, func(a, b *xaalis.Delivery) int {
				pos := func(d *xaalis.Delivery) int {
					if k := slices.Index(made[i], d.ID); k >= 0 {
						return k
					}
					return len(made[i])
				}
				return pos(a) - pos(b)
			})
			ids, endpoints := map[string]bool{}, map[string]bool{}
			for k, d := range ds {
				w := want[m][k]
				if k >= xaalis.MaxWebhookEndpoints {
					// Named at random, the last deliveries come in any order.
					i := slices.IndexFunc(want[m], func(w *xaalis.WebhookEndpoint) bool { return w.ID == d.EndpointID })
					if i < xaalis.MaxWebhookEndpoints || endpoints[d.EndpointID] {
						t.Fatalf("event %d, delivery %d to %s", i, k, d.URL)
					}
					w = want[m][i]
				}
				endpoints[d.EndpointID] = true
				if d.EndpointID != w.ID || d.URL != w.URL || d.MerchantID != m.ID || d.Status != xaalis.DeliveryPending ||
					!d.NextAttemptAt.Equal(events[i].CreatedAt) || ids[d.ID] {
					t.Fatalf("event %d, delivery %d: %+v; want to %s", i, k, d, w.URL)
				}
				if k < xaalis.MaxWebhookEndpoints && d.ID != made[i][k] {
					t.Fatalf("event %d, delivery %d named %s, not the ID made for it, %s", i, k, d.ID, made[i][k])
				}
				ids[d.ID] = true
			}
		}
	})

	var twin *xaalis.Transaction
	failures := []struct {
		name string
		bad  func(xs []*xaalis.Transaction) func(xaalis.Tx) error
		want func(error) bool
		// twin: the failing command's twin is command 1, whose merchant_ref
		// it takes.
		twin bool
		// txs is how many transactions commit: the holder's, then the four
		// others' in one batch when the failing command's fn failed (it is
		// left out), or each alone when the database refused the batch.
		txs int64
	}{
		{"its fn fails", func([]*xaalis.Transaction) func(xaalis.Tx) error {
			return func(xaalis.Tx) error { return errBoom }
		}, func(err error) bool { return errors.Is(err, errBoom) }, false, 2},
		{"its merchant_ref is another command's of the batch", func(xs []*xaalis.Transaction) func(xaalis.Tx) error {
			twin = pgPayment(m, xs[1].MerchantRef)
			return groupCommand(m, twin)
		}, func(err error) bool { return errors.Is(err, xaalis.ErrDuplicateMerchantRef) }, true, 5},
		{"its merchant_ref was taken before", func([]*xaalis.Transaction) func(xaalis.Tx) error {
			return groupCommand(m, pgPayment(m, all[0].MerchantRef))
		}, func(err error) bool { return errors.Is(err, xaalis.ErrDuplicateMerchantRef) }, false, 5},
		{"it overdraws at the commit", func([]*xaalis.Transaction) func(xaalis.Tx) error {
			return overdraw(m)
		}, func(err error) bool { return xaalis.ErrorCode(err) == xaalis.EInsufficientBalance }, false, 5},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			xs, fns := commands(4)
			bad := len(fns) / 2
			fns = append(fns[:bad:bad], append([]func(xaalis.Tx) error{f.bad(xs)}, fns[bad:]...)...)
			before := s.Stats()
			errs := batch(t, s, fns...)
			after := s.Stats()
			if txs := after.Transactions - before.Transactions; txs != f.txs {
				t.Fatalf("%d transactions committed; want %d", txs, f.txs)
			}
			// Sent back to run alone: the command at fault, or all five.
			if reruns, want := after.Reruns-before.Reruns, map[bool]int64{true: 1, false: 5}[f.txs == 2]; reruns != want {
				t.Fatalf("%d commands run again alone; want %d", reruns, want)
			}
			if f.twin {
				// Run alone at once, either of the two may commit first:
				// the other is refused.
				if errs[bad] == nil && f.want(errs[1]) {
					errs[bad], errs[1] = errs[1], nil
					all[slices.Index(all, xs[1])] = twin
				}
			}
			for i, err := range errs {
				switch {
				case i == bad && !f.want(err):
					t.Fatalf("the failing command: %v", err)
				case i != bad && err != nil:
					t.Fatalf("command %d: %v", i, err)
				}
			}
		})
	}

	// Every command that succeeded is there whole, and nothing else.
	for _, x := range all {
		got, err := s.Transaction(ctx, m.ID, x.ID)
		if err != nil {
			t.Fatalf("transaction %s: %v", x.MerchantRef, err)
		}
		if got.MerchantRef != x.MerchantRef {
			t.Fatalf("transaction %s: merchant_ref %q", x.ID, got.MerchantRef)
		}
		if evs, err := s.Events(ctx, x.ID); err != nil || len(evs) != 1 || evs[0].Seq != 1 {
			t.Fatalf("events of %s: %v, %v", x.MerchantRef, evs, err)
		}
	}
	avail := ledger.Merchant("test", m.ID, ledger.Available)
	bal, _, err := s.Balances(ctx, []string{avail}, xaalis.XOF)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1000 * len(all)); bal[avail] != want {
		t.Fatalf("available %d, want %d", bal[avail], want)
	}
	problems, err := s.CheckLedger(ctx)
	if err != nil || len(problems) != 0 {
		t.Fatalf("ledger: %v, %v", problems, err)
	}
}

var errBoom = errors.New("boom")

// TestGroupSideBySide: the commands of a batch run at once and share their
// round trips. Six commands that each look up their merchant_ref and payer
// once make one round trip before the COMMIT, not six; commands that look
// twice make two. A command that waits for something else holds the
// others' statements for a moment only. A statement that fails sends
// every command of the batch back to run alone, and only the command at
// fault fails.
func TestGroupSideBySide(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	s.SetGroupWorkers(1)
	m := storetest.NewMerchant(t, s)
	type command struct {
		lookups int
		wait    time.Duration
		// payerMode is the mode the payer is written in: one that is not a
		// mode makes the upsert fail (a CHECK constraint).
		payerMode xaalis.Mode
		// looked is when the command's last lookup returned, or, with
		// wait, when its wait ended.
		looked time.Time
		x      *xaalis.Transaction
	}
	n := 0
	fn := func(c *command) func(xaalis.Tx) error {
		n++
		c.x = pgPayment(m, fmt.Sprintf("side-%d", n))
		c.x.PayerPhone = fmt.Sprintf("+22177001%04d", n)
		if c.payerMode == "" {
			c.payerMode = xaalis.ModeTest
		}
		write := groupCommand(m, c.x)
		return func(tx xaalis.Tx) error {
			if c.wait > 0 {
				time.Sleep(c.wait)
				c.looked = time.Now()
			}
			for range c.lookups {
				found, cust, err := tx.TransactionByMerchantRefAndPayer(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret,
					c.x.MerchantRef, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: c.payerMode,
						Phone: c.x.PayerPhone, CreatedAt: pgT0, UpdatedAt: pgT0})
				if err != nil {
					return err
				}
				if found != nil {
					return fmt.Errorf("merchant_ref %s found", c.x.MerchantRef)
				}
				c.x.CustomerID = cust.ID
			}
			if c.wait == 0 {
				c.looked = time.Now()
			}
			return write(tx)
		}
	}
	run := func(t *testing.T, cs ...*command) (errs []error, trips, transactions, reruns int64) {
		t.Helper()
		fns := make([]func(xaalis.Tx) error, len(cs))
		for i, c := range cs {
			fns[i] = fn(c)
		}
		before, tripsBefore := s.Stats(), s.BatchRoundTrips()
		errs = batch(t, s, fns...)
		after := s.Stats()
		return errs, s.BatchRoundTrips() - tripsBefore, after.Transactions - before.Transactions, after.Reruns - before.Reruns
	}
	committed := func(t *testing.T, cs ...*command) {
		t.Helper()
		for _, c := range cs {
			got, err := s.Transaction(ctx, m.ID, c.x.ID)
			if err != nil || got.CustomerID == "" || got.CustomerID != c.x.CustomerID {
				t.Fatalf("payment %s: %+v, %v", c.x.MerchantRef, got, err)
			}
			// Each command scanned its own answer, not another's.
			if cust, err := s.Customer(ctx, m.ID, got.CustomerID); err != nil || cust.Phone != c.x.PayerPhone {
				t.Fatalf("payment %s of %s: customer %+v, %v", c.x.MerchantRef, c.x.PayerPhone, cust, err)
			}
		}
	}

	// The round trips are counted with a wait long enough that only the
	// commands' own progress sends them: with muxWait's 2 ms, a command
	// the race detector's load kept off the CPU that long split a round
	// trip in two (a CI run: 3 round trips where 2).
	counting := func(t *testing.T) { t.Cleanup(s.SetMuxWait(10 * time.Second)) }

	t.Run("one round trip", func(t *testing.T) {
		counting(t)
		cs := make([]*command, 6)
		for i := range cs {
			cs[i] = &command{lookups: 1}
		}
		errs, trips, txs, reruns := run(t, cs...)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("command %d: %v", i, err)
			}
		}
		// The holder's transaction, alone, and the six's.
		if trips != 1 || txs != 2 || reruns != 0 {
			t.Fatalf("%d round trips, %d transactions, %d reruns; want 1, 2 and 0", trips, txs, reruns)
		}
		committed(t, cs...)
	})

	// A payout's lookups (its Idempotency-Key, its merchant_ref) go
	// together as well: six payouts, one round trip before the COMMIT.
	t.Run("a payout's lookups", func(t *testing.T) {
		counting(t)
		fns := make([]func(xaalis.Tx) error, 6)
		xs := make([]*xaalis.Transaction, len(fns))
		for i := range fns {
			n++
			x := pgPayment(m, fmt.Sprintf("side-po-%d", n))
			x.Type, x.IdempotencyKey = xaalis.TypePayout, fmt.Sprintf("side-key-%d", n)
			xs[i] = x
			write := groupCommand(m, x)
			fns[i] = func(tx xaalis.Tx) error {
				byKey, byRef, err := tx.TransactionByIdempotencyKeyAndMerchantRef(ctx, m.ID, xaalis.ModeTest,
					x.IdempotencyKey, xaalis.KeySecret, x.MerchantRef)
				if err != nil {
					return err
				}
				if byKey != nil || byRef != nil {
					return fmt.Errorf("payout %s found: %v, %v", x.MerchantRef, byKey, byRef)
				}
				return write(tx)
			}
		}
		tripsBefore := s.BatchRoundTrips()
		if err := errors.Join(batch(t, s, fns...)...); err != nil {
			t.Fatal(err)
		}
		if trips := s.BatchRoundTrips() - tripsBefore; trips != 1 {
			t.Fatalf("%d round trips; want 1", trips)
		}
		for _, x := range xs {
			if got, err := s.Transaction(ctx, m.ID, x.ID); err != nil || got.IdempotencyKey != x.IdempotencyKey {
				t.Fatalf("payout %s: %+v, %v", x.MerchantRef, got, err)
			}
		}
	})

	t.Run("two round trips", func(t *testing.T) {
		counting(t)
		cs := []*command{{lookups: 2}, {lookups: 1}, {lookups: 2}, {lookups: 1}}
		errs, trips, _, reruns := run(t, cs...)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if trips != 2 || reruns != 0 {
			t.Fatalf("%d round trips, %d reruns; want 2 and 0", trips, reruns)
		}
		committed(t, cs...)
	})

	t.Run("a command that waits", func(t *testing.T) {
		// The others' round trip goes when the wait ends, well before the
		// slow command's 300 ms, and not before the three have sent.
		t.Cleanup(s.SetMuxWait(100 * time.Millisecond))
		slow := &command{lookups: 1, wait: 300 * time.Millisecond}
		cs := []*command{{lookups: 1}, slow, {lookups: 1}, {lookups: 1}}
		errs, trips, _, _ := run(t, cs...)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c != slow && !c.looked.Before(slow.looked) {
				t.Fatalf("command %s looked up at %v, after the slow one's wait ended (%v)", c.x.MerchantRef,
					c.looked.Format(time.StampMicro), slow.looked.Format(time.StampMicro))
			}
		}
		if trips != 2 {
			t.Fatalf("%d round trips; want 2: the others', then the slow one's", trips)
		}
		committed(t, cs...)
	})

	t.Run("the timer after a long round trip", func(t *testing.T) {
		// One command's lookup waits 100 ms for a row this test holds; a
		// second sleeps 600 ms without a statement; a third looks up once
		// the first round trip is under way. The third's lookup must go
		// once the first round trip ends and muxWait passes, not when
		// the sleeper wakes.
		held, lock := heldPayment(t, s, m, "side-held")
		committed := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, err := lock.Exec(ctx, `COMMIT`)
			committed <- err
		}()
		defer func() {
			if err := <-committed; err != nil {
				t.Error(err)
			}
		}()
		var third, woke time.Time
		fns := []func(xaalis.Tx) error{
			func(tx xaalis.Tx) error {
				_, err := tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, held.MerchantRef)
				return err
			},
			func(tx xaalis.Tx) error {
				time.Sleep(600 * time.Millisecond)
				woke = time.Now()
				return nil
			},
			func(tx xaalis.Tx) error {
				time.Sleep(20 * time.Millisecond)
				_, err := tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, "side-none")
				third = time.Now()
				if !errors.Is(err, xaalis.ErrNotFound) {
					return fmt.Errorf("side-none: %v", err)
				}
				return nil
			},
		}
		if err := errors.Join(batch(t, s, fns...)...); err != nil {
			t.Fatal(err)
		}
		if !third.Before(woke.Add(-300 * time.Millisecond)) {
			t.Fatalf("the third lookup returned at %v, the sleeper woke at %v", third.Format(time.StampMicro),
				woke.Format(time.StampMicro))
		}
	})

	t.Run("two debits that together overdraw", func(t *testing.T) {
		// Each debit alone fits the balance, both do not: the batch's
		// check at the COMMIT counts the second after the first, the
		// batch rolls back, and run alone one of them is refused.
		account := ledger.Merchant("test", m.ID, ledger.Available)
		balance := func() (int64, error) {
			b, _, err := s.Balances(ctx, []string{account}, "XOF")
			return b[account], err
		}
		bal, err := balance()
		if err != nil || bal <= 0 {
			t.Fatalf("balance %d, %v", bal, err)
		}
		debit := func(tx xaalis.Tx) error {
			return tx.PostEntry(ctx, &ledger.Entry{ID: xaalis.NewUUIDv7(), Mode: "test", MerchantID: m.ID,
				Kind: "payout.reserve", RefType: "transaction", RefID: xaalis.NewUUIDv7(), CreatedAt: pgT0,
				Postings: []ledger.Posting{
					{Account: ledger.Merchant("test", m.ID, ledger.Available), Currency: "XOF", Amount: -(bal*6/10 + 1)},
					{Account: ledger.Merchant("test", m.ID, ledger.Reserved), Currency: "XOF", Amount: bal*6/10 + 1},
				}})
		}
		before := s.Stats()
		errs := batch(t, s, debit, debit)
		if (errs[0] == nil) == (errs[1] == nil) || xaalis.ErrorCode(errors.Join(errs...)) != xaalis.EInsufficientBalance {
			t.Fatalf("errors %v; want one insufficient_balance", errs)
		}
		if r := s.Stats().Reruns - before.Reruns; r != 2 {
			t.Fatalf("%d commands run again alone; want 2", r)
		}
		if after, err := balance(); err != nil || after != bal-(bal*6/10+1) {
			t.Fatalf("balance after: %d, %v; want %d", after, err, bal-(bal*6/10+1))
		}
	})

	t.Run("a statement fails", func(t *testing.T) {
		bad := &command{lookups: 1, payerMode: "no-such-mode"}
		cs := []*command{{lookups: 1}, bad, {lookups: 1}, {lookups: 1}}
		errs, _, _, reruns := run(t, cs...)
		for i, c := range cs {
			if (errs[i] != nil) != (c == bad) {
				t.Fatalf("command %d: %v", i, errs[i])
			}
		}
		if reruns != int64(len(cs)) {
			t.Fatalf("%d commands run again alone; want all %d", reruns, len(cs))
		}
		committed(t, cs[0], cs[2], cs[3])
		if _, err := s.Transaction(ctx, m.ID, bad.x.ID); !errors.Is(err, xaalis.ErrNotFound) {
			t.Fatalf("the failed command's payment: %v", err)
		}
	})
}

// heldTx begins a transaction on a connection of s of its own, for a test
// to hold rows with; the connection goes back at the test's end.
// TestGroupLockTimeout: a row another transaction holds locked does not
// stall a batch. Past the batch's lock_timeout the batch rolls back and
// its commands run again alone: the others commit while the row is still
// held, and the one that needs it waits alone, bounded by its own
// request's deadline.
func TestGroupLockTimeout(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	s.SetGroupWorkers(1)
	s.SetBatchLockTimeout(100 * time.Millisecond)
	m := storetest.NewMerchant(t, s)
	taken, holder := heldPayment(t, s, m, "lock-taken")
	// The holder lets go after 5 s at the latest, so that a batch that
	// waits for it fails the test rather than hanging it.
	released := make(chan struct{})
	timer := time.AfterFunc(5*time.Second, func() {
		holder.Exec(context.Background(), `ROLLBACK`)
		close(released)
	})
	defer func() {
		if timer.Stop() {
			holder.Exec(context.Background(), `ROLLBACK`)
		}
	}()

	var fns []func(xaalis.Tx) error
	var xs []*xaalis.Transaction
	for i := range 4 {
		x := pgPayment(m, fmt.Sprintf("lock-free-%d", i))
		xs = append(xs, x)
		fns = append(fns, groupCommand(m, x))
	}
	// As a request's command does, it reads with its request's context.
	waiting, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	fns = append(fns, func(tx xaalis.Tx) error {
		_, err := tx.TransactionByMerchantRefForUpdate(waiting, m.ID, xaalis.ModeTest, xaalis.KeySecret, taken.MerchantRef)
		return err
	})
	ctxs := make([]context.Context, len(fns))
	ctxs[len(fns)-1] = waiting
	reruns := s.Stats().Reruns
	errs := batchCtx(t, s, ctxs, fns...)
	select {
	case <-released:
		t.Fatal("the batch waited for the row's holder")
	default:
	}
	for i, x := range xs {
		if errs[i] != nil {
			t.Fatalf("payment %s: %v", x.MerchantRef, errs[i])
		}
		if _, err := s.Transaction(ctx, m.ID, x.ID); err != nil {
			t.Fatalf("payment %s: %v", x.MerchantRef, err)
		}
	}
	if errs[len(fns)-1] == nil {
		t.Fatal("the command that needs the held row: no error, want its request's deadline")
	}
	if got := s.Stats().Reruns - reruns; got != int64(len(fns)) {
		t.Fatalf("%d commands ran again alone, want %d", got, len(fns))
	}
}

// TestGroupSettings: a batch's transaction has its lock_timeout and
// generic plans; a command alone has neither.
func TestGroupSettings(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	s.SetGroupWorkers(1)
	s.SetBatchLockTimeout(1500 * time.Millisecond)
	names := []string{"lock_timeout", "plan_cache_mode"}
	read := func(got *[]string) func(xaalis.Tx) error {
		return func(tx xaalis.Tx) error {
			*got = nil
			for _, n := range names {
				v, err := postgres.Setting(ctx, tx, n)
				if err != nil {
					return err
				}
				*got = append(*got, v)
			}
			return nil
		}
	}
	got := make([][]string, 3)
	if err := errors.Join(batch(t, s, read(&got[0]), read(&got[1]))...); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, read(&got[2])); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"1500ms", "force_generic_plan"}, {"1500ms", "force_generic_plan"}, {"0", "auto"}} {
		if !slices.Equal(got[i], want) {
			t.Errorf("command %d: %s %q, want %q", i, names, got[i], want)
		}
	}
}

// heldPayment stores a payment of m with merchant_ref ref and locks its
// row in a transaction held open on the connection it returns (heldTx).
func heldPayment(t *testing.T, s *postgres.Store, m *xaalis.Merchant, ref string) (*xaalis.Transaction, *pgxpool.Conn) {
	t.Helper()
	ctx := context.Background()
	x := pgPayment(m, ref)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, x) }); err != nil {
		t.Fatal(err)
	}
	c := heldTx(t, s)
	if _, err := c.Exec(ctx, `SELECT 1 FROM transactions WHERE id = $1 FOR UPDATE`, x.ID); err != nil {
		t.Fatal(err)
	}
	return x, c
}

func heldTx(t *testing.T, s *postgres.Store) *pgxpool.Conn {
	t.Helper()
	c, err := s.AcquireRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if _, err := c.Exec(context.Background(), `BEGIN`); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPaymentBesideMerchantLock: a payment's rows (its Idempotency-Key,
// payer, transaction, event and ledger entry) do not lock their merchant's
// row (migration 00018). A transaction holding that row FOR UPDATE, as a
// payout request's submission or a merchant's update does, no longer holds
// the merchant's payments behind it: before, each row's foreign key check
// waited for it, and the batches behind them queued.
func TestPaymentBesideMerchantLock(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	m := storetest.NewMerchant(t, s)
	held := heldTx(t, s)
	if _, err := held.Exec(ctx, `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, m.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		x := pgPayment(m, fmt.Sprintf("beside-%d", i))
		x.PayerPhone = fmt.Sprintf("+2217700200%d", i)
		write := groupCommand(m, x)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.Update(cctx, func(tx xaalis.Tx) error {
			if _, err := tx.ClaimIdempotency(cctx, xaalis.Claim{Scope: xaalis.IdempotencyScope{MerchantID: m.ID,
				Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: x.MerchantRef}, Fingerprint: []byte("fp"),
				Token: x.ID, Now: pgT0, Lease: time.Minute}); err != nil {
				return err
			}
			_, cust, err := tx.TransactionByMerchantRefAndPayer(cctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, x.MerchantRef,
				&xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Phone: x.PayerPhone,
					CreatedAt: pgT0, UpdatedAt: pgT0})
			if err != nil {
				return err
			}
			x.CustomerID = cust.ID
			return write(tx)
		})
		cancel()
		if err != nil {
			t.Fatalf("payment %d while the merchant's row is locked: %v", i, err)
		}
	}
}
