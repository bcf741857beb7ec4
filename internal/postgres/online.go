package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"
)

// Migrations that rebuild an index of a table that may be large.
//
// A plain CREATE INDEX holds a lock that blocks the table's writes until
// the index is built: on an installation with millions of transactions,
// every payment would wait out the build, and docs/deployment.md promises
// that nodes still on the previous release keep working while `xaalis
// migrate` runs. CREATE INDEX CONCURRENTLY does not block writes, but it
// cannot run in a transaction, and before it starts it waits for every
// transaction of the database that could still see the table as it was
// (the whole database's, not the table's: on a shared test database, the
// other tests', and two of them wait for each other). So such a migration
// is written in Go, and looks at the table first:
//
//   - An empty table (a new installation, every test) takes the plain
//     path: one transaction, as a SQL migration would run it.
//   - A table with rows takes the online path: the new index is built
//     CONCURRENTLY under a temporary name (<name>_new) while the old one
//     keeps enforcing what it enforces, then one short transaction drops
//     the old indexes or constraints and renames the new one. That
//     transaction takes the table's lock only to swap, with a lock_timeout
//     so that a long reader cannot queue every payment behind it.
//
// Every step can be run again after a failure at any point: a build that
// failed leaves an invalid <name>_new, dropped and built again; a valid
// <name>_new is kept; a swap either committed (the rerun builds again and
// swaps again, its drops IF EXISTS) or did not.

// onlineIndex is the index an online migration builds.
type onlineIndex struct {
	version int64
	table   string
	// name is the index's name when the migration is done.
	name string
	// def follows "CREATE [UNIQUE] INDEX name": "ON table (...) [WHERE ...]".
	def    string
	unique bool
	// swap drops what the new index replaces, IF EXISTS, before it is
	// built (plain path) or renamed (online path).
	swap []string
	// down undoes the migration, in one transaction.
	down []string
}

// onlineIndexes are migrations 00016 and 00017, which were SQL files that
// built their indexes with a plain CREATE INDEX.
var onlineIndexes = []onlineIndex{
	{
		// One index on merchant_ref instead of two. transactions_merchant_ref
		// kept a merchant's references unique, led by the merchant; the
		// console's search across merchants needed a second index led by the
		// reference (00010's transactions_merchant_ref_any). Led by the
		// reference, the unique index serves both: uniqueness is the same set
		// of columns in any order, and a merchant's lookup gives every column
		// of it. A payment's merchant_ref lands at a random place of each
		// index, so each cost a leaf page written per payment. The store
		// recognises a violation by the index's name: keep it.
		version: 16,
		table:   "transactions",
		name:    "transactions_merchant_ref",
		def:     "ON transactions (merchant_ref, merchant_id, mode, key_type) WHERE merchant_ref IS NOT NULL",
		unique:  true,
		swap: []string{
			"DROP INDEX IF EXISTS transactions_merchant_ref_any",
			"DROP INDEX IF EXISTS transactions_merchant_ref",
		},
		down: []string{
			"DROP INDEX transactions_merchant_ref",
			`CREATE UNIQUE INDEX transactions_merchant_ref ON transactions (merchant_id, mode, key_type, merchant_ref)
    WHERE merchant_ref IS NOT NULL`,
			"CREATE INDEX transactions_merchant_ref_any ON transactions (merchant_ref) WHERE merchant_ref IS NOT NULL",
		},
	},
	{
		// A payer's customer is found by (merchant_id, mode, phone) at every
		// payment. Without statistics (a new table, autovacuum yet to analyse
		// it) the planner costs that lookup the same through the unique index
		// and through customers_list (merchant_id, mode, created_at, id),
		// which reads every customer of the merchant and filters on the
		// phone; of two equal paths it keeps the one of the index it meets
		// first, the newest. customers_list (00005) was newer than the table's
		// UNIQUE constraint, so the lookup read 5,000 rows for one: 0.8 ms a
		// payment. The same unique index, made again after customers_list,
		// wins the tie; with statistics it wins on its own.
		// TestUpsertCustomerReadsKnownPayer checks the plan.
		version: 17,
		table:   "customers",
		name:    "customers_phone",
		def:     "ON customers (merchant_id, mode, phone)",
		unique:  true,
		swap: []string{
			"ALTER TABLE customers DROP CONSTRAINT IF EXISTS customers_merchant_id_mode_phone_key",
			"DROP INDEX IF EXISTS customers_phone",
		},
		down: []string{
			"ALTER TABLE customers ADD CONSTRAINT customers_merchant_id_mode_phone_key UNIQUE USING INDEX customers_phone",
		},
	},
}

