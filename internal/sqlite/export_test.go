package sqlite

import (
	"context"
	"io/fs"
	"os"
	"testing"

	"github.com/pressly/goose/v3"
	msqlite "modernc.org/sqlite"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// ExecRaw runs a statement in a write transaction, for the conformance
// suite's checks of guarantees the database itself keeps (storetest.Raw).
func (s *Store) ExecRaw(ctx context.Context, stmt string) error {
	return s.Update(ctx, func(tx xaalis.Tx) error {
		_, err := tx.(*Tx).tx.ExecContext(ctx, stmt)
		return err
	})
}

// DumpRaw returns the bytes of the database file and its write-ahead log
// (storetest.Dumper), after a checkpoint has written the log back.
func (s *Store) DumpRaw(ctx context.Context) ([]byte, error) {
	var path string
	if err := s.read.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return nil, err
	}
	var out []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// MigrateTo applies the migrations up to version to the database at path,
// so that a test can leave data as an older release did before the next
// migration runs.
func MigrateTo(ctx context.Context, path string, version int64) error {
	db, err := openWriter(path)
	if err != nil {
		return err
	}
	defer db.Close()
	sub, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// PageCount is the database's size in pages.
func (s *Store) PageCount(t testing.TB) int {
	var n int
	if err := s.read.QueryRowContext(context.Background(), `PRAGMA page_count`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// WriterPagesWritten is how many pages the writer's connection has written
// (SQLITE_DBSTATUS_CACHE_WRITE), read by the writer between batches.
func (s *Store) WriterPagesWritten(t testing.TB) int {
	var n int
	err := s.w.direct(context.Background(), func(querier) error {
		return s.w.conn.Raw(func(dc any) error {
			var err error
			n, _, err = dc.(msqlite.DBStatus).Status(msqlite.DBStatusCacheWrite, false)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// IntegrityCheck runs PRAGMA integrity_check.
func (s *Store) IntegrityCheck(t testing.TB) string {
	var out string
	if err := s.read.QueryRowContext(context.Background(), `PRAGMA integrity_check`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// LookupQueries are the lookups of a merchant's record by id or reference,
// for the test of their query plans.
var LookupQueries = map[string]string{
	"transactions":    lookupTxQuery,
	"disputes":        lookupDisputeQuery,
	"payout_requests": lookupPayoutRequestQuery,
}

// TxListWhere is the condition of a merchant's transaction list under f.
func TxListWhere(f xaalis.TxFilter) (string, []any) { return txListWhere(f) }

// TotalChanges is the rows the writer's connection has inserted, updated
// or deleted since it opened (SQLite's total_changes()).
func (t *Tx) TotalChanges(ctx context.Context) (n int64, err error) {
	err = t.tx.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n)
	return n, err
}

// WALLimitFor is walLimitFor: the WAL's limit for a database at path.
var WALLimitFor = walLimitFor
