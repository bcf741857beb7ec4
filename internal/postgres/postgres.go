// Package postgres is the Store on PostgreSQL, through pgx's native API
// and a connection pool. Every write transaction runs at READ COMMITTED;
// rows a command changes are locked with SELECT ... FOR UPDATE, so several
// server processes may share one database.
//
// The connection URL's search_path (a query parameter such as
// "?search_path=xaalis") chooses the schema that holds every table,
// goose's version table included.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/xaalis/xaalis/internal/xaalis"
)

//go:embed migration/*.sql
var migrations embed.FS

// Store is the PostgreSQL Store.
type Store struct {
	pool *pgxpool.Pool
}

var _ xaalis.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a keyword/value
// connection string) and applies the migrations, holding an advisory lock
// so that processes starting together migrate one at a time.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	// goose's advisory lock is database-wide; keying it by schema lets
	// installations (and tests) in separate schemas migrate side by side,
	// while processes sharing a schema still take turns.
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("read current schema: %w", err)
	}
	if schema == nil {
		return errors.New("migrations: no schema of the search_path exists")
	}
	h := fnv.New64a()
	h.Write([]byte("xaalis migrations\x00" + *schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	sub, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() // leaves the pool open
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// Pepper returns the installation's key-hashing secret, creating it on
// first use.
func (s *Store) Pepper(ctx context.Context) ([]byte, error) {
	const read = `SELECT value FROM settings WHERE name = 'key_pepper'`
	var v []byte
	err := s.pool.QueryRow(ctx, read).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make pepper: %w", err)
	}
	// Callers may race to create it: the first insert wins (the others wait
	// for it to commit, then do nothing) and all read the winner's value.
	if _, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('key_pepper', $1)
		ON CONFLICT (name) DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("create pepper: %w", err)
	}
	if err := s.pool.QueryRow(ctx, read).Scan(&v); err != nil {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	return v, nil
}

// InsertSettingOnce records a named setting unless it exists, and reports
// whether this call inserted it. A concurrent insert of the same name waits
// for the first transaction to end, so exactly one committed caller gets
// true.
func (t *Tx) InsertSettingOnce(ctx context.Context, name string, value []byte) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		name, value)
	if err != nil {
		return false, fmt.Errorf("insert setting: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Update runs fn in one READ COMMITTED transaction, committed when fn
// returns nil and rolled back otherwise.
func (s *Store) Update(ctx context.Context, fn func(tx xaalis.Tx) error) error {
	t, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Rolls back if fn fails or panics; a no-op after Commit.
	defer func() { _ = t.Rollback(ctx) }()
	if err := fn(&Tx{tx: t}); err != nil {
		return err
	}
	if err := t.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Tx is one write transaction.
type Tx struct{ tx pgx.Tx }

var _ xaalis.Tx = (*Tx)(nil)

// querier is what both the pool and a transaction offer.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// notFound maps pgx.ErrNoRows to xaalis.ErrNotFound and wraps other
// errors with op.
func notFound(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return xaalis.ErrNotFound
	}
	return fmt.Errorf("%s: %w", op, err)
}

// oneRow turns an update or delete that touched nothing into ErrNotFound.
func oneRow(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return xaalis.ErrNotFound
	}
	return nil
}

// utcPtr returns t in UTC, keeping nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nonNil makes an empty list for a nil one: a nil slice is SQL NULL to pgx
// and the list columns are NOT NULL.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// cidrs prepares a prefix list for a cidr[] column, which refuses host
// bits right of the mask: masking keeps which addresses a prefix contains.
func cidrs(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Masked()
	}
	return out
}

// nilIfEmpty reads an empty array back as nil, as the SQLite store does.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// queryAll runs a query and scans every row with scan; errors are wrapped
// with op.
func queryAll[T any](ctx context.Context, q querier, op string, scan func(string, interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(op, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
