package pgtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
)

// TestURL checks that the schema exists and is the connection's
// search_path, and that it is dropped when the test ends.
func TestURL(t *testing.T) {
	ctx := context.Background()
	var schema string
	t.Run("schema", func(t *testing.T) {
		u := pgtest.URL(t)
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var path string
		if err := conn.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &path); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "xt_") || path != schema {
			t.Fatalf("current_schema %q, search_path %q", schema, path)
		}
		if _, err := conn.Exec(ctx, `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
		var in string
		if err := conn.QueryRow(ctx, `SELECT schemaname FROM pg_tables WHERE tablename = 't' AND schemaname = $1`, schema).Scan(&in); err != nil {
			t.Fatalf("table not in the test schema: %v", err)
		}
	})
	if schema == "" {
		return // skipped
	}
	conn, err := pgx.Connect(ctx, os.Getenv(pgtest.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s was not dropped", schema)
	}
}
