package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// ExecRaw runs a statement on the pool, for the conformance suite's checks
// of guarantees the database itself keeps (storetest.Raw).
func (s *Store) ExecRaw(ctx context.Context, stmt string) error {
	_, err := s.pool.Exec(ctx, stmt)
	return err
}

// ExplainLookup returns the plan LookupTransactions' statement runs on,
// with what it read (EXPLAIN ANALYZE).
func (s *Store) ExplainLookup(ctx context.Context, merchantID, key string) (string, error) {
	rows, err := s.pool.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF) `+lookupSQL, merchantID, key)
	if err != nil {
		return "", err
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(plan, "\n"), err
}

// DumpRaw returns the text of every row of every table of the store's
// schema (storetest.Dumper); bytea columns come out in hex.
func (s *Store) DumpRaw(ctx context.Context) ([]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		return nil, err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	rows.Close()
	var out []byte
	for _, t := range tables {
		var text *string
		if err := s.pool.QueryRow(ctx, `SELECT string_agg(r::text, E'\n') FROM `+t+` AS r`).Scan(&text); err != nil {
			return nil, err
		}
		if text != nil {
			out = append(out, *text...)
			out = append(out, '\n')
		}
	}
	return out, nil
}

// MigrateTo applies the migrations up to version to the schema of url, so
// that a test can leave data as an older release did before the next
// migration runs.
func MigrateTo(ctx context.Context, url string, version int64) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := newMigrations(db)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// PlanCount is how PostgreSQL planned one prepared statement on a
// connection: Generic executions used the statement's cached generic plan,
// Custom ones planned it again for their parameter values.
type PlanCount struct {
	Statement       string
	Generic, Custom int64
}

// PlanCounts reads pg_prepared_statements on each of the pool's idle
// connections: the statements pgx prepared and cached there.
func (s *Store) PlanCounts(ctx context.Context) ([]PlanCount, error) {
	var out []PlanCount
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for _, c := range conns {
		counts, err := queryAll(ctx, c, "plan counts", func(op string, row interface{ Scan(...any) error }) (PlanCount, error) {
			var p PlanCount
			return p, row.Scan(&p.Statement, &p.Generic, &p.Custom)
		}, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			return nil, err
		}
		out = append(out, counts...)
	}
	return out, nil
}

// SetGroupWorkers sets how many group workers the store starts at its
// first rerunnable command (group.go); call it before that.
func (s *Store) SetGroupWorkers(n int) { s.group.workersWanted = n }

// SetMuxWait sets how long a batch's statements wait for its commands
// still running (muxWait), and returns what puts it back.
func (s *Store) SetMuxWait(d time.Duration) (restore func()) {
	old := s.group.muxWait.Swap(int64(d))
	return func() { s.group.muxWait.Store(old) }
}

// GroupQueued is how many rerunnable commands wait for a worker.
func (s *Store) GroupQueued() int { return len(s.group.queue) }

// CustomerVersion returns the transaction that wrote a customer's row
// (xmin): it changes when the row is rewritten.
func (s *Store) CustomerVersion(ctx context.Context, id string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT xmin::text FROM customers WHERE id = $1`, id).Scan(&v)
	return v, err
}

// ExplainUpsertCustomer returns the generic plan of UpsertCustomer's
// statement, the plan its cached statement settles on.
func (s *Store) ExplainUpsertCustomer(ctx context.Context, c *xaalis.Customer) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) `+upsertCustomerSQL,
		c.ID, c.MerchantID, c.Mode, c.Phone, c.Name, c.CreatedAt, c.UpdatedAt)
	if err != nil {
		return "", err
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(plan, "\n"), err
}

// BatchRoundTrips is how many round trips the commands of batches made
// before their COMMITs.
func (s *Store) BatchRoundTrips() int64 { return s.batchTrips.Load() }

// PipeRead reads one row through the store's read pipe (readpipe.go),
// merged with the reads of the same statement waiting with it.
func (s *Store) PipeRead(ctx context.Context, sql string, args []any, dest ...any) error {
	return s.reads.read(ctx, true, sql, args, dest)
}

// PipeReadAlone reads one row through the read pipe as a statement of its
// own.
func (s *Store) PipeReadAlone(ctx context.Context, sql string, args []any, dest ...any) error {
	return s.reads.read(ctx, false, sql, args, dest)
}

// PipeQueued is how many reads wait for a reader of the pipe.
func (s *Store) PipeQueued() int { return len(s.reads.queue) }

// PipeCounts are the pipelines the pipe's readers sent, the reads in them
// and their statements (a read alone counts as a pipeline of one read and
// one statement).
func (s *Store) PipeCounts() (pipelines, reads, statements int64) {
	s.reads.countMu.Lock()
	defer s.reads.countMu.Unlock()
	return s.reads.pipelines, s.reads.reads, s.reads.statements
}

// AcquireRaw takes a connection of the pool, for a test to hold locks on.
func (s *Store) AcquireRaw(ctx context.Context) (*pgxpool.Conn, error) { return s.pool.Acquire(ctx) }

// SetBatchLockTimeout sets the lock_timeout of the store's batches.
func (s *Store) SetBatchLockTimeout(d time.Duration) { s.batchLockSetting = lockTimeout(d) }

// Setting reads a setting of tx's transaction (current_setting).
func Setting(ctx context.Context, tx xaalis.Tx, name string) (string, error) {
	var v string
	err := tx.(*Tx).tx.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}
