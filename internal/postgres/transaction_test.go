package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

var pgT0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func pgPayment(m *xaalis.Merchant, ref string) *xaalis.Transaction {
	return &xaalis.Transaction{
		ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest, Type: xaalis.TypePayment,
		Reference: xaalis.NewReference(), MerchantRef: ref, Status: xaalis.StatusInitiated,
		Amount: xaalis.Units(5000, xaalis.XOF), LimitAmount: 500000, Country: "SN",
		ExpiresAt: pgT0.Add(30 * time.Minute), CreatedAt: pgT0, UpdatedAt: pgT0,
	}
}

// TestEventDataExact stores event data that jsonb would rewrite (spacing,
// key order, a duplicate key, escapes): it comes back byte for byte.
func TestEventDataExact(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	x := pgPayment(m, "")
	data := "{ \"b\":1,\n\t\"a\" : [1.50, 2e3], \"a\":\"\\u00e9\", \"z\": null }"
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, x); err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
			Type: "payment.success", ObjectType: "transaction", ObjectID: x.ID, Data: []byte(data), CreatedAt: pgT0})
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, x.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	if string(evs[0].Data) != data || evs[0].Seq != 1 || !evs[0].CreatedAt.Equal(pgT0) || evs[0].CreatedAt.Location() != time.UTC {
		t.Fatalf("event = %+v, data %q", evs[0], evs[0].Data)
	}
}

// TestEventSeqConcurrent numbers events of one object from many
// transactions at once, none of which locks the object's row: the
// advisory lock still gives 1..n without a gap or a duplicate.
func TestEventSeqConcurrent(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	x := pgPayment(m, "")
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, x) }); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				return tx.InsertEvent(ctx, &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
					Type: "payment.success", ObjectType: "transaction", ObjectID: x.ID,
					Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: pgT0})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	evs, err := s.Events(ctx, x.ID)
	if err != nil || len(evs) != n {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	seqs := make([]int, 0, n)
	for _, e := range evs {
		seqs = append(seqs, int(e.Seq))
	}
	sort.Ints(seqs)
	for i, q := range seqs {
		if q != i+1 {
			t.Fatalf("seqs = %v", seqs)
		}
	}
}

// TestDuplicateMerchantRefOnly maps only the merchant_ref index to
// ErrDuplicateMerchantRef: another unique violation stays an error of its
// own.
func TestDuplicateMerchantRefOnly(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	x := pgPayment(m, "order-1")
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, x) }); err != nil {
		t.Fatal(err)
	}
	sameRef := pgPayment(m, "order-2")
	sameRef.Reference = x.Reference
	err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, sameRef) })
	if err == nil || errors.Is(err, xaalis.ErrDuplicateMerchantRef) {
		t.Fatalf("duplicate reference: %v", err)
	}
	// Payments without a merchant_ref never collide.
	for range 2 {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, pgPayment(m, "")) }); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Transaction(ctx, "", x.ID)
	if err != nil || got.Metadata == nil || len(got.Metadata) != 0 || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("nil metadata read back as %#v, %v", got, err)
	}
}

// TestLookupReadsByIndex: status's lookup by id, reference or merchant_ref
// reads the rows it returns through their indexes, even on a table never
// analysed (a new database, autovacuum yet to run). An OR of the three read
// every transaction of the merchant there: 0.69 ms for 1,000 payments.
func TestLookupReadsByIndex(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, pgtest.URL(t))
	m := storetest.NewMerchant(t, s)
	seeded, err := s.SeedPayments(ctx, xaalis.SeedSpec{MerchantID: m.ID, Mode: xaalis.ModeTest, N: 500,
		Amount: xaalis.Units(1000, xaalis.XOF), Fee: xaalis.Units(10, xaalis.XOF), Provider: "channel_a", Country: "SN",
		From: time.Unix(1_700_000_000, 0), To: time.Unix(1_700_086_400, 0), Sample: 1, BaseURL: "https://pay.example"})
	if err != nil || len(seeded) != 1 {
		t.Fatalf("seed: %v, %v", seeded, err)
	}
	// What the planner knows of a table never analysed: nothing.
	for _, stmt := range []string{
		`DELETE FROM pg_statistic WHERE starelid = 'transactions'::regclass`,
		`UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = 'transactions'::regclass`,
	} {
		if err := s.ExecRaw(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	other := storetest.NewMerchant(t, s)
	for _, key := range []string{seeded[0].ID, seeded[0].Reference} {
		if found, err := s.LookupTransactions(ctx, other.ID, key); err != nil || len(found) != 0 {
			t.Fatalf("another merchant's lookup of %s: %v, %v", key, found, err)
		}
		found, err := s.LookupTransactions(ctx, m.ID, key)
		if err != nil || len(found) != 1 || found[0].ID != seeded[0].ID {
			t.Fatalf("lookup %s: %v, %v", key, found, err)
		}
		plan, err := s.ExplainLookup(ctx, m.ID, key)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "Rows Removed by Filter") || strings.Contains(plan, "transactions_list") ||
			strings.Contains(plan, "Seq Scan") {
			t.Errorf("lookup %s reads rows it does not return:\n%s", key, plan)
		}
	}
}

