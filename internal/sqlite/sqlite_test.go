package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func open(t *testing.T) xaalis.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
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
