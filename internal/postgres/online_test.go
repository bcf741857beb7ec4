package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
)

// atVersion15 returns a schema migrated to 00015, as a release before the
// online index migrations left it, with a merchant, a customer and a
// payment in it, and a connection to it.
func atVersion15(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	if err := postgres.MigrateTo(ctx, url, 15); err != nil {
		t.Fatal(err)
	}
	return url, withRows(t, url)
}

// withRows connects to url's schema and writes a merchant, a customer and
// a payment.
func withRows(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn := connect(t, url)
	epoch := time.Unix(0, 0).UTC()
	mustExec(t, conn, `INSERT INTO merchants (id, name, country, settlement_currency, status, kyc, created_at, updated_at)
		VALUES ('mer_old', 'Old', 'SN', 'XOF', 'active', 'approved', $1, $1)`, epoch)
	mustExec(t, conn, `INSERT INTO customers (id, merchant_id, mode, phone, created_at, updated_at)
		VALUES ('cus_old', 'mer_old', 'test', '+221770000001', $1, $1)`, epoch)
	if err := insertPayment(context.Background(), conn, "txn_old", "order-old"); err != nil {
		t.Fatal(err)
	}
	return conn
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// insertPayment writes a payment's row as the store does, merchant_ref
// included.
func insertPayment(ctx context.Context, db execer, id, merchantRef string) error {
	now := time.Unix(0, 0).UTC()
	_, err := db.Exec(ctx, `INSERT INTO transactions (id, merchant_id, mode, type, reference, merchant_ref, status,
			amount, currency, limit_amount, country, key_type, customer_id, expires_at, created_at, updated_at)
		VALUES ($1, 'mer_old', 'test', 'payment', 'ref_' || $1, $2, 'success', 100000, 'XOF', 100000, 'SN', 'secret',
			'cus_old', $3, $3, $3)`, id, merchantRef, now)
	return err
}

// checkMigratedIndexes checks what 00016 and 00017 leave: the unique
// indexes under their names, valid, on their columns, and nothing of what
// they replaced or of their temporary names.
func checkMigratedIndexes(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT i.relname, x.indisvalid, x.indisunique, pg_get_indexdef(x.indexrelid)
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class r ON r.oid = x.indrelid
		WHERE r.relname IN ('transactions', 'customers') AND r.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	type index struct {
		valid, unique bool
		def           string
	}
	got := map[string]index{}
	for rows.Next() {
		var name string
		var ix index
		if err := rows.Scan(&name, &ix.valid, &ix.unique, &ix.def); err != nil {
			t.Fatal(err)
		}
		got[name] = ix
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name, cols := range map[string]string{
		"transactions_merchant_ref": "(merchant_ref, merchant_id, mode, key_type) WHERE (merchant_ref IS NOT NULL)",
		"customers_phone":           "(merchant_id, mode, phone)",
	} {
		ix, ok := got[name]
		if !ok || !ix.valid || !ix.unique || !strings.HasSuffix(ix.def, cols) {
			t.Errorf("%s: %+v (found %v), want a valid unique index on %s", name, ix, ok, cols)
		}
	}
	for _, name := range []string{"transactions_merchant_ref_any", "transactions_merchant_ref_new",
		"customers_phone_new", "customers_merchant_id_mode_phone_key"} {
		if ix, ok := got[name]; ok {
			t.Errorf("%s is still there: %+v", name, ix)
		}
	}
	// The merchant's references are still unique, under the index's name
	// the store recognises.
	var pgErr *pgconn.PgError
	if err := insertPayment(ctx, conn, "txn_dup", "order-old"); !errors.As(err, &pgErr) ||
		pgErr.Code != "23505" || pgErr.ConstraintName != "transactions_merchant_ref" {
		t.Errorf("a merchant_ref again: %v, want a unique violation of transactions_merchant_ref", err)
	}
}

// TestMigrateIndexesEmpty: on a new installation (empty tables) 00016 and
// 00017 build their indexes in one transaction, as the SQL files did.
func TestMigrateIndexesEmpty(t *testing.T) {
	url := pgtest.URL(t)
	openURL(t, url)
	checkMigratedIndexes(t, withRows(t, url))
}

// TestMigrateIndexesOnline: with payments in the table, 00016 builds its
// index without blocking them. An open transaction that wrote a payment
// holds the build; meanwhile another payment goes through within a
// lock_timeout of 2 s. A plain CREATE INDEX (or 00016's DROP INDEX) would
// queue that payment behind the migration's lock, itself waiting for the
// open transaction.
func TestMigrateIndexesOnline(t *testing.T) {
	ctx := context.Background()
	url, conn := atVersion15(t)

	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := insertPayment(ctx, tx, "txn_held", "order-held"); err != nil {
		t.Fatal(err)
	}

	migrated := make(chan error, 1)
	go func() {
		s, err := postgres.Open(ctx, url)
		if err == nil {
			s.Close()
		}
		migrated <- err
	}()
	// The migration reaches 00016 and waits for the open transaction.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
			AND query LIKE '%transactions_merchant_ref%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-migrated:
			t.Fatalf("the migration ended without waiting for the open transaction: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration did not reach 00016's index")
		}
		time.Sleep(20 * time.Millisecond)
	}

	writer := connect(t, url)
	mustExec(t, writer, `SET lock_timeout = '2s'`)
	if err := insertPayment(ctx, writer, "txn_during", "order-during"); err != nil {
		t.Errorf("a payment while 00016 builds its index: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-migrated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the migration did not end after the open transaction")
	}
	checkMigratedIndexes(t, conn)
}

