package testutil

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// Backend opens a fresh store of one kind for a test, closed at its end.
type Backend struct {
	Name string
	Open func(t *testing.T) xaalis.Store
}

// Backends are SQLite, in a file of the test's own directory, and
// PostgreSQL, in a schema of the test's own (pgtest.URL).
var Backends = []Backend{
	{"SQLite", func(t *testing.T) xaalis.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"PostgreSQL", func(t *testing.T) xaalis.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// EachBackend runs f as a parallel subtest per backend.
func EachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}
