package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func open(t *testing.T) xaalis.Store {
	s, _ := openPath(t)
	return s
}

// openPath opens a store in a fresh file and returns the file's path too.
func openPath(t *testing.T) (xaalis.Store, string) {
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SetSecretBox(testutil.Keyring(t))
	return s, path
}

func TestStore(t *testing.T) { storetest.Run(t, open) }

func TestPragmas(t *testing.T) {
	st, path := openPath(t)
	s := st.(*sqlite.Store)
	got := s.Pragmas(context.Background())
	// synchronous=NORMAL (1) on the writer: the syncer fdatasyncs the WAL
	// before any answer (TestAnswerWaitsForSync). journal_size_limit is the
	// WAL's limit: 256 MiB, less on a small filesystem (TestWALLimit).
	want := map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1", "busy_timeout": "10000",
		"temp_store": "2", "wal_autocheckpoint": "0", "journal_size_limit": fmt.Sprint(sqlite.WALLimitFor(path)), "page_size": "1024"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pragma %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestExistingPageSizeKept: a database made with another page size (every
// database made before pageSize was 1,024) opens, migrates and takes
// commands with its own; only a new database gets the new size.
func TestExistingPageSizeKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+sqlite.URIPath(path))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA page_size = 4096`, `PRAGMA journal_mode = WAL`, `CREATE TABLE before_pages (x INTEGER)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetSecretBox(testutil.Keyring(t))
	if got := s.Pragmas(ctx)["page_size"]; got != "4096" {
		t.Fatalf("page_size of an existing database = %s, want its own 4096", got)
	}
	m := storetest.NewMerchant(t, s)
	if _, err := s.Merchant(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerCorruption changes the ledger through a second connection to
// the same file: CheckLedger finds every difference.
func TestLedgerCorruption(t *testing.T) {
	s, path := openPath(t)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.LedgerCorruption(t, s, func(q string) error {
		_, err := db.ExecContext(context.Background(), q)
		return err
	})
}

// TestPathWithURICharacters: a path holding '#', '?' or '%' names its own
// file. (A parallel subtest's directory is named "Test…#01": before the
// path was escaped, SQLite cut it at '#' and every such test shared one
// database in /tmp.)
func TestPathWithURICharacters(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var ids []string
	for _, sub := range []string{"a#1", "a#2", "b?x=1", "c%41"} {
		s, err := sqlite.Open(ctx, filepath.Join(dir, sub, "x.db"))
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		m := storetest.NewMerchant(t, s)
		ids = append(ids, m.ID)
		s.Close()
	}
	for i, sub := range []string{"a#1", "a#2", "b?x=1", "c%41"} {
		s, err := sqlite.Open(ctx, filepath.Join(dir, sub, "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		for j, id := range ids {
			_, err := s.Merchant(ctx, id)
			if (err == nil) != (i == j) {
				t.Fatalf("database %s, merchant of %d: %v", sub, j, err)
			}
		}
		s.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Fatal("a file named after the cut path exists")
	}
}

// TestMigrateDebtFold: a database an older release left with a chargeback
// debt apart is migrated so that the debt is carried in available.
func TestMigrateDebtFold(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	if err := sqlite.MigrateTo(ctx, path, 11); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := storetest.DebtFoldRows
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO merchants (id, name, country, settlement_currency, status, kyc, created_at, updated_at)
		VALUES (?, 'Old', 'SN', 'XOF', 'active', 'approved', 0, 0)`, storetest.DebtFoldMerchant)
	for _, e := range rows.Entries {
		exec(`INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
			VALUES (?, 'test', ?, ?, 'transaction', ?, 0)`, e[0], storetest.DebtFoldMerchant, e[1], e[0])
	}
	for _, p := range rows.Postings {
		exec(`INSERT INTO ledger_postings (entry_id, line, account, currency, amount) VALUES (?, ?, ?, 'XOF', ?)`,
			p.Entry, p.Line, p.Account, p.Amount)
	}
	for _, b := range rows.Balances {
		nn := 0
		if b.NonNegative {
			nn = 1
		}
		exec(`INSERT INTO ledger_balances (account, currency, balance, non_negative, updated_at) VALUES (?, 'XOF', ?, ?, 0)`,
			b.Account, b.Balance, nn)
	}
	db.Close()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckDebtFold(t, s)
}

// TestDiskFull: a write that finds no room (max_page_count stands in for a
// full disk) answers service_unavailable and leaves nothing; reads go on;
// the readiness probe fails until writes succeed again.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	s, _ := openPath(t)
	st := s.(*sqlite.Store)
	storetest.NewMerchant(t, s)
	var pages int
	if err := st.ExecRaw(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	pages = st.PageCount(t)
	if err := st.ExecRaw(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := range 200 { // fill the last free pages
		m := &xaalis.Merchant{ID: xaalis.NewUUIDv7(), Name: strings.Repeat("x", 2000), Country: "SN", SettlementCurrency: xaalis.XOF,
			Status: xaalis.MerchantActive, KYC: xaalis.KYCPending, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateMerchant(ctx, m) }); err != nil {
			t.Logf("full after %d merchants", i)
			break
		}
	}
	var e *xaalis.Error
	if !errors.As(err, &e) || e.Code != xaalis.EServiceUnavailable || e.RetryAfter == 0 || !strings.Contains(e.Message, "disk is full") {
		t.Fatalf("write on a full disk: %v", err)
	}
	if _, err := s.Instances(ctx); err != nil {
		t.Fatalf("reads stop on a full disk: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("ready on a full disk")
	}
	if err := st.ExecRaw(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("not ready once space returns: %v", err)
	}
	storetest.NewMerchant(t, s)
	if got := st.IntegrityCheck(t); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
}

// TestSeedKeepsForeignKeys: the seed's transactions skip the foreign key
// checks, the writer's other commands keep them, during and after it.
func TestSeedKeepsForeignKeys(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.(xaalis.BulkSeeder).SeedPayments(ctx, xaalis.SeedSpec{MerchantID: m.ID, Mode: xaalis.ModeTest, N: 100,
		Amount: xaalis.Units(1000, xaalis.XOF), Fee: xaalis.Units(10, xaalis.XOF), Provider: "channel_a", Country: "SN",
		From: to.AddDate(0, -1, 0), To: to}); err != nil {
		t.Fatal(err)
	}
	orphan := &xaalis.Transaction{ID: xaalis.NewUUIDv7(), MerchantID: xaalis.NewUUIDv7(), Mode: xaalis.ModeTest,
		Type: xaalis.TypePayment, Reference: xaalis.NewReference(), Status: xaalis.StatusInitiated,
		Amount: xaalis.Units(1000, xaalis.XOF), LimitAmount: 100000, Country: "SN", ExpiresAt: to, CreatedAt: to, UpdatedAt: to}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, orphan) }); err == nil {
		t.Fatal("a transaction of no merchant was inserted after the seed: foreign keys are off")
	}
}

// TestSeedBesideTheWriter: the bulk seed writes its pages through a
// connection of its own, which takes its page cache of 256 MiB and its
// temporary table with it when closed. Through the writer's connection, the
// seed left it the hash table its cache grew, which every COMMIT of the
// writer then walked (seedConn). The seeded payments are the writer's to
// read at once.
func TestSeedBesideTheWriter(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	st := s.(*sqlite.Store)
	m := storetest.NewMerchant(t, s)
	to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	spec := xaalis.SeedSpec{MerchantID: m.ID, Mode: xaalis.ModeTest, N: 5000,
		Amount: xaalis.Units(1000, xaalis.XOF), Fee: xaalis.Units(10, xaalis.XOF), Provider: "channel_a", Country: "SN",
		From: to.AddDate(0, -1, 0), To: to, Sample: 10}
	before := st.WriterPagesWritten(t)
	sample, err := s.(xaalis.BulkSeeder).SeedPayments(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.WriterPagesWritten(t) - before; n > 100 {
		t.Fatalf("the writer's connection wrote %d pages during a seed of %d payments", n, spec.N)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		for _, p := range sample {
			x, err := tx.TransactionForUpdate(ctx, p.ID)
			if err != nil {
				return err
			}
			if x.Status != xaalis.StatusSuccess || x.Reference != p.Reference {
				return fmt.Errorf("seeded payment %s: %s, %s", x.ID, x.Status, x.Reference)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the writer reads the seeded payments: %v", err)
	}
	if got := st.IntegrityCheck(t); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
}

// TestLookupPlans: a merchant's record found by id or reference is found
// through the keys' own indexes, never by reading every record of the
// merchant. Without the "+merchant_id" of these lookups SQLite searched
// the merchant's list index (no statistics told it better), so that a
// status call cost a read of all of a merchant's payments.
func TestLookupPlans(t *testing.T) {
	db := planDB(t)
	for table, q := range sqlite.LookupQueries {
		all := queryPlan(t, db, q, "m", "k", "k", "k")
		if !strings.Contains(all, "MULTI-INDEX OR") || strings.Contains(all, "(merchant_id=?)") || strings.Contains(all, "SCAN "+table) {
			t.Errorf("%s: plan %q, want a search of each key's index", table, all)
		}
	}
}

// TestListByMerchantRefPlan: a list filtered by merchant_ref reads the
// merchant_ref index (a row or two), with or without a type; led by
// (merchant_id, mode, type), transactions_list would read every record of
// the merchant of that type.
func TestListByMerchantRefPlan(t *testing.T) {
	db := planDB(t)
	for _, f := range []xaalis.TxFilter{
		{MerchantID: "m", Mode: xaalis.ModeTest, MerchantRef: "order-1"},
		{MerchantID: "m", Mode: xaalis.ModeTest, MerchantRef: "order-1", Type: xaalis.TypePayment},
		{MerchantID: "m", Mode: xaalis.ModeTest, MerchantRef: "order-1", Type: xaalis.TypePayment, Status: xaalis.StatusSuccess},
	} {
		w, args := sqlite.TxListWhere(f)
		for _, q := range []string{`SELECT id FROM transactions WHERE ` + w + ` ORDER BY created_at DESC, id DESC LIMIT 10`,
			`SELECT count(*) FROM transactions WHERE ` + w} {
			if all := queryPlan(t, db, q, args...); !strings.Contains(all, "INDEX transactions_merchant_ref (merchant_ref=?") {
				t.Errorf("%s: plan %q, want a search of transactions_merchant_ref", q, all)
			}
		}
	}
}

// TestListIndexesAscending: the lists of transactions and customers,
// newest first, read their list index backwards, with no sort; the
// index keeps its times ascending, so that a new row is appended at the
// right edge of its merchant's range (one page written; descending, a
// payment wrote two to three pages of each, splitting the leftmost leaf).
func TestListIndexesAscending(t *testing.T) {
	db := planDB(t)
	w, args := sqlite.TxListWhere(xaalis.TxFilter{MerchantID: "m", Mode: xaalis.ModeTest, Type: xaalis.TypePayment,
		Status: xaalis.StatusSuccess})
	for index, q := range map[string]string{
		"transactions_list": `SELECT id FROM transactions WHERE ` + w + ` ORDER BY created_at DESC, id DESC LIMIT 10`,
		"customers_list":    `SELECT id FROM customers WHERE merchant_id = ? AND mode = ? ORDER BY created_at DESC, id DESC LIMIT 10`,
	} {
		a := args
		if index == "customers_list" {
			a = []any{"m", "test"}
		}
		if all := queryPlan(t, db, q, a...); !strings.Contains(all, "INDEX "+index+" ") || strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s read in order", q, all, index)
		}
		rows, err := db.Query(`SELECT name, desc FROM pragma_index_xinfo(?) WHERE key`, index)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var col string
			var desc bool
			if err := rows.Scan(&col, &desc); err != nil {
				t.Fatal(err)
			}
			if desc {
				t.Errorf("%s: column %s descending", index, col)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// planDB opens a migrated database read-only, for its query plans.
func planDB(t *testing.T) *sql.DB {
	t.Helper()
	_, path := openPath(t)
	db, err := sql.Open("sqlite", "file:"+sqlite.URIPath(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryPlan is SQLite's plan of q, its steps joined by "; ".
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(plan, "; ")
}

// TestUpsertCustomerWritesOnlyChanges: a returning payer's customer is
// read, not written again (a page dirtied, at a random place, for every
// payment of a known phone); a new phone and a name for a nameless
// customer are written.
func TestUpsertCustomerWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ids := map[string]string{} // phone: its customer
	for _, c := range []struct {
		name, phone, giving string
		writes              int64
		wantName            string
	}{
		{"new phone, no name", "+221770000101", "", 1, ""},
		{"known, still no name", "+221770000101", "", 0, ""},
		{"known, a name for it", "+221770000101", "Awa Diop", 1, "Awa Diop"},
		{"known, named, no name given", "+221770000101", "", 0, "Awa Diop"},
		{"known, named, another name", "+221770000101", "Fatou Sow", 0, "Awa Diop"},
		{"another phone, named", "+221770000102", "Moussa Ndiaye", 1, "Moussa Ndiaye"},
		{"that phone again", "+221770000102", "Moussa Ndiaye", 0, "Moussa Ndiaye"},
	} {
		err := s.Update(ctx, func(xtx xaalis.Tx) error {
			tx := xtx.(*sqlite.Tx)
			before, err := tx.TotalChanges(ctx)
			if err != nil {
				return err
			}
			id := xaalis.NewUUIDv7()
			got, err := tx.UpsertCustomer(ctx, &xaalis.Customer{ID: id, MerchantID: m.ID, Mode: xaalis.ModeTest,
				Phone: c.phone, Name: c.giving, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				return err
			}
			after, err := tx.TotalChanges(ctx)
			if err != nil {
				return err
			}
			if after-before != c.writes {
				return fmt.Errorf("%d rows written, want %d", after-before, c.writes)
			}
			if got.Phone != c.phone || got.Name != c.wantName || got.MerchantID != m.ID || got.Mode != xaalis.ModeTest {
				return fmt.Errorf("customer %+v", got)
			}
			// A known phone keeps its customer; a new one is made with
			// the id given.
			want, known := ids[c.phone]
			if !known {
				want, ids[c.phone] = id, id
			}
			if got.ID != want {
				return fmt.Errorf("customer %s, want %s", got.ID, want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// TestVacuumAfterSealingResumes: the file's rewrite after secrets in clear
// were sealed is recorded with the sealing; a run cut short before it
// (a full disk, a signal) rewrites the file at the next run, although
// nothing is left in clear then.
func TestVacuumAfterSealingResumes(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE leftover AS SELECT 'whsec_leftover_in_free_pages' AS v`, `DROP TABLE leftover`,
		`INSERT INTO settings (name, value) VALUES ('secrets_vacuum_pending', X'01')`,
	} {
		if err := storetest.ExecRaw(t, s, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ResealSecrets(ctx, 100, true); err != nil || n != 0 {
		t.Fatalf("reseal: %d %v", n, err)
	}
	storetest.WantNoSecretsInClear(t, s, "whsec_leftover_in_free_pages")
	if err := storetest.ExecRaw(t, s, `INSERT INTO settings (name, value) VALUES ('secrets_vacuum_pending', X'02')`); err != nil {
		t.Fatalf("the pending rewrite is still recorded after it ran: %v", err)
	}
}
