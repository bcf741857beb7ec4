package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/storetest"
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
	return s, path
}

func TestStore(t *testing.T) { storetest.Run(t, open) }

func TestPragmas(t *testing.T) {
	s := open(t).(*sqlite.Store)
	got := s.Pragmas(context.Background())
	want := map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pragma %s = %q, want %q", k, got[k], v)
		}
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