// swapLockTimeout bounds the wait of an online migration's swap for the
// table's lock; past it the migration fails, and runs again from its
// built index.
const swapLockTimeout = "5s"

// goMigrations are the migrations written in Go, beside migration/*.sql.
func goMigrations() []*goose.Migration {
	var out []*goose.Migration
	for _, ix := range onlineIndexes {
		out = append(out, goose.NewGoMigration(ix.version,
			&goose.GoFunc{RunDB: ix.up, Mode: goose.TransactionDisabled},
			&goose.GoFunc{RunTx: ix.runDown, Mode: goose.TransactionEnabled}))
	}
	return out
}

func (ix onlineIndex) create(name string, concurrently bool) string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	if concurrently {
		b.WriteString("CONCURRENTLY ")
	}
	b.WriteString(name + " " + ix.def)
	return b.String()
}

// up runs the migration: on the plain path if the table is empty, on the
// online path otherwise.
func (ix onlineIndex) up(ctx context.Context, db *sql.DB) error {
	var rows bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+ix.table+")").Scan(&rows); err != nil {
		return fmt.Errorf("migration %d: read %s: %w", ix.version, ix.table, err)
	}
	if !rows {
		return ix.inTx(ctx, db, "", slices.Concat(ix.swap, []string{ix.create(ix.name, false)}))
	}
	return ix.online(ctx, db)
}

// online builds the index CONCURRENTLY as <name>_new, then swaps it in.
func (ix onlineIndex) online(ctx context.Context, db *sql.DB) error {
	tmp := ix.name + "_new"
	// A build that failed (cancelled, the server stopped, a duplicate)
	// leaves an invalid index behind, which a CREATE INDEX IF NOT EXISTS
	// would take as built.
	var valid sql.NullBool
	if err := db.QueryRowContext(ctx, "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", tmp).Scan(&valid); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("migration %d: read %s: %w", ix.version, tmp, err)
	}
	if valid.Valid && !valid.Bool {
		if _, err := db.ExecContext(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+tmp); err != nil {
			return fmt.Errorf("migration %d: drop invalid %s: %w", ix.version, tmp, err)
		}
	}
	if !valid.Bool {
		if _, err := db.ExecContext(ctx, ix.create(tmp, true)); err != nil {
			return fmt.Errorf("migration %d: build %s: %w", ix.version, tmp, err)
		}
	}
	return ix.inTx(ctx, db, swapLockTimeout, slices.Concat(ix.swap, []string{"ALTER INDEX " + tmp + " RENAME TO " + ix.name}))
}

// inTx runs statements in one transaction, with a lock_timeout if given.
func (ix onlineIndex) inTx(ctx context.Context, db *sql.DB, lockTimeout string, stmts []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %d: begin: %w", ix.version, err)
	}
	defer tx.Rollback()
	if lockTimeout != "" {
		if _, err := tx.ExecContext(ctx, "SELECT set_config('lock_timeout', $1, true)", lockTimeout); err != nil {
			return fmt.Errorf("migration %d: lock_timeout: %w", ix.version, err)
		}
	}
	if err := ix.exec(ctx, tx, stmts); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %d: commit: %w", ix.version, err)
	}
	return nil
}

func (ix onlineIndex) runDown(ctx context.Context, tx *sql.Tx) error {
	if err := ix.exec(ctx, tx, ix.down); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	return nil
}

// exec runs statements one after another in tx.
func (ix onlineIndex) exec(ctx context.Context, tx *sql.Tx, stmts []string) error {
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("migration %d: %s: %w", ix.version, s, err)
		}
	}
	return nil
}