// TestUpsertCustomerReadsKnownPayer upserts payers as payment creation
// does: a known payer with a name is only read (its row keeps its
// version, so nothing is written or locked), a blank name is filled, and
// concurrent first payments of one phone make one customer.
func TestUpsertCustomerReadsKnownPayer(t *testing.T) {
	ctx := context.Background()
	s := open(t).(*postgres.Store)
	m := storetest.NewMerchant(t, s)
	try := func(phone, name string) (c *xaalis.Customer, err error) {
		err = s.Update(ctx, func(tx xaalis.Tx) error {
			var err error
			c, err = tx.UpsertCustomer(ctx, &xaalis.Customer{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: xaalis.ModeTest,
				Phone: phone, Name: name, CreatedAt: pgT0, UpdatedAt: pgT0})
			return err
		})
		return c, err
	}
	upsert := func(phone, name string) *xaalis.Customer {
		t.Helper()
		c, err := try(phone, name)
		if err != nil {
			t.Fatalf("upsert %s %q: %v", phone, name, err)
		}
		return c
	}
	version := func(id string) string {
		t.Helper()
		v, err := s.CustomerVersion(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// The lookup goes by the unique index, not through customers_list and
	// every customer of the merchant, even before the table has statistics.
	if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO customers (id, merchant_id, mode, phone, name, created_at, updated_at)
		SELECT 'cus-' || i, '%s', 'test', '+2217710' || lpad(i::text, 5, '0'), '', now(), now()
		FROM generate_series(1, 5000) AS i`, m.ID)); err != nil {
		t.Fatal(err)
	}
	plan, err := s.ExplainUpsertCustomer(ctx, &xaalis.Customer{ID: "x", MerchantID: m.ID, Mode: xaalis.ModeTest,
		Phone: "+221771000001", CreatedAt: pgT0, UpdatedAt: pgT0})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "customers_phone") || strings.Contains(plan, "customers_list") {
		t.Fatalf("the customer lookup's plan:\n%s", plan)
	}

	named := upsert("+221770000020", "Awa")
	v := version(named.ID)
	for _, name := range []string{"Awa", "Fatou", ""} {
		if c := upsert("+221770000020", name); c.ID != named.ID || c.Name != "Awa" || c.Phone != "+221770000020" ||
			!c.CreatedAt.Equal(pgT0) {
			t.Fatalf("known payer with name %q = %+v, want %+v", name, c, named)
		}
		if got := version(named.ID); got != v {
			t.Fatalf("known payer with name %q: row rewritten (xmin %s, was %s)", name, got, v)
		}
	}

	blank := upsert("+221770000021", "")
	v = version(blank.ID)
	if c := upsert("+221770000021", ""); c.ID != blank.ID || version(blank.ID) != v {
		t.Fatalf("known payer without a name = %+v, rewritten: %v", c, version(blank.ID) != v)
	}
	if c := upsert("+221770000021", "Moussa"); c.ID != blank.ID || c.Name != "Moussa" {
		t.Fatalf("a name for a blank customer = %+v", c)
	}

	// A first payment of a phone whose customer another transaction is
	// inserting waits for it, then finds that customer.
	lock := heldTx(t, s)
	if _, err := lock.Exec(ctx, `INSERT INTO customers (id, merchant_id, mode, phone, name, created_at, updated_at)
		VALUES ('cus-held', $1, 'test', '+221770000023', 'Held', now(), now())`, m.ID); err != nil {
		t.Fatal(err)
	}
	waited := make(chan *xaalis.Customer, 1)
	go func() {
		c, err := try("+221770000023", "Other")
		if err != nil {
			t.Error(err)
		}
		waited <- c
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var n int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`).
			Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upsert did not wait for the held insert")
		}
	}
	if _, err := lock.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if c := <-waited; c == nil || c.ID != "cus-held" || c.Name != "Held" {
		t.Fatalf("the upsert after a concurrent insert = %+v", c)
	}

	// First payments of one phone at once: one customer, found by all.
	var wg sync.WaitGroup
	ids, errs := make([]string, 8), make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := try("+221770000022", fmt.Sprint("payer ", i))
			if errs[i] = err; err == nil {
				ids[i] = c.ID
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil || id != ids[0] {
			t.Fatalf("concurrent first upserts gave customers %v, errors %v", ids, errs)
		}
	}
}