// TestMigrateIndexesRetry: an online migration that failed part of the way
// runs again to the same end, whatever it left.
func TestMigrateIndexesRetry(t *testing.T) {
	const newDef = `ON transactions (merchant_ref, merchant_id, mode, key_type) WHERE merchant_ref IS NOT NULL`
	for _, tc := range []struct {
		name string
		// leave puts the schema, at 00015 with rows, where the failure left it.
		leave func(t *testing.T, url string, conn *pgx.Conn)
		// kept says whether the index left behind must be the one in use.
		kept bool
	}{
		{
			// A build cancelled or failed: the index is there, invalid
			// (here on other columns, so that keeping it would show).
			name: "invalid build",
			leave: func(t *testing.T, url string, conn *pgx.Conn) {
				mustExec(t, conn, `CREATE UNIQUE INDEX transactions_merchant_ref_new ON transactions (reference)`)
				mustExec(t, conn, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'transactions_merchant_ref_new'::regclass`)
			},
		},
		{
			// The build ended, the swap did not: the index is kept.
			name: "built, not swapped",
			leave: func(t *testing.T, url string, conn *pgx.Conn) {
				mustExec(t, conn, `CREATE UNIQUE INDEX transactions_merchant_ref_new `+newDef)
			},
			kept: true,
		},
		{
			// The swaps committed, goose did not record the versions.
			name: "swapped, not recorded",
			leave: func(t *testing.T, url string, conn *pgx.Conn) {
				if err := postgres.MigrateTo(context.Background(), url, 17); err != nil {
					t.Fatal(err)
				}
				mustExec(t, conn, `DELETE FROM goose_db_version WHERE version_id IN (16, 17)`)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url, conn := atVersion15(t)
			tc.leave(t, url, conn)
			var left uint32
			conn.QueryRow(ctx, `SELECT coalesce(to_regclass('transactions_merchant_ref_new')::oid, 0)`).Scan(&left)
			s := openURL(t, url)
			if err := s.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			checkMigratedIndexes(t, conn)
			var now uint32
			if err := conn.QueryRow(ctx, `SELECT 'transactions_merchant_ref'::regclass::oid`).Scan(&now); err != nil {
				t.Fatal(err)
			}
			if kept := left != 0 && now == left; kept != tc.kept {
				t.Errorf("the index left behind (oid %d) in use (oid %d): %v, want %v", left, now, kept, tc.kept)
			}
		})
	}
}
